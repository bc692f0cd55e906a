from __future__ import annotations

import io
import struct
import subprocess
import sys
from pathlib import Path

from kafkaclone.common.topic_partition import TopicPartition
from kafkaclone.coordinator.transaction.log import key_to_bytes, value_to_bytes
from kafkaclone.coordinator.transaction.metadata import TransactionState, TxnTransitMetadata
from kafkaclone.log.common import AppendOrigin
from kafkaclone.log.log import Log
from kafkaclone.protocol.records import build_record_batch
from kafkaclone.protocol.records.batch import build_end_transaction_marker_batch
from kafkaclone.protocol.records.record import ControlRecordType
from kafkaclone.tools.dump_log import main
from tests.log.conftest import START_SECONDS, LogFactory

T0 = int(START_SECONDS * 1000)
REPO = Path(__file__).resolve().parents[2]


def run(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    status = main(list(args), out=out, err=err)
    return status, out.getvalue(), err.getvalue()


def small_log(open_log: LogFactory) -> Log:
    log = open_log({"index.interval.bytes": 1})
    log.append(build_record_batch([(b"k1", b"hello", [("h", b"x")], T0)]), leader_epoch=3)
    log.append(build_record_batch([(None, b"a", None, T0 + 1), (b"k", None, None, T0 + 2)],
                                  producer_id=7, producer_epoch=1, base_sequence=10),
               leader_epoch=3, origin=AppendOrigin.REPLICATION)  # a client's would need seq 0
    log.close()
    return log


def test_dump_log_batches_and_records(open_log: LogFactory, log_dir: Path) -> None:
    small_log(open_log)
    path = log_dir / "00000000000000000000.log"
    status, out, _ = run("--files", str(path), "--print-data-log")
    assert status == 0
    lines = out.splitlines()
    assert lines[0] == f"Dumping {path}"
    assert lines[1] == "Starting offset: 0"
    assert lines[2].startswith(
        "baseOffset: 0 lastOffset: 0 count: 1 baseSequence: -1 lastSequence: -1 "
        "producerId: -1 producerEpoch: -1 partitionLeaderEpoch: 3 isTransactional: false "
        f"isControl: false position: 0 CreateTime: {T0} size: "
    )
    assert " magic: 2 compresscodec: NONE crc: " in lines[2]
    assert lines[2].endswith(" isvalid: true")
    assert lines[3] == (f"| offset: 0 CreateTime: {T0} keysize: 2 valuesize: 5 sequence: -1 "
                        "headerKeys: [h] key: k1 payload: hello")
    assert lines[4].startswith("baseOffset: 1 lastOffset: 2 count: 2 baseSequence: 10 "
                               "lastSequence: 11 producerId: 7 producerEpoch: 1 ")
    assert lines[5] == (f"| offset: 1 CreateTime: {T0 + 1} keysize: -1 valuesize: 1 "
                        "sequence: 10 headerKeys: [] payload: a")
    assert lines[6] == (f"| offset: 2 CreateTime: {T0 + 2} keysize: 1 valuesize: -1 "
                        "sequence: 11 headerKeys: []")


def test_dump_shallow_and_trailing_bytes(open_log: LogFactory, log_dir: Path) -> None:
    small_log(open_log)
    path = log_dir / "00000000000000000000.log"
    with open(path, "ab") as f:
        f.write(b"\x00" * 9)
    _, out, _ = run("--files", str(path))
    lines = out.splitlines()
    assert [line.split()[0] for line in lines[2:4]] == ["baseOffset:", "baseOffset:"]
    assert lines[-1] == "Found 9 invalid bytes at the end of 00000000000000000000.log"


def test_dump_indexes(open_log: LogFactory, log_dir: Path) -> None:
    small_log(open_log)
    index = log_dir / "00000000000000000000.index"
    time_index = log_dir / "00000000000000000000.timeindex"
    status, out, err = run("--files", f"{index},{time_index}")
    assert status == 0 and err == ""
    assert out.splitlines() == [
        f"Dumping {index}", "offset: 2 position: 79",
        f"Dumping {time_index}", f"timestamp: {T0 + 2} offset: 2",
    ]
    status, out, _ = run("--files", str(index), "--index-sanity-check")
    assert out.splitlines()[-1] == f"{index} passed sanity check."
    index.write_bytes(struct.pack(">ii", 1, 0))  # the batch at 0 holds offset 0 only
    status, out, err = run("--files", str(index), "--verify-index-only")
    assert out.splitlines() == [f"Dumping {index}"]
    assert err.splitlines() == [f"Mismatches in :{index}", "  Index offset: 1, log offset: 0"]


def test_script_entry_point(open_log: LogFactory, log_dir: Path) -> None:
    small_log(open_log)
    path = log_dir / "00000000000000000000.log"
    result = subprocess.run(
        ["bash", str(REPO / "scripts" / "kafka-dump-log.sh"), "--files", str(path)],
        capture_output=True, text=True, timeout=60, check=False,
        env={"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin"},
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[1] == "Starting offset: 0"


def test_dump_producer_snapshot(open_log: LogFactory, log_dir: Path) -> None:
    log = open_log()
    log.append(build_record_batch([(None, b"a", None, T0), (None, b"b", None, T0 + 1)],
                                  producer_id=7, producer_epoch=1, base_sequence=0),
               leader_epoch=3)
    log.close()
    path = log_dir / "00000000000000000002.snapshot"
    status, out, _ = run("--files", str(path))
    assert status == 0
    assert out.splitlines()[1] == (
        "producerId: 7 producerEpoch: 1 coordinatorEpoch: -1 currentTxnFirstOffset: None "
        f"firstSequence: 0 lastSequence: 1 lastOffset: 1 offsetDelta: 1 timestamp: {T0 + 1}")
    path.write_bytes(b"\x00\x07")
    status, _, err = run("--files", str(path))
    assert "Snapshot is too short" in err


def test_dump_control_batches_and_txn_index(open_log: LogFactory, log_dir: Path) -> None:
    log = open_log()
    log.append(build_record_batch([(None, b"a", None, T0)], producer_id=7, producer_epoch=1,
                                  base_sequence=0, is_transactional=True), leader_epoch=0)
    log.append(build_end_transaction_marker_batch(
        ControlRecordType.ABORT, producer_id=7, producer_epoch=1, coordinator_epoch=4,
        timestamp=T0), leader_epoch=0, origin=AppendOrigin.COORDINATOR)
    log.close()
    status, out, _ = run("--deep-iteration", "--files",
                         str(log_dir / "00000000000000000000.log"))
    assert status == 0
    assert "isTransactional: true" in out and "isControl: true" in out
    assert out.rstrip().endswith("endTxnMarker: ABORT coordinatorEpoch: 4")
    status, out, _ = run("--files", str(log_dir / "00000000000000000000.txnindex"))
    assert status == 0
    assert out.splitlines()[1] == (
        "version: 0 producerId: 7 firstOffset: 0 lastOffset: 1 lastStableOffset: 2")


def test_transaction_log_decoder(open_log: LogFactory, log_dir: Path) -> None:
    ongoing = TxnTransitMetadata(
        producer_id=42, last_producer_id=-1, producer_epoch=3, last_producer_epoch=-1,
        txn_timeout_ms=60000, txn_state=TransactionState.ONGOING,
        topic_partitions=frozenset({TopicPartition("out", 1), TopicPartition("out", 0)}),
        txn_start_timestamp=T0, txn_last_update_timestamp=T0 + 5)
    log = open_log()
    log.append(build_record_batch([(key_to_bytes("app-1"), value_to_bytes(ongoing), None, T0),
                                   (key_to_bytes("gone"), None, None, T0)]), leader_epoch=0)
    log.close()
    status, out, _ = run("--transaction-log-decoder", "--files",
                         str(log_dir / "00000000000000000000.log"))
    assert status == 0
    records = [line for line in out.splitlines() if line.startswith("|")]
    assert records[0].endswith(
        " key: transaction_metadata::transactionalId=app-1 payload: producerId:42,"
        "producerEpoch:3,state=Ongoing,partitions=[out-0,out-1],"
        f"txnLastUpdateTimestamp={T0 + 5},txnTimeoutMs=60000")
    assert records[1].endswith(" key: transaction_metadata::transactionalId=gone "
                               "payload: <DELETE>")
