"""kafka-dump-log: print the content of log segment files, as Kafka's DumpLogSegments.

    kafka-dump-log.sh --files 00000000000000000000.log[,00000000000000000000.index,...]
        [--print-data-log] [--deep-iteration] [--index-sanity-check] [--verify-index-only]
        [--transaction-log-decoder]

``.log`` files: one line per batch (baseOffset, lastOffset, count, ..., position,
timestamp, size, magic, compresscodec, crc, isvalid); with ``--deep-iteration`` one ``|``
line per record, with ``--print-data-log`` its key and payload too. ``.index`` and
``.timeindex`` files: their entries, checked against the log; mismatches go to stderr.
``.snapshot`` files: one line per producer, as Kafka prints producer state snapshots.
``.txnindex`` files: one line per aborted transaction. A control batch's record prints its
``endTxnMarker: COMMIT coordinatorEpoch: 0``. With ``--transaction-log-decoder`` the records
of a ``__transaction_state`` segment print as Kafka's TransactionLog formats them
(``key: transaction_metadata::transactionalId=t payload: producerId:...,state=Ongoing,...``).
"""

from __future__ import annotations

import argparse
import os
import struct
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TextIO

from kafkaclone.common.errors import KafkaError
from kafkaclone.coordinator.transaction.log import (
    TransactionLogFormatError,
    read_txn_record_key,
    read_txn_record_value,
)
from kafkaclone.log.common import (
    INDEX_FILE_SUFFIX,
    LOG_FILE_SUFFIX,
    TIME_INDEX_FILE_SUFFIX,
    TXN_INDEX_FILE_SUFFIX,
    offset_from_filename,
)
from kafkaclone.log.file_records import FileRecords
from kafkaclone.log.index import CorruptIndexError, OffsetIndex, TimeIndex
from kafkaclone.log.producer_state import (
    PRODUCER_SNAPSHOT_FILE_SUFFIX,
    CorruptSnapshotError,
    read_snapshot,
)
from kafkaclone.log.transaction_index import (
    ABORTED_TXN_VERSION,
    CorruptTransactionIndexError,
    TransactionIndex,
)
from kafkaclone.protocol.records import EndTransactionMarker, Record, RecordBatch
from kafkaclone.protocol.records.common import (
    COMPRESSION_CODEC_MASK,
    LOG_OVERHEAD,
    SIZE_OFFSET,
)
from kafkaclone.protocol.records.record import ControlRecordType, decode_control_record_key

RECORD_INDENT = "|"
TIMESTAMP_TYPES = {0: "CreateTime", 1: "LogAppendTime"}
INT32_MAX = 2**31 - 1

Decoder = Callable[[bytes], str]
RecordParser = Callable[[Record], tuple[str | None, str | None]]
"""A record's (key, payload) as text, as Kafka's DumpLogSegments MessageParser."""


def _string_decoder(data: bytes) -> str:
    return data.decode("utf-8", errors="replace")


def _integer_decoder(data: bytes) -> str:
    return str(struct.unpack(">i", data)[0]) if len(data) == 4 else data.hex()


def _long_decoder(data: bytes) -> str:
    return str(struct.unpack(">q", data)[0]) if len(data) == 8 else data.hex()


def _default_decoder(data: bytes) -> str:
    return repr(data)


DECODERS: dict[str, Decoder] = {
    "StringDecoder": _string_decoder,
    "IntegerDecoder": _integer_decoder,
    "LongDecoder": _long_decoder,
    "DefaultDecoder": _default_decoder,
}


def decoder_for(class_name: str) -> Decoder:
    """A Kafka decoder class name (``kafka.serializer.StringDecoder``) -> a decoder."""
    simple = class_name.rsplit(".", 1)[-1]
    if simple not in DECODERS:
        raise SystemExit(f"Unsupported decoder class {class_name}; use one of {sorted(DECODERS)}")
    return DECODERS[simple]


def transaction_log_parser(record: Record) -> tuple[str | None, str | None]:
    """A ``__transaction_state`` record as Kafka's TransactionLog.formatRecordKeyAndValue
    prints it (``<DELETE>`` for a tombstone)."""
    if record.key is None:
        return None, None
    try:
        transactional_id = read_txn_record_key(record.key)
    except TransactionLogFormatError:
        (version,) = struct.unpack_from(">h", record.key) if len(record.key) >= 2 else (-1,)
        return f"unknown::version={version}", None
    key = f"transaction_metadata::transactionalId={transactional_id}"
    if record.value is None:
        return key, "<DELETE>"
    try:
        metadata = read_txn_record_value(record.value)
    except TransactionLogFormatError as exc:
        return key, f"<unreadable value: {exc}>"
    partitions = ",".join(str(tp) for tp in sorted(metadata.topic_partitions))
    return key, (f"producerId:{metadata.producer_id},producerEpoch:{metadata.producer_epoch},"
                 f"state={metadata.txn_state.kafka_name},partitions=[{partitions}],"
                 f"txnLastUpdateTimestamp={metadata.txn_last_update_timestamp},"
                 f"txnTimeoutMs={metadata.txn_timeout_ms}")


class DumpErrors:
    """What the index checks found, printed to stderr at the end as Kafka does."""

    def __init__(self) -> None:
        self.index_mismatches: dict[str, list[tuple[int, int]]] = {}
        self.time_index_mismatches: dict[str, list[tuple[int, int]]] = {}
        self.out_of_order_timestamps: dict[str, list[tuple[int, int]]] = {}
        self.shallow_offset_not_found: dict[str, list[tuple[int, int]]] = {}
        self.non_consecutive_offsets: dict[str, list[tuple[int, int]]] = {}

    def print(self, err: TextIO) -> None:
        for name, mismatches in self.index_mismatches.items():
            print(f"Mismatches in :{name}", file=err)
            for index_offset, log_offset in mismatches:
                print(f"  Index offset: {index_offset}, log offset: {log_offset}", file=err)
        for name, mismatches in self.time_index_mismatches.items():
            print(f"Found timestamp mismatch in :{name}", file=err)
            for index_ts, log_ts in mismatches:
                print(f"  Index timestamp: {index_ts}, log timestamp: {log_ts}", file=err)
        for name, pairs in self.out_of_order_timestamps.items():
            print(f"Found out of order timestamp in :{name}", file=err)
            for index_ts, previous in pairs:
                print(f"  Index timestamp: {index_ts}, Previously indexed timestamp: "
                      f"{previous}", file=err)
        for pairs in self.shallow_offset_not_found.values():
            print("The following indexed offsets are not found in the log.", file=err)
            for indexed, found in pairs:
                print(f"Indexed offset: {indexed}, found log offset: {found}", file=err)
        for name, pairs in self.non_consecutive_offsets.items():
            print(f"Non-consecutive offsets in {name}", file=err)
            for first, second in pairs:
                print(f"  {first} is followed by {second}", file=err)


def _bool(value: bool) -> str:
    return "true" if value else "false"


def _codec_name(batch: RecordBatch) -> str:
    try:
        return batch.compression.name
    except KafkaError:
        return f"UNKNOWN({batch.attributes & COMPRESSION_CODEC_MASK})"


def print_batch(batch: RecordBatch, position: int, out: TextIO) -> None:
    timestamp_type = TIMESTAMP_TYPES.get(batch.timestamp_type, "NoTimestampType")
    print(
        f"baseOffset: {batch.base_offset} lastOffset: {batch.last_offset} "
        f"count: {batch.records_count} baseSequence: {batch.base_sequence} "
        f"lastSequence: {batch.last_sequence} producerId: {batch.producer_id} "
        f"producerEpoch: {batch.producer_epoch} "
        f"partitionLeaderEpoch: {batch.partition_leader_epoch} "
        f"isTransactional: {_bool(batch.is_transactional)} "
        f"isControl: {_bool(batch.is_control)} position: {position} "
        f"{timestamp_type}: {batch.max_timestamp} size: {batch.size_in_bytes} "
        f"magic: {batch.magic} compresscodec: {_codec_name(batch)} crc: {batch.crc} "
        f"isvalid: {_bool(batch.is_valid())}",
        file=out,
    )


def _record_sequence(batch: RecordBatch, record: Record) -> int:
    if batch.base_sequence < 0:
        return -1
    sequence = batch.base_sequence + record.offset_delta
    return sequence - INT32_MAX - 1 if sequence > INT32_MAX else sequence


def print_record(
    batch: RecordBatch,
    record: Record,
    out: TextIO,
    *,
    print_contents: bool,
    key_decoder: Decoder,
    value_decoder: Decoder,
    parser: RecordParser | None = None,
) -> None:
    timestamp_type = TIMESTAMP_TYPES.get(batch.timestamp_type, "NoTimestampType")
    key_size = -1 if record.key is None else len(record.key)
    value_size = -1 if record.value is None else len(record.value)
    header_keys = ",".join(key for key, _ in record.headers)
    line = (
        f"{RECORD_INDENT} offset: {batch.offset_of(record)} {timestamp_type}: "
        f"{batch.timestamp_of(record)} keysize: {key_size} valuesize: {value_size} "
        f"sequence: {_record_sequence(batch, record)} headerKeys: [{header_keys}]"
    )
    if batch.is_control:
        control_type = decode_control_record_key(record.key)
        if control_type in (ControlRecordType.ABORT, ControlRecordType.COMMIT):
            marker = EndTransactionMarker.decode(record.key, record.value)
            line += (f" endTxnMarker: {marker.control_type.name} "
                     f"coordinatorEpoch: {marker.coordinator_epoch}")
        else:
            line += f" controlType: {control_type.name}({int(control_type)})"
    elif print_contents and parser is not None:
        key, payload = parser(record)
        if key is not None:
            line += f" key: {key}"
        if payload is not None:
            line += f" payload: {payload}"
    elif print_contents and record.value is not None:
        if record.key is not None:
            line += f" key: {key_decoder(record.key)}"
        line += f" payload: {value_decoder(record.value)}"
    print(line, file=out)


def dump_log(
    path: Path,
    out: TextIO,
    errors: DumpErrors,
    *,
    print_contents: bool,
    deep_iteration: bool,
    key_decoder: Decoder = _string_decoder,
    value_decoder: Decoder = _string_decoder,
    parser: RecordParser | None = None,
) -> None:
    print(f"Starting offset: {offset_from_filename(path.name)}", file=out)
    records = FileRecords(path, read_only=True)
    valid_bytes = 0
    last_offset = -1
    try:
        try:
            for position, _, view in records.iter_batches(0):
                batch = RecordBatch(view)
                print_batch(batch, position, out)
                if deep_iteration:
                    for record in batch.records():
                        offset = batch.offset_of(record)
                        if last_offset != -1 and offset != last_offset + 1:
                            errors.non_consecutive_offsets.setdefault(str(path), []).append(
                                (last_offset, offset)
                            )
                        last_offset = offset
                        print_record(batch, record, out, print_contents=print_contents,
                                     key_decoder=key_decoder, value_decoder=value_decoder,
                                     parser=parser)
                valid_bytes = position + len(view)
        except KafkaError as exc:
            print(f"Error reading {path.name} at position {valid_bytes}: {exc}", file=out)
        trailing = records.size - valid_bytes
        if trailing > 0:
            print(f"Found {trailing} invalid bytes at the end of {path.name}", file=out)
    finally:
        records.close()


def _batch_at(records: FileRecords, position: int) -> RecordBatch | None:
    header = records.read(position, LOG_OVERHEAD)
    if len(header) < LOG_OVERHEAD:
        return None
    (length,) = struct.unpack_from(">i", header, SIZE_OFFSET)
    data = records.read(position, length + LOG_OVERHEAD)
    try:
        return RecordBatch(data)
    except KafkaError:
        return None


def dump_index(
    path: Path, out: TextIO, errors: DumpErrors, *, sanity_only: bool, verify_only: bool
) -> None:
    base_offset = offset_from_filename(path.name)
    index = OffsetIndex(path, base_offset)
    if sanity_only:
        index.sanity_check()
        print(f"{path} passed sanity check.", file=out)
        return
    if index.entries == 0:
        print(f"{path} is empty.", file=out)
        return
    log_path = path.with_name(path.name[: -len(INDEX_FILE_SUFFIX)] + LOG_FILE_SUFFIX)
    records = FileRecords(log_path, read_only=True)
    try:
        for i in range(index.entries):
            entry = index.entry(i)
            if entry.offset == base_offset and i > 0:
                return
            batch = _batch_at(records, entry.position)
            found = -1 if batch is None else batch.last_offset
            if found != entry.offset:
                errors.index_mismatches.setdefault(str(path), []).append((entry.offset, found))
            if not verify_only:
                print(f"offset: {entry.offset} position: {entry.position}", file=out)
    finally:
        records.close()


def dump_time_index(
    path: Path, out: TextIO, errors: DumpErrors, *, sanity_only: bool, verify_only: bool
) -> None:
    base_offset = offset_from_filename(path.name)
    time_index = TimeIndex(path, base_offset)
    if sanity_only:
        time_index.sanity_check()
        print(f"{path} passed sanity check.", file=out)
        return
    prefix = path.name[: -len(TIME_INDEX_FILE_SUFFIX)]
    index = OffsetIndex(path.with_name(prefix + INDEX_FILE_SUFFIX), base_offset)
    records = FileRecords(path.with_name(prefix + LOG_FILE_SUFFIX), read_only=True)
    previous_timestamp = -1
    try:
        for i in range(time_index.entries):
            entry = time_index.entry(i)
            if entry.offset == base_offset and i > 0:
                return
            position = index.lookup(entry.offset).position
            match = None
            for batch_position, header in records.iter_headers(position):
                if header.last_offset >= entry.offset:
                    match = (batch_position, header.last_offset)
                    break
            name = str(path)
            if match is None:
                errors.shallow_offset_not_found.setdefault(name, []).append((entry.offset, -1))
            elif match[1] != entry.offset:
                errors.shallow_offset_not_found.setdefault(name, []).append(
                    (entry.offset, match[1])
                )
            else:
                batch = _batch_at(records, match[0])
                if batch is not None:
                    max_timestamp = max(
                        (batch.timestamp_of(record) for record in batch.records()), default=-1
                    )
                    if max_timestamp != entry.timestamp:
                        errors.time_index_mismatches.setdefault(name, []).append(
                            (entry.timestamp, max_timestamp)
                        )
                if previous_timestamp >= entry.timestamp:
                    errors.out_of_order_timestamps.setdefault(name, []).append(
                        (entry.timestamp, previous_timestamp)
                    )
            if not verify_only:
                print(f"timestamp: {entry.timestamp} offset: {entry.offset}", file=out)
            previous_timestamp = entry.timestamp
    finally:
        records.close()


def dump_producer_id_snapshot(path: Path, out: TextIO, err: TextIO) -> None:
    """A producer state snapshot, one producer a line (Kafka's dumpProducerIdSnapshot)."""
    try:
        entries = list(read_snapshot(path))
    except CorruptSnapshotError as exc:
        print(exc, file=err)
        return
    for entry in entries:
        txn = entry.current_txn_first_offset
        line = (f"producerId: {entry.producer_id} producerEpoch: {entry.producer_epoch} "
                f"coordinatorEpoch: {entry.coordinator_epoch} currentTxnFirstOffset: "
                f"{'None' if txn is None else f'Some({txn})'} ")
        if entry.batch_metadata:
            metadata = entry.batch_metadata[0]
            line += (f"firstSequence: {metadata.first_seq} lastSequence: {metadata.last_seq} "
                     f"lastOffset: {metadata.last_offset} offsetDelta: {metadata.offset_delta} "
                     f"timestamp: {metadata.timestamp}")
        print(line, file=out)


def dump_txn_index(path: Path, out: TextIO) -> None:
    """The aborted transactions of a ``.txnindex`` (Kafka's dumpTxnIndex)."""
    index = TransactionIndex(offset_from_filename(path.name), path)
    for txn in index.all_aborted_txns():
        print(f"version: {ABORTED_TXN_VERSION} producerId: {txn.producer_id} "
              f"firstOffset: {txn.first_offset} lastOffset: {txn.last_offset} "
              f"lastStableOffset: {txn.last_stable_offset}", file=out)
    index.sanity_check()


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="kafka-dump-log.sh",
        description="This tool helps to parse a log file and dump its contents to the console, "
        "useful for debugging a seemingly corrupt log segment.",
    )
    parser.add_argument("--files", required=True,
                        help="REQUIRED: The comma separated list of data and index log files "
                        "to be dumped.")
    parser.add_argument("--print-data-log", action="store_true",
                        help="if set, printing the messages content when dumping data logs. "
                        "Automatically set if any decoder option is specified.")
    parser.add_argument("--deep-iteration", action="store_true",
                        help="if set, uses deep instead of shallow iteration. Automatically "
                        "set if print-data-log is enabled.")
    parser.add_argument("--verify-index-only", action="store_true",
                        help="if set, just verify the index log without printing its content.")
    parser.add_argument("--index-sanity-check", action="store_true",
                        help="if set, just checks the index sanity without printing its "
                        "content. This is the same check that is executed on broker startup "
                        "to determine if an index needs rebuilding or not.")
    parser.add_argument("--max-message-size", type=int, default=5 * 1024 * 1024,
                        help="Size of largest message (accepted for compatibility).")
    parser.add_argument("--key-decoder-class", nargs="?", const="kafka.serializer.StringDecoder",
                        help="if set, used to deserialize the keys (StringDecoder, "
                        "IntegerDecoder, LongDecoder, DefaultDecoder).")
    parser.add_argument("--value-decoder-class", nargs="?",
                        const="kafka.serializer.StringDecoder",
                        help="if set, used to deserialize the messages.")
    parser.add_argument("--transaction-log-decoder", action="store_true",
                        help="if set, log data will be parsed as transaction metadata from "
                        "the __transaction_state topic.")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None, out: TextIO | None = None,
         err: TextIO | None = None) -> int:
    try:
        return _run(argv, out, err)
    except BrokenPipeError:
        # The reader (head, less) went away: stop quietly, as a shell tool should.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1


def _run(argv: Sequence[str] | None, out: TextIO | None, err: TextIO | None) -> int:
    args = parse_args(argv)
    out = out or sys.stdout
    err = err or sys.stderr
    print_contents = bool(args.print_data_log or args.key_decoder_class
                          or args.value_decoder_class or args.transaction_log_decoder)
    parser = transaction_log_parser if args.transaction_log_decoder else None
    deep_iteration = args.deep_iteration or print_contents
    key_decoder = decoder_for(args.key_decoder_class or "StringDecoder")
    value_decoder = decoder_for(args.value_decoder_class or "StringDecoder")
    errors = DumpErrors()
    status = 0
    for name in args.files.split(","):
        path = Path(name.strip())
        print(f"Dumping {path}", file=out)
        try:
            if path.name.endswith(LOG_FILE_SUFFIX):
                dump_log(path, out, errors, print_contents=print_contents,
                         deep_iteration=deep_iteration, key_decoder=key_decoder,
                         value_decoder=value_decoder, parser=parser)
            elif path.name.endswith(INDEX_FILE_SUFFIX):
                dump_index(path, out, errors, sanity_only=args.index_sanity_check,
                           verify_only=args.verify_index_only)
            elif path.name.endswith(TIME_INDEX_FILE_SUFFIX):
                dump_time_index(path, out, errors, sanity_only=args.index_sanity_check,
                                verify_only=args.verify_index_only)
            elif path.name.endswith(PRODUCER_SNAPSHOT_FILE_SUFFIX):
                dump_producer_id_snapshot(path, out, err)
            elif path.name.endswith(TXN_INDEX_FILE_SUFFIX):
                dump_txn_index(path, out)
            else:
                print(f"Ignoring unknown file {path}", file=err)
        except BrokenPipeError:
            raise
        except (OSError, CorruptIndexError, CorruptTransactionIndexError, KafkaError) as exc:
            print(f"Error dumping {path}: {exc}", file=err)
            status = 1
    errors.print(err)
    return status


if __name__ == "__main__":
    sys.exit(main())

