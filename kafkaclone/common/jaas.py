"""Kafka's JAAS configuration syntax, for ``sasl.jaas.config`` values (Kafka's JaasConfig).

A value is one or more login modules, each ``<class> <flag> [key=value ...];`` with the flag
one of required, requisite, sufficient, optional and values bare words or double-quoted
strings (backslash escapes the next character)::

    org.apache.kafka.common.security.plain.PlainLoginModule required
        username="admin" password="admin-secret" user_alice="alice-secret";

Parsing raises ``ValueError`` with a one-line reason that never quotes a value (values are
passwords).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Final

PLAIN_LOGIN_MODULE: Final = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_LOGIN_MODULE: Final = "org.apache.kafka.common.security.scram.ScramLoginModule"
_FLAGS: Final = frozenset({"required", "requisite", "sufficient", "optional"})


@dataclass(frozen=True)
class LoginModule:
    """One login module of a JAAS configuration: its class, flag and options."""

    class_name: str
    flag: str
    options: dict[str, str] = field(default_factory=dict)


def parse_jaas_config(text: str) -> list[LoginModule]:
    """All login modules of ``text``; ValueError if it is not Kafka's JAAS syntax."""
    tokens = _tokenize(text)
    modules: list[LoginModule] = []
    position = 0
    while position < len(tokens):
        class_name, quoted = tokens[position]
        if quoted or class_name in {"=", ";"}:
            raise ValueError("JAAS config entry does not start with a login module class name")
        if position + 1 >= len(tokens) or tokens[position + 1][0].lower() not in _FLAGS:
            raise ValueError(f"login module {class_name} has no control flag "
                             "(required, requisite, sufficient or optional)")
        flag = tokens[position + 1][0].lower()
        position += 2
        options: dict[str, str] = {}
        while True:
            if position >= len(tokens):
                raise ValueError(f"login module {class_name} is not terminated by ';'")
            key, key_quoted = tokens[position]
            if key == ";" and not key_quoted:
                position += 1
                break
            if (position + 2 >= len(tokens) or tokens[position + 1] != ("=", False)
                    or tokens[position + 2] == (";", False)):
                raise ValueError(f"option {key!r} of login module {class_name} is not key=value")
            options[key] = tokens[position + 2][0]
            position += 3
        modules.append(LoginModule(class_name, flag, options))
    if not modules:
        raise ValueError("JAAS config has no login module")
    return modules


def parse_single_login_module(text: str, config_name: str) -> LoginModule:
    """The one login module a ``sasl.jaas.config`` must contain (Kafka's JaasContext)."""
    modules = parse_jaas_config(text)
    if len(modules) != 1:
        raise ValueError(f"JAAS config property {config_name} contains {len(modules)} login "
                         "modules, should be 1 module")
    return modules[0]


def _tokenize(text: str) -> list[tuple[str, bool]]:
    """(token, was quoted) pairs: words, quoted strings, '=' and ';'."""
    tokens: list[tuple[str, bool]] = []
    index = 0
    length = len(text)
    while index < length:
        char = text[index]
        if char.isspace():
            index += 1
        elif char in "=;":
            tokens.append((char, False))
            index += 1
        elif char == '"':
            index += 1
            value: list[str] = []
            while True:
                if index >= length:
                    raise ValueError("JAAS config has an unterminated quoted value")
                char = text[index]
                if char == "\\" and index + 1 < length:
                    value.append(text[index + 1])
                    index += 2
                elif char == '"':
                    index += 1
                    break
                else:
                    value.append(char)
                    index += 1
            tokens.append(("".join(value), True))
        else:
            start = index
            while index < length and not text[index].isspace() and text[index] not in '=;"':
                index += 1
            tokens.append((text[start:index], False))
    return tokens


def parse_jaas_file(text: str) -> dict[str, list[LoginModule]]:
    """The sections of a JAAS login configuration file (``java.security.auth.login.config``),
    ``Name { <login modules> };`` each, by name; ValueError with a one-line reason if the
    file is not in that syntax. ``//`` and ``/* */`` comments are skipped."""
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.DOTALL)
    text = re.sub(r"(?m)^\s*//.*$", " ", text)
    sections: dict[str, list[LoginModule]] = {}
    position = 0
    for match in _SECTION.finditer(text):
        if text[position:match.start()].strip():
            raise ValueError("JAAS file has text outside 'Name { ... };' sections")
        sections[match.group(1)] = parse_jaas_config(match.group(2))
        position = match.end()
    if text[position:].strip():
        raise ValueError("JAAS file has text outside 'Name { ... };' sections")
    if not sections:
        raise ValueError("JAAS file has no section")
    return sections


_SECTION: Final = re.compile(r"\s*([A-Za-z_][\w.-]*)\s*\{(.*?)\}\s*;", re.DOTALL)
