from __future__ import annotations

import struct
from pathlib import Path

import pytest

from kafkaclone.common.errors import CorruptMessageError
from kafkaclone.log import file_records
from kafkaclone.log.file_records import FileRecords, whole_batches_length
from tests.log.conftest import make_batch


def records_file(tmp_path: Path, *batches: bytes) -> FileRecords:
    records = FileRecords(tmp_path / "00000000000000000000.log", create=True)
    for batch in batches:
        records.append(batch)
    return records


def test_append_read_truncate(tmp_path: Path) -> None:
    a, b = make_batch(1), make_batch(3)
    records = records_file(tmp_path, a, b)
    try:
        assert records.size == len(a) + len(b)
        assert records.read(len(a), 10**6) == b
        assert records.read(records.size, 10) == b""
        assert records.truncate_to(len(a)) == len(b)
        assert (tmp_path / "00000000000000000000.log").stat().st_size == len(a)
        with pytest.raises(ValueError):
            records.truncate_to(len(a) + 1)
    finally:
        records.close()


def test_scans_stop_at_a_partial_batch(tmp_path: Path) -> None:
    a = make_batch(2)
    records = records_file(tmp_path, a, a, a[:40])
    try:
        assert [p for p, _ in records.iter_headers()] == [0, len(a)]
        assert [p for p, _, _ in records.iter_batches()] == [0, len(a)]
    finally:
        records.close()


def test_scans_cross_chunk_boundaries(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(file_records, "HEADER_SCAN_CHUNK", 100)
    monkeypatch.setattr(file_records, "BATCH_SCAN_CHUNK", 150)
    small, big = make_batch(1), make_batch(1, value_size=1000)
    records = records_file(tmp_path, small, big, small, big, big)
    try:
        sizes = [len(view) for _, _, view in records.iter_batches()]
        assert sizes == [len(small), len(big), len(small), len(big), len(big)]
        assert len(list(records.iter_headers())) == 5
        assert records.search_for_offset_with_size(0, len(small)) == (0, len(small), len(big))
    finally:
        records.close()


def test_search_for_offset_with_size(tmp_path: Path) -> None:
    batches = [make_batch(3, base_offset=offset) for offset in (0, 3, 6)]
    records = records_file(tmp_path, *batches)
    size = len(batches[0])
    try:
        assert records.search_for_offset_with_size(0, 0) == (2, 0, size)
        assert records.search_for_offset_with_size(4, 0) == (5, size, size)
        assert records.search_for_offset_with_size(4, 2 * size) == (8, 2 * size, size)
        assert records.search_for_offset_with_size(9, 0) is None
        for position, header in records.iter_headers():
            assert header.size_in_bytes == size
            assert header.last_offset == header.base_offset + 2 == position // size * 3 + 2
    finally:
        records.close()


def test_scans_refuse_impossible_lengths(tmp_path: Path) -> None:
    bad = bytearray(make_batch(1))
    struct.pack_into(">i", bad, 8, 20)
    records = records_file(tmp_path, make_batch(1), bytes(bad))
    try:
        with pytest.raises(CorruptMessageError):
            list(records.iter_headers())
        with pytest.raises(CorruptMessageError):
            list(records.iter_batches())
        with pytest.raises(CorruptMessageError):
            records.search_for_offset_with_size(10, 0)
    finally:
        records.close()


def test_whole_batches_length() -> None:
    a, b = make_batch(1), make_batch(1, base_offset=1)
    data = a + b + a[:10]
    assert whole_batches_length(data) == len(a) + len(b)
    assert whole_batches_length(data, max_offset=1) == len(a)
    corrupt = bytearray(a + b)
    corrupt[len(a) + 70] ^= 1
    assert whole_batches_length(bytes(corrupt), verify_crc=True) == len(a)
    corrupt[70] ^= 1
    with pytest.raises(CorruptMessageError):
        whole_batches_length(bytes(corrupt), verify_crc=True)


def test_read_only_files_are_never_trimmed(tmp_path: Path) -> None:
    records = records_file(tmp_path, make_batch(1))
    records.close()
    path = tmp_path / "00000000000000000000.log"
    with open(path, "ab") as f:
        f.write(b"\x00" * 7)
    reader = FileRecords(path, read_only=True)
    reader.close()
    assert path.stat().st_size == len(make_batch(1)) + 7


@pytest.mark.timeout(30)
def test_slices_are_found_from_headers_and_keep_the_file_open(tmp_path: Path) -> None:
    """A Fetch read as a file region: the same whole batches as a bytes read, cut at the
    size limit and the upper bound; the region keeps the descriptor after the segment is
    closed and deleted, and the descriptor closes with the last region."""
    import os

    batches = [make_batch(3 + i, base_offset=10 * i) for i in range(5)]
    records = records_file(tmp_path, *batches)
    starts = [sum(map(len, batches[:i])) for i in range(6)]
    first = records.search_for_offset_with_size(0, 0)
    assert first is not None
    # All, cut by size inside the third batch, cut by the upper bound, first batch above
    # the limit (taken whole).
    assert records.whole_batches_end(first, 10**6, None) == (starts[5], 47)
    assert records.whole_batches_end(first, starts[3] - 1, None) == (starts[2], 14)
    assert records.whole_batches_end(first, 10**6, 30) == (starts[3], 25)
    assert records.whole_batches_end(first, 1, None) == (starts[1], 3)
    region = records.slice(starts[1], starts[3] - starts[1])
    assert region.read() == batches[1] + batches[2]
    fd = region.fileno()
    assert records.delete()
    assert region.read() == batches[1] + batches[2]  # the unlinked file, still open
    del region
    with pytest.raises(OSError):
        os.fstat(fd)
