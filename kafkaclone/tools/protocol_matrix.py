"""Renders the API compatibility matrix of docs/protocol.md from the protocol registry.

    python -m kafkaclone.tools.protocol_matrix          # print the matrix
    python -m kafkaclone.tools.protocol_matrix --write  # rewrite it inside docs/protocol.md

The matrix sits between two marker lines in docs/protocol.md; a test checks that the file
and the registry agree, so the document cannot drift from the code.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from kafkaclone.protocol.api import APIS, Api
from kafkaclone.server.handlers.registry import load_handlers

BEGIN = "<!-- BEGIN GENERATED API MATRIX (python -m kafkaclone.tools.protocol_matrix --write) -->"
END = "<!-- END GENERATED API MATRIX -->"
DOC = Path(__file__).resolve().parents[2] / "docs" / "protocol.md"


def _first_flexible(target: Api) -> str:
    for version in range(target.min_version, target.max_version + 1):
        if target.request.is_flexible(version):
            return f"v{version}"
    return "-"


def render_matrix() -> str:
    handlers = load_handlers()
    lines = [
        "| key | API | versions | flexible from | broker handler |",
        "|---:|---|---|---|---|",
    ]
    for key, target in APIS.items():
        served = handlers.get(target.key)
        handler = f"v{served.min_version}-{served.max_version}" if served else "-"
        lines.append(
            f"| {key} | {target.name} | {target.min_version}-{target.max_version} "
            f"| {_first_flexible(target)} | {handler} |"
        )
    return "\n".join(lines)


def replace_matrix(document: str, matrix: str) -> str:
    head, sep, rest = document.partition(BEGIN)
    if not sep:
        raise ValueError(f"{DOC} has no {BEGIN!r} marker")
    _, sep, tail = rest.partition(END)
    if not sep:
        raise ValueError(f"{DOC} has no {END!r} marker")
    return f"{head}{BEGIN}\n{matrix}\n{END}{tail}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--write", action="store_true", help="rewrite docs/protocol.md")
    args = parser.parse_args(argv)
    matrix = render_matrix()
    if args.write:
        DOC.write_text(replace_matrix(DOC.read_text(), matrix))
        print(f"wrote {len(APIS)} APIs to {DOC}")
    else:
        print(matrix)
    return 0


if __name__ == "__main__":
    sys.exit(main())
