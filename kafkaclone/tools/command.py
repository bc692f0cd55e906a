"""What the admin command-line tools share (Kafka's ``CommandLineUtils`` in small).

``run_tool`` is every tool's ``main()``: parse the arguments (a ``UsageError``, raised by
``CommandParser`` or by a tool's own checks, prints its message on stderr and exits 1),
run the command, report the failures the tool expects in the tool's own words (exit 1), and
return the command's exit status. ``ZkSession`` is the ``--zookeeper`` path of
kafka-topics and kafka-configs: KafkaZkClient and AdminZkClient driven on the global
reactor, which the CLI never starts (kafkaclone.tools.reactor).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Coroutine, Mapping, Sequence
from typing import Any, Final, NoReturn, TextIO, TypeVar

T = TypeVar("T")
Options = TypeVar("Options")

ZK_TIMEOUT_S: Final = 30.0


class UsageError(Exception):
    """Bad command-line arguments (Kafka prints the reason, exit status 1)."""


class CommandError(Exception):
    """A failure the tool reports in its own words (exit status 1)."""


class CommandParser(argparse.ArgumentParser):
    """argparse whose errors are UsageErrors, reported by ``run_tool``."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(message)


FailureReports = Mapping[tuple[type[Exception], ...], Callable[[Exception], object]]
"""Exception types -> what reports them (the first entry that matches), for ``run_tool``."""


def run_tool(argv: Sequence[str] | None, parse: Callable[[Sequence[str] | None], Options],
             execute: Callable[[Options], int | None], *, out: TextIO,
             err: TextIO | None = None, failures: FailureReports | None = None,
             usage: argparse.ArgumentParser | None = None) -> int:
    """A tool's main(): ``parse(argv)``, then ``execute(options)``; its exit status (0 for
    None). A UsageError prints its message on ``err`` (then ``usage``'s usage line, if
    given); an exception matching ``failures`` is reported by its entry. Either way the exit
    status is 1. ``out`` is flushed at the end."""
    err = err or sys.stderr
    try:
        status = execute(parse(argv))
    except UsageError as exc:
        err.write(f"{exc}\n")
        if usage is not None:
            usage.print_usage(err)
        return 1
    except Exception as exc:
        report = next((report for kinds, report in (failures or {}).items()
                       if isinstance(exc, kinds)), None)
        if report is None:
            raise
        report(exc)
        out.flush()
        return 1
    out.flush()
    return status or 0


class ZkSession:
    """A KafkaZkClient and an AdminZkClient on ``--zookeeper``'s connect string (Twisted
    and the ZooKeeper client are imported only on this path)."""

    def __init__(self, connect: str) -> None:
        from twisted.internet import reactor as global_reactor

        from kafkaclone.server.security.listeners import SecurityConfigError
        from kafkaclone.server.security.zookeeper import zookeeper_sasl_from_environment
        from kafkaclone.zk.admin import AdminZkClient
        from kafkaclone.zk.client import KafkaZkClient

        try:
            sasl = zookeeper_sasl_from_environment(os.environ)
        except SecurityConfigError as exc:
            raise CommandError(str(exc)) from None
        zk_reactor: Any = global_reactor
        self.zk = KafkaZkClient.from_connect_string(connect, zk_reactor, sasl=sasl,
                                                    secure_acls=sasl is not None)
        try:
            self.run(self.zk.start(connection_timeout=ZK_TIMEOUT_S))
        except Exception as exc:
            self.run(self.zk.close())
            raise CommandError(f"Cannot connect to ZooKeeper at {connect}: {exc}") from None
        self.admin = AdminZkClient(self.zk)

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """The coroutine's result; CommandError when ZooKeeper takes over ZK_TIMEOUT_S."""
        from kafkaclone.tools import reactor

        try:
            return reactor.run(coro, ZK_TIMEOUT_S)
        except reactor.NotDoneError:
            raise CommandError(
                f"Timed out after {ZK_TIMEOUT_S:.0f}s waiting for ZooKeeper") from None

    def close(self) -> None:
        self.run(self.zk.close())
