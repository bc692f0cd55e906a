"""docs/protocol.md's compatibility matrix must be the registry's, not a stale copy."""

from kafkaclone.protocol.api import APIS
from kafkaclone.tools import protocol_matrix


def test_docs_matrix_matches_the_registry():
    document = protocol_matrix.DOC.read_text()
    expected = protocol_matrix.replace_matrix(document, protocol_matrix.render_matrix())
    assert document == expected, (
        "docs/protocol.md is out of date: run python -m kafkaclone.tools.protocol_matrix --write"
    )


def test_matrix_has_one_row_per_api():
    rows = [line for line in protocol_matrix.render_matrix().splitlines()[2:] if line]
    assert len(rows) == len(APIS)
    assert any(row.startswith("| 0 | Produce | 0-9 | v9 |") for row in rows)
