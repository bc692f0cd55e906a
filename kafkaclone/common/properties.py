"""Java ``.properties`` files: one parser for server.properties, meta.properties and every
other properties file the project reads, and the escaping ``Properties.store`` writes."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Final

_ESCAPES: Final[Mapping[str, str]] = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}
_WHITESPACE: Final = " \t\f"


def parse_properties(text: str) -> dict[str, str]:
    """Java's ``Properties.load``: ``key=value``, ``key: value`` and ``key value`` lines;
    ``#`` and ``!`` comment lines; a line ending in an odd number of backslashes continues
    on the next (whose leading whitespace is dropped); ``\\t \\n \\r \\f \\uXXXX`` escapes,
    any other escaped character standing for itself. The last of repeated keys wins.
    ValueError for a malformed ``\\u`` escape."""
    props: dict[str, str] = {}
    for logical_line in _logical_lines(text):
        key, value = _split_key_value(logical_line)
        props[_unescape(key)] = _unescape(value)
    return props


def _logical_lines(text: str) -> Iterator[str]:
    pending: list[str] = []
    for natural_line in re.split(r"\r\n|\r|\n", text):
        line = natural_line.lstrip(_WHITESPACE)
        if not pending and (not line or line[0] in "#!"):
            continue
        trailing_backslashes = len(line) - len(line.rstrip("\\"))
        if trailing_backslashes % 2 == 1:
            pending.append(line[:-1])
            continue
        pending.append(line)
        yield "".join(pending)
        pending = []
    if pending:
        yield "".join(pending)


def _split_key_value(line: str) -> tuple[str, str]:
    index = 0
    while index < len(line):
        char = line[index]
        if char == "\\":
            index += 2
            continue
        if char in "=:" or char in _WHITESPACE:
            break
        index += 1
    key = line[:index]
    rest = line[index:].lstrip(_WHITESPACE)
    if rest[:1] in ("=", ":"):
        rest = rest[1:].lstrip(_WHITESPACE)
    return key, rest


def _unescape(text: str) -> str:
    if "\\" not in text:
        return text
    out: list[str] = []
    index = 0
    while index < len(text):
        char = text[index]
        if char != "\\" or index + 1 == len(text):
            if char != "\\":
                out.append(char)
            index += 1
            continue
        escaped = text[index + 1]
        if escaped == "u":
            digits = text[index + 2 : index + 6]
            if len(digits) != 4 or not all(d in "0123456789abcdefABCDEF" for d in digits):
                raise ValueError(f"malformed \\uxxxx escape: \\u{digits}")
            out.append(chr(int(digits, 16)))
            index += 6
            continue
        out.append(_ESCAPES.get(escaped, escaped))
        index += 2
    return "".join(out)


def escape_property(text: str, *, is_key: bool) -> str:
    """``text`` escaped for a ``key=value`` line as ``Properties.store`` writes it."""
    out = []
    for i, char in enumerate(text):
        if char in "\\=:#!" or (char == " " and (is_key or i == 0)):
            out.append("\\" + char)
        elif char == "\n":
            out.append("\\n")
        else:
            out.append(char)
    return "".join(out)
