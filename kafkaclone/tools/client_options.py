"""What the client tools share: ``k=v`` options and ``.config`` files into client
configuration, Kafka's tool error lines, and a records/s progress line on stderr."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Iterable, Sequence
from typing import Any, NoReturn, TextIO

from kafkaclone.clients.security import ClientSecurity
from kafkaclone.server.config import load_properties
from kafkaclone.tools.command import CommandError


class ToolParser(argparse.ArgumentParser):
    """argparse that reports a bad command line as Kafka's tools do (the message, then
    the usage, exit status 1)."""

    def error(self, message: str) -> NoReturn:
        sys.stderr.write(f"{message}\n")
        self.print_usage(sys.stderr)
        sys.exit(1)


def parse_pairs(items: Iterable[str] | None, what: str) -> dict[str, str]:
    """``["a=1", "b=x=y"]`` -> {"a": "1", "b": "x=y"}."""
    out: dict[str, str] = {}
    for item in items or ():
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"Invalid {what}: {item} (expected key=value)")
        out[key.strip()] = value
    return out


def client_config(config_file: str | None, properties: Sequence[str] | None,
                  *, what: str) -> dict[str, Any]:
    """The client configuration: the file's properties, then ``k=v`` overrides."""
    conf: dict[str, Any] = {}
    if config_file:
        conf.update(load_properties(config_file))
    conf.update(parse_pairs(properties, what))
    return conf


def command_security(config_file: str | None) -> ClientSecurity:
    """The security settings (``security.protocol``, ``sasl.*``, ``ssl.*``) of a
    ``--command-config`` file, for the tools' admin connections; CommandError if they
    cannot be honoured."""
    try:
        return ClientSecurity.from_properties(client_config(config_file, None,
                                                            what="property"))
    except ValueError as exc:
        raise CommandError(str(exc)) from None


def flatten(values: Sequence[Sequence[str]] | None) -> list[str]:
    """argparse ``action="append", nargs="+"`` values as one list."""
    return [item for group in values or () for item in group]


def log_error(message: str, source: str, out: TextIO | None = None) -> None:
    """A log4j-style ERROR line as Kafka's tools print to stderr."""
    stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime())
    millis = int(time.time() * 1000) % 1000
    (out or sys.stderr).write(f"[{stamp},{millis:03d}] ERROR {message} ({source})\n")


class Progress:
    """``N records (X records/s)`` on stderr once a second, only when stderr is a
    terminal and stdout is not (so it never mixes with the records printed)."""

    def __init__(self, what: str, err: TextIO | None = None,
                 enabled: bool | None = None) -> None:
        self.err = err or sys.stderr
        if enabled is None:
            enabled = self.err.isatty() and not sys.stdout.isatty()
        self.enabled = enabled
        self.what = what
        self.count = 0
        self.start = time.monotonic()
        self._last = self.start
        self._last_count = 0
        self._shown = False

    def add(self, n: int = 1) -> None:
        self.count += n
        if not self.enabled:
            return
        now = time.monotonic()
        if now - self._last >= 1.0:
            rate = (self.count - self._last_count) / (now - self._last)
            self.err.write(f"\r{self.count} {self.what} ({rate:,.0f} {self.what}/s)   ")
            self.err.flush()
            self._last, self._last_count, self._shown = now, self.count, True

    def done(self) -> None:
        if self._shown:
            self.err.write("\n")
            self.err.flush()
