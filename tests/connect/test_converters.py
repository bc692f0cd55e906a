from __future__ import annotations

import json
from decimal import Decimal

import pytest

from kafkaclone.common.config_def import ConfigError
from kafkaclone.connect.api import DataException
from kafkaclone.connect.converters import ByteArrayConverter, JsonConverter, StringConverter
from kafkaclone.connect.data import (
    FLOAT64_SCHEMA,
    STRING_SCHEMA,
    SchemaAndValue,
    SchemaType,
    decimal_schema,
    struct_schema,
)

pytestmark = pytest.mark.timeout(10)


def test_json_converter_writes_kafkas_envelope_and_reads_it_back() -> None:
    converter = JsonConverter()
    converter.configure({}, is_key=False)
    schema = struct_schema([("id", STRING_SCHEMA)], name="row")
    raw = converter.from_connect_data("t", schema, {"id": "x"})
    assert raw is not None
    assert json.loads(raw) == {
        "schema": {"type": "struct", "optional": False, "name": "row",
                   "fields": [{"type": "string", "optional": False, "field": "id"}]},
        "payload": {"id": "x"}}
    back = converter.to_connect_data("t", raw)
    assert back.value == {"id": "x"}
    assert back.schema is not None
    assert back.schema.type is SchemaType.STRUCT
    assert converter.from_connect_data("t", STRING_SCHEMA, "line") == \
        b'{"schema":{"type":"string","optional":false},"payload":"line"}'


def test_json_converter_without_schemas_and_plain_json_refused_with_schemas() -> None:
    plain = JsonConverter()
    plain.configure({"schemas.enable": "false"}, is_key=True)
    assert plain.from_connect_data("t", None, {"a": [1, b"\x00"]}) == b'{"a":[1,"AA=="]}'
    assert plain.to_connect_data("t", b'{"a":1}').value == {"a": 1}
    enveloped = JsonConverter()
    enveloped.configure({}, is_key=False)
    with pytest.raises(DataException, match="requires \"schema\" and \"payload\""):
        enveloped.to_connect_data("t", b'{"a":1}')
    assert enveloped.from_connect_data("t", None, None) is None


def test_string_and_byte_array_converters() -> None:
    strings = StringConverter()
    strings.configure({}, is_key=False)
    assert strings.from_connect_data("t", None, True) == b"true"
    assert strings.to_connect_data("t", "é".encode()).value == "é"
    raw = ByteArrayConverter()
    assert raw.from_connect_data("t", None, b"\x01") == b"\x01"
    with pytest.raises(DataException):
        raw.from_connect_data("t", None, "text")


def test_json_converter_caches_parsed_schemas_up_to_schemas_cache_size() -> None:
    converter = JsonConverter()
    converter.configure({"schemas.cache.size": "1"}, is_key=False)
    first = struct_schema([("id", STRING_SCHEMA)], name="a")
    second = struct_schema([("id", STRING_SCHEMA)], name="b")
    for schema in (first, first, second, first):
        raw = converter.from_connect_data("t", schema, {"id": "x"})
        assert raw is not None
        assert converter.to_connect_data("t", raw) == SchemaAndValue(schema, {"id": "x"})
    assert len(converter._schemas) == 1


def test_json_converter_decimal_format_numeric_writes_exact_numbers() -> None:
    """KIP-481: ``decimal.format=NUMERIC`` writes a Decimal as a JSON number with every
    digit; a converter in either format reads both forms back exactly, and the other
    fractions of such a message stay floats."""
    schema = struct_schema([("price", decimal_schema(2)), ("big", decimal_schema(4)),
                            ("ratio", FLOAT64_SCHEMA)], name="prices")
    value = {"price": Decimal("-1.50"), "big": Decimal("123456789012345678.1234"),
             "ratio": 0.25}
    numeric = JsonConverter()
    numeric.configure({"decimal.format": "numeric"}, False)
    data = numeric.from_connect_data("t", schema, value)
    assert data is not None
    assert data.endswith(b'"payload":{"price":-1.50,"big":123456789012345678.1234,'
                         b'"ratio":0.25}}')
    base64_reader = JsonConverter()
    base64_reader.configure({}, False)
    for converter in (numeric, base64_reader):
        back = converter.to_connect_data("t", data)
        assert back.value == value
        assert isinstance(back.value, dict)
        assert type(back.value["ratio"]) is float
        assert str(back.value["big"]) == "123456789012345678.1234"
    written_base64 = base64_reader.from_connect_data("t", schema, value)
    assert written_base64 is not None and b'"price":"/2o="' in written_base64
    assert numeric.to_connect_data("t", written_base64).value == value
    with pytest.raises(ConfigError, match=r"decimal\.format"):
        JsonConverter().configure({"decimal.format": "TEXT"}, False)


def test_schemas_differing_only_in_parameters_are_not_equal() -> None:
    """As Kafka's ConnectSchema.equals: a Decimal's scale is part of its schema."""
    from kafkaclone.connect.data import decimal_schema

    assert decimal_schema(2) == decimal_schema(2)
    assert hash(decimal_schema(2)) == hash(decimal_schema(2))
    assert decimal_schema(2) != decimal_schema(3)
    assert decimal_schema(2, precision=10) != decimal_schema(2)
    assert len({decimal_schema(2), decimal_schema(3), decimal_schema(2)}) == 2
