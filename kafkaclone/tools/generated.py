"""The command line of a generated file (docs/configuration.md, protocol/message_types.py):
print it, ``--write`` it, or ``--check`` that the checked-in copy is current."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from pathlib import Path


def generated_file_main(argv: Sequence[str] | None, *, path: Path, render: Callable[[], str],
                        tool: str, description: str | None) -> int:
    """``tool`` is the module that regenerates ``path`` (named in the staleness message)."""
    parser = argparse.ArgumentParser(description=description)
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--write", action="store_true", help=f"rewrite {path.name}")
    mode.add_argument("--check", action="store_true", help=f"exit 1 if {path.name} is stale")
    args = parser.parse_args(argv)
    content = render()
    if args.write:
        path.write_text(content)
        print(f"wrote {path}")
    elif args.check:
        if not path.exists() or path.read_text() != content:
            print(f"{path} is stale: run python -m {tool} --write")
            return 1
    else:
        sys.stdout.write(content)
    return 0
