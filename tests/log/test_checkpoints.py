from __future__ import annotations

from pathlib import Path

import pytest

from kafkaclone.common.topic_partition import TopicPartition
from kafkaclone.log.checkpoints import (
    BrokerMetadataCheckpoint,
    CheckpointFileError,
    LeaderEpochCheckpointFile,
    OffsetCheckpointFile,
    parse_properties,
)


def test_offset_checkpoint_format(tmp_path: Path) -> None:
    path = tmp_path / "recovery-point-offset-checkpoint"
    checkpoint = OffsetCheckpointFile(path)
    offsets = {TopicPartition("b.topic", 1): 99, TopicPartition("a-topic", 0): 1234}
    checkpoint.write(offsets)
    assert path.read_text() == "0\n2\na-topic 0 1234\nb.topic 1 99\n"
    assert checkpoint.read() == offsets
    assert not (tmp_path / "recovery-point-offset-checkpoint.tmp").exists()


def test_missing_checkpoint_reads_empty(tmp_path: Path) -> None:
    assert OffsetCheckpointFile(tmp_path / "nope").read() == {}


def test_empty_checkpoint(tmp_path: Path) -> None:
    checkpoint = OffsetCheckpointFile(tmp_path / "cp")
    checkpoint.write({})
    assert (tmp_path / "cp").read_text() == "0\n0\n"
    assert checkpoint.read() == {}


@pytest.mark.parametrize(
    "content",
    ["1\n0\n", "0\n2\nt 0 1\n", "0\n1\nt 0\n", "0\n1\nt x 1\n", "0\n", "zero\n0\n"],
)
def test_malformed_checkpoints(tmp_path: Path, content: str) -> None:
    path = tmp_path / "cp"
    path.write_text(content)
    with pytest.raises(CheckpointFileError) as excinfo:
        OffsetCheckpointFile(path).read()
    assert excinfo.value.code == 56


def test_rewrite_replaces_atomically(tmp_path: Path) -> None:
    path = tmp_path / "cp"
    checkpoint = OffsetCheckpointFile(path)
    checkpoint.write({TopicPartition("t", 0): 1})
    (tmp_path / "cp.tmp").write_text("garbage left by a crash")
    checkpoint.write({TopicPartition("t", 0): 2})
    assert checkpoint.read() == {TopicPartition("t", 0): 2}


def test_leader_epoch_checkpoint(tmp_path: Path) -> None:
    path = tmp_path / "leader-epoch-checkpoint"
    checkpoint = LeaderEpochCheckpointFile(path)
    checkpoint.write([(0, 0), (3, 120)])
    assert path.read_text() == "0\n2\n0 0\n3 120\n"
    assert checkpoint.read() == [(0, 0), (3, 120)]


def test_meta_properties(tmp_path: Path) -> None:
    path = tmp_path / "meta.properties"
    checkpoint = BrokerMetadataCheckpoint(path)
    assert checkpoint.read() is None
    checkpoint.write({"version": "0", "broker.id": "1", "cluster.id": "AbC-12_x"})
    lines = path.read_text().splitlines()
    assert lines[0] == "#" and lines[1].startswith("#")
    assert lines[2:] == ["version=0", "broker.id=1", "cluster.id=AbC-12_x"]
    assert checkpoint.read() == {"version": "0", "broker.id": "1", "cluster.id": "AbC-12_x"}


def test_parse_java_properties() -> None:
    text = "# comment\n! also\n a = 1\nb:2\nc 3\nd=x\\=y\\:z\n\n"
    assert parse_properties(text) == {"a": "1", "b": "2", "c": "3", "d": "x=y:z"}
