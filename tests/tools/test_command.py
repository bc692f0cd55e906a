"""The tools' shared main() (run_tool) and reactor driving, without a cluster."""

from __future__ import annotations

import io
from collections.abc import Sequence

import pytest
from twisted.internet.defer import Deferred, succeed

from kafkaclone.tools import reactor
from kafkaclone.tools.command import CommandError, CommandParser, UsageError, run_tool


def parse(argv: Sequence[str] | None) -> int:
    parser = CommandParser(prog="tool")
    parser.add_argument("--n", type=int, required=True)
    n: int = parser.parse_args(argv).n
    if n < 0:
        raise UsageError("--n must not be negative")
    return n


def execute(n: int) -> int | None:
    if n == 1:
        raise CommandError("one is a failure")
    if n == 2:
        raise KeyError("not a reported failure")
    return None if n == 0 else n


def tool(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    usage = CommandParser(prog="tool")
    status = run_tool(list(argv), parse, execute, out=out, err=err, usage=usage,
                      failures={(CommandError,): lambda exc: out.write(f"Error: {exc}\n")})
    return status, out.getvalue(), err.getvalue()


def test_exit_status_usage_errors_and_reported_failures() -> None:
    assert tool("--n", "0") == (0, "", "")
    assert tool("--n", "7") == (7, "", "")
    assert tool("--n", "-1") == (1, "", "--n must not be negative\nusage: tool [-h]\n")
    status, _, err = tool("--n", "x")
    assert status == 1 and err.startswith("argument --n: invalid int value: 'x'\n")
    assert tool("--n", "1") == (1, "Error: one is a failure\n", "")
    with pytest.raises(KeyError):
        tool("--n", "2")


def test_run_waits_for_a_result_and_gives_up_in_time() -> None:
    async def double(value: int) -> int:
        return 2 * await succeed(value)

    assert reactor.run(double(21), timeout=5) == 42
    never: Deferred[None] = Deferred()
    with pytest.raises(reactor.NotDoneError, match=r"not done within 0\.05s"):
        reactor.run(never, timeout=0.05)
    with pytest.raises(reactor.NotDoneError, match="condition not met"):
        reactor.run_until(lambda: False, timeout=0.05)
