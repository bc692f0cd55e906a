"""The declaration compiler, on a message that uses every feature of the DSL."""

import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkaclone.common.errors import DecodeError, KafkaError, UnsupportedVersionError
from kafkaclone.protocol.schema import Versions, compile_message, data, field

PARTITION_FIELDS = [
    field("index", "int32"),
    field("leader_epoch", "int32", "1+", default=-1),
    field("replicas", "[]int32"),
]

SAMPLE = compile_message(data("Sample", valid="0-3", flexible="3+", fields=[
    field("flag", "bool"),
    field("small", "int8"),
    field("short", "int16"),
    field("port", "uint16", "1+"),
    field("count", "int32"),
    field("checksum", "uint32", "2+"),
    field("offset", "int64", default=-1),
    field("ratio", "float64", "1+"),
    field("name", "string"),
    field("note", "string", "1+", nullable="1+", default=None),
    field("payload", "bytes"),
    field("maybe", "bytes", "2+", nullable="2+", default=None),
    field("records", "records", nullable="0+"),
    field("topic_id", "uuid", "2+"),
    field("names", "[]string"),
    field("partitions", "[]Partition", fields=PARTITION_FIELDS),
    field("more_partitions", "[]Partition", "1+", nullable="1+", fields=PARTITION_FIELDS),
    field("leader", "Leader", "2+", fields=[
        field("id", "int32", "2+", default=-1),
        field("epoch", "int32", "2+", default=-1),
    ]),
    field("cluster_id", "string", "3+", tag=0, nullable="3+", default=None),
    field("throttle", "int32", "3+", tag=1),
    field("tagged_list", "[]int64", "3+", tag=2),
]))


def full_sample():
    cls = SAMPLE.cls
    return cls(
        flag=True, small=-5, short=-300, port=65535, count=7, checksum=0xFFFFFFFF,
        offset=2**40, ratio=0.25, name="topic-ä", note="a note", payload=b"\x00\x01",
        maybe=b"m", records=b"\x99" * 5, topic_id=uuid.uuid4(), names=["a", "", "ccc"],
        partitions=[cls.Partition(index=0, leader_epoch=3, replicas=[1, 2, 3]),
                    cls.Partition(index=1, leader_epoch=4, replicas=[])],
        more_partitions=[cls.Partition(index=9, leader_epoch=1, replicas=[4])],
        leader=cls.Leader(id=2, epoch=11),
        cluster_id="cid", throttle=100, tagged_list=[1, -1],
    )


def only_fields_in(version, value):
    """What survives a round trip at ``version``: absent fields fall back to defaults."""
    decoded = SAMPLE.decode_exact(SAMPLE.encode(value, version), version)
    return decoded


@pytest.mark.parametrize("version", range(4))
def test_round_trip_keeps_the_fields_of_each_version(version):
    value = full_sample()
    wire = SAMPLE.encode(value, version)
    decoded = SAMPLE.decode_exact(wire, version)
    assert SAMPLE.encode(decoded, version) == wire
    assert decoded.name == "topic-ä"
    assert decoded.offset == 2**40
    assert bytes(decoded.records) == b"\x99" * 5
    assert [p.replicas for p in decoded.partitions] == [[1, 2, 3], []]
    assert decoded.partitions[0].leader_epoch == (3 if version >= 1 else -1)
    assert decoded.port == (65535 if version >= 1 else 0)
    assert decoded.note == ("a note" if version >= 1 else None)
    assert decoded.checksum == (0xFFFFFFFF if version >= 2 else 0)
    assert decoded.leader.epoch == (11 if version >= 2 else -1)
    assert decoded.topic_id == (value.topic_id if version >= 2 else uuid.UUID(int=0))
    assert decoded.cluster_id == ("cid" if version >= 3 else None)
    assert decoded.throttle == (100 if version >= 3 else 0)
    assert decoded.tagged_list == ([1, -1] if version >= 3 else [])


def test_defaults_of_a_fresh_instance():
    value = SAMPLE.cls()
    assert value.offset == -1
    assert value.note is None
    assert value.names == []
    assert value.more_partitions == []
    assert value.leader == SAMPLE.cls.Leader(id=-1, epoch=-1)
    assert value.topic_id == uuid.UUID(int=0)
    other = SAMPLE.cls()
    value.names.append("x")
    assert other.names == [], "list defaults must not be shared between instances"


def test_exact_bytes_of_a_non_flexible_version():
    cls = SAMPLE.cls
    value = cls(flag=True, small=1, short=2, count=3, offset=4, name="ab", payload=b"\x07",
                records=None, names=["x"], partitions=[cls.Partition(index=5, replicas=[6])])
    expected = (
        "01" "01" "0002" "00000003" "0000000000000004"  # flag small short count offset
        "00026162" "0000000107" "ffffffff"  # name, payload, null records
        "00000001" "000178"  # names
        "00000001" "00000005" "00000001" "00000006"  # partitions
    )
    assert SAMPLE.encode(value, 0).hex() == expected


def test_exact_bytes_of_a_flexible_version_with_tagged_fields():
    cls = SAMPLE.cls
    value = cls(name="ab", payload=b"", records=b"", leader=cls.Leader(id=1, epoch=2),
                cluster_id="c", throttle=0)
    wire = SAMPLE.encode(value, 3).hex()
    # compact string "ab", compact empty bytes, and null "note" are written compactly
    assert "036162" in wire
    # the tagged section at the end: one field (tag 0, 2 bytes: compact "c"); throttle=0
    # and the empty tagged_list are defaults and are not written.
    assert wire.endswith("01" "00" "02" "0263")


def test_unknown_tagged_fields_survive_a_round_trip():
    value = SAMPLE.cls(name="n", payload=b"", records=None, unknown_tagged_fields=[(7, b"xyz")])
    wire = SAMPLE.encode(value, 3)
    decoded = SAMPLE.decode_exact(wire, 3)
    assert decoded.unknown_tagged_fields == [(7, b"xyz")]
    assert SAMPLE.encode(decoded, 3) == wire


def test_null_arrays_only_where_nullable():
    cls = SAMPLE.cls
    value = cls(name="n", payload=b"", records=None, more_partitions=None)
    assert SAMPLE.decode_exact(SAMPLE.encode(value, 1), 1).more_partitions is None
    with pytest.raises(ValueError, match="non-nullable array partitions"):
        SAMPLE.encode(cls(name="n", payload=b"", partitions=None), 1)


def test_unknown_version():
    with pytest.raises(UnsupportedVersionError):
        SAMPLE.decode(b"", 4)
    with pytest.raises(UnsupportedVersionError):
        SAMPLE.encode(SAMPLE.cls(), 9)


@pytest.mark.parametrize("version", range(4))
def test_every_truncation_is_a_decode_error(version):
    wire = SAMPLE.encode(full_sample(), version)
    for cut in range(len(wire)):
        with pytest.raises(DecodeError):
            SAMPLE.decode_exact(wire[:cut], version)


def test_trailing_bytes_are_refused_by_decode_exact():
    wire = SAMPLE.encode(full_sample(), 2)
    with pytest.raises(DecodeError, match="left over"):
        SAMPLE.decode_exact(wire + b"\x00", 2)


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_mutated_frames_raise_only_kafka_errors(data_strategy):
    version = data_strategy.draw(st.integers(0, 3))
    wire = bytearray(SAMPLE.encode(full_sample(), version))
    for _ in range(data_strategy.draw(st.integers(1, 4))):
        pos = data_strategy.draw(st.integers(0, len(wire) - 1))
        wire[pos] = data_strategy.draw(st.integers(0, 255))
    try:
        SAMPLE.decode_exact(bytes(wire), version)
    except KafkaError:
        pass


def test_versions_parse():
    assert str(Versions.parse("0+")) == "0+"
    assert Versions.parse("3-5") == Versions(3, 5)
    assert 4 in Versions.parse("3-5")
    assert 6 not in Versions.parse("3-5")
    assert 0 not in Versions.parse("none")
    assert str(Versions.parse("2")) == "2"


def test_declaration_errors_are_caught_early():
    with pytest.raises(ValueError, match="unknown type"):
        field("x", "int31")
    with pytest.raises(ValueError, match="needs its fields"):
        field("x", "[]Thing")
