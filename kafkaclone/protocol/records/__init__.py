"""Kafka's record formats: v2 record batches, legacy v0/v1 message sets, and the codecs.

The broker keeps batches "deflated": ``iter_batches`` yields zero-copy views whose
``ensure_valid()`` checks one CRC per batch; records are decoded (``records()``) only
where they must be read. The layout constants are imported from their one home:
``batch`` (v2), ``legacy`` (v0/v1), ``common`` (what both share).
"""

from kafkaclone.protocol.records.batch import (
    BatchHeader,
    RecordBatch,
    RecordInput,
    build_end_transaction_marker_batch,
    build_record_batch,
    iter_batches,
    unpack_header,
    validate_batches,
)
from kafkaclone.protocol.records.common import (
    CREATE_TIME,
    LOG_APPEND_TIME,
    NO_TIMESTAMP,
    NO_TIMESTAMP_TYPE,
    BytesLike,
)
from kafkaclone.protocol.records.compression import (
    DEFAULT_MAX_DECOMPRESSED_SIZE,
    Codec,
    compress,
    decompress,
)
from kafkaclone.protocol.records.legacy import (
    LegacyRecord,
    LegacyRecordBatch,
    LegacyRecordInput,
    build_legacy_message_set,
    iter_legacy_entries,
    iter_legacy_records,
)
from kafkaclone.protocol.records.record import (
    ControlRecordType,
    EndTransactionMarker,
    Header,
    Record,
    decode_control_record_key,
    encode_control_record_key,
    encode_record,
    iter_records,
)

__all__ = [
    "CREATE_TIME",
    "DEFAULT_MAX_DECOMPRESSED_SIZE",
    "LOG_APPEND_TIME",
    "NO_TIMESTAMP",
    "NO_TIMESTAMP_TYPE",
    "BatchHeader",
    "BytesLike",
    "Codec",
    "ControlRecordType",
    "EndTransactionMarker",
    "Header",
    "LegacyRecord",
    "LegacyRecordBatch",
    "LegacyRecordInput",
    "Record",
    "RecordBatch",
    "RecordInput",
    "build_end_transaction_marker_batch",
    "build_legacy_message_set",
    "build_record_batch",
    "compress",
    "decode_control_record_key",
    "decompress",
    "encode_control_record_key",
    "encode_record",
    "iter_batches",
    "iter_legacy_entries",
    "iter_legacy_records",
    "iter_records",
    "unpack_header",
    "validate_batches",
]
