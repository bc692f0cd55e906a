from __future__ import annotations

import pytest

from kafkaclone.connect.api import DataException, SinkRecord, SourceRecord
from kafkaclone.connect.data import INT64_SCHEMA, STRING_SCHEMA, struct_schema
from kafkaclone.connect.transforms import (
    ExtractFieldKey,
    InsertFieldValue,
    RegexRouter,
    ReplaceFieldValue,
    TimestampRouter,
    ValueToKey,
    java_replacement,
    simple_date_format,
)

pytestmark = pytest.mark.timeout(10)


def record(value: object, *, schema: object = None) -> SinkRecord:
    return SinkRecord(topic="orders", kafka_partition=3, key_schema=None, key=None,
                      value_schema=schema,  # type: ignore[arg-type]
                      value=value, timestamp=1_700_000_000_000, kafka_offset=42)


def test_insert_field_schemaless_and_with_schema() -> None:
    insert = InsertFieldValue()
    insert.configure({"topic.field": "t", "offset.field": "o!", "static.field": "s",
                      "static.value": "v"})
    out = insert.apply(record({"a": 1}))
    assert out is not None
    assert out.value == {"a": 1, "t": "orders", "o": 42, "s": "v"}
    schema = struct_schema([("a", INT64_SCHEMA)])
    typed = insert.apply(record({"a": 1}, schema=schema))
    assert typed is not None and typed.value_schema is not None
    assert [f.name for f in typed.value_schema.fields] == ["a", "t", "o", "s"]
    assert typed.value_schema.fields[2].schema.optional is False
    with pytest.raises(DataException, match="Only Map objects supported"):
        insert.apply(record("text"))


def test_replace_field_value_to_key_extract_field() -> None:
    replace = ReplaceFieldValue()
    replace.configure({"exclude": "secret", "renames": "id:order_id"})
    out = replace.apply(record({"id": 1, "secret": "x", "n": 2}))
    assert out is not None and out.value == {"order_id": 1, "n": 2}
    to_key = ValueToKey()
    to_key.configure({"fields": "id"})
    schema = struct_schema([("id", INT64_SCHEMA), ("name", STRING_SCHEMA)])
    keyed = to_key.apply(record({"id": 7, "name": "n"}, schema=schema))
    assert keyed is not None and keyed.key == {"id": 7}
    extract = ExtractFieldKey()
    extract.configure({"field": "id"})
    extracted = extract.apply(keyed)
    assert extracted is not None
    assert (extracted.key, extracted.key_schema) == (7, INT64_SCHEMA)


def test_routers() -> None:
    router = TimestampRouter()
    router.configure({"topic.format": "${topic}-${timestamp}", "timestamp.format": "yyyy.MM.dd"})
    routed = router.apply(record({}))
    assert routed is not None and routed.topic == "orders-2023.11.14"
    regex = RegexRouter()
    regex.configure({"regex": "(.*)ders", "replacement": "$1-x"})
    renamed = regex.apply(SourceRecord(topic="orders", kafka_partition=None, key_schema=None,
                                       key=None, value_schema=None, value=None))
    assert renamed is not None and renamed.topic == "or-x"
    untouched = regex.apply(record({}).new_record("other", None, None, None, None, None, None))
    assert untouched is not None and untouched.topic == "other"
    assert java_replacement("a\\$b$2") == "a$b\\g<2>"
    assert simple_date_format("yyyyMMdd'T'HH", 0) == "19700101T00"
