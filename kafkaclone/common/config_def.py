"""Config tables: Kafka's ``org.apache.kafka.common.config.ConfigDef``.

A config table is a ``ConfigDef`` of ``ConfigKey`` rows (name, type, default, importance,
doc, validator), with Kafka's names. ``ConfigKey.parse`` turns a string from a properties
file (or an already typed value) into the typed value and validates it; anything invalid
is a ``ConfigError`` naming the key, a subclass of the protocol's INVALID_CONFIG error so
that a handler validating configs (CreateTopics, AlterConfigs) can answer with its code.

``AbstractConfig`` holds a table's parsed values behind typed getters. The broker's table
is ``kafkaclone.server.config.BROKER_CONFIG``; the topic-level one is
``kafkaclone.log.config.LOG_CONFIG_KEYS``; the clients' are
``kafkaclone.clients.config.PRODUCER_CONFIG`` and ``CONSUMER_CONFIG``.
"""

from __future__ import annotations

import enum
import re
from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Final

from kafkaclone.common.errors import InvalidConfigError

SHORT_MIN: Final = -(2**15)
SHORT_MAX: Final = 2**15 - 1
INT_MIN: Final = -(2**31)
INT_MAX: Final = 2**31 - 1
LONG_MIN: Final = -(2**63)
LONG_MAX: Final = 2**63 - 1



@dataclass(frozen=True, eq=False)
class PluginObjects:
    """A CLASS value, or a LIST value of classes, given as Python objects (a class, a
    function, an instance) rather than by name, as a Python client's config dict allows
    (Kafka's Java ConfigDef likewise takes a ``Class`` for a CLASS key). ``items``: the one
    object of a CLASS value; every item of a LIST (names stay strings)."""

    items: tuple[object, ...]


ConfigValue = bool | int | float | str | tuple[str, ...] | PluginObjects | None
"""A parsed value: LIST values are tuples of strings (PluginObjects where a list of classes
holds objects); None where the default is null."""


class ConfigError(InvalidConfigError):
    """An invalid configuration: ``key`` had ``value``; ``allowed`` says what would do."""

    def __init__(self, key: str, value: object, allowed: str) -> None:
        self.key = key
        self.value = value
        self.allowed = allowed
        super().__init__(f"Invalid value {_show(value)} for configuration {key}: {allowed}")


def _show(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, str):
        return repr(value)
    if isinstance(value, tuple | list):
        return repr(",".join(str(item) for item in value))
    return str(value)


class ConfigType(enum.IntEnum):
    """Kafka's ConfigDef types, numbered as DescribeConfigs v3+ reports them."""

    BOOLEAN = 1
    STRING = 2
    INT = 3
    SHORT = 4
    LONG = 5
    DOUBLE = 6
    LIST = 7
    CLASS = 8
    PASSWORD = 9


class Importance(enum.Enum):
    HIGH = "high"
    MEDIUM = "medium"
    LOW = "low"


# --- validators -------------------------------------------------------------------------


class Validator(ABC):
    """Checks a parsed (non-null) value; ``describe`` is the "valid values" of the docs."""

    @abstractmethod
    def problem(self, value: ConfigValue) -> str | None:
        """None if ``value`` is acceptable, else what is allowed."""

    @abstractmethod
    def describe(self) -> str: ...


@dataclass(frozen=True)
class Range(Validator):
    minimum: float | None = None
    maximum: float | None = None

    def problem(self, value: ConfigValue) -> str | None:
        if not isinstance(value, int | float) or isinstance(value, bool):
            return "a number is required"
        if self.minimum is not None and value < self.minimum:
            if self.maximum is None:
                return f"must be at least {_number(self.minimum)}"
            return f"must be in [{_number(self.minimum)}, {_number(self.maximum)}]"
        if self.maximum is not None and value > self.maximum:
            if self.minimum is None:
                return f"must be at most {_number(self.maximum)}"
            return f"must be in [{_number(self.minimum)}, {_number(self.maximum)}]"
        return None

    def describe(self) -> str:
        low = "..." if self.minimum is None else _number(self.minimum)
        if self.maximum is None:
            return f"[{low},...]"
        return f"[{low},...,{_number(self.maximum)}]"


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


def at_least(minimum: float) -> Range:
    return Range(minimum=minimum)


def between(minimum: float, maximum: float) -> Range:
    return Range(minimum=minimum, maximum=maximum)


@dataclass(frozen=True)
class OneOf(Validator):
    """A STRING value among ``allowed`` (Kafka's ``ValidString.in``; with ``ignore_case``
    its ``CaseInsensitiveValidString.in``)."""

    allowed: tuple[str, ...]
    ignore_case: bool = False

    def problem(self, value: ConfigValue) -> str | None:
        if self.ignore_case and isinstance(value, str):
            if value.upper() in (a.upper() for a in self.allowed):
                return None
            return f"must be one of (case insensitive) {', '.join(self.allowed)}"
        return None if value in self.allowed else f"must be one of {', '.join(self.allowed)}"

    def describe(self) -> str:
        return f"[{', '.join(self.allowed)}]"


@dataclass(frozen=True)
class EachOneOf(Validator):
    """A LIST value whose every item is among ``allowed`` (Kafka's ``ValidList.in``; an
    empty list passes)."""

    allowed: tuple[str, ...]

    def problem(self, value: ConfigValue) -> str | None:
        items = value if isinstance(value, tuple) else ()
        if any(item not in self.allowed for item in items):
            return f"must be a list of {', '.join(self.allowed)}"
        return None

    def describe(self) -> str:
        return f"[{', '.join(self.allowed)}]"


def one_of(*allowed: str) -> OneOf:
    return OneOf(allowed)


def one_of_ignoring_case(*allowed: str) -> OneOf:
    return OneOf(allowed, ignore_case=True)


def each_one_of(*allowed: str) -> EachOneOf:
    return EachOneOf(allowed)


# --- keys and tables ----------------------------------------------------------------------


@dataclass(frozen=True)
class ConfigKey:
    """One row of a config table."""

    name: str
    type: ConfigType
    default: ConfigValue
    importance: Importance
    doc: str
    validator: Validator | None = None
    group: str = ""
    note: str = ""
    """What kafkaclone does differently from Kafka with this key, if anything."""
    deprecated: bool = False
    kafkaclone_only: bool = False
    """Not a Kafka 2.8 key (it mirrors an older one)."""
    server_default_config: str | None = None
    """For a topic-level key: the broker config (server.properties) supplying its default
    (Kafka's ``LogConfig`` server default property)."""
    item_type: ConfigType = ConfigType.STRING
    """For a LIST key: STRING (names), or CLASS (class names or Python objects, Kafka's
    ``getConfiguredInstances`` lists such as ``interceptor.classes``)."""

    @property
    def attribute(self) -> str:
        """The Python attribute holding the value: ``segment.bytes`` -> ``segment_bytes``."""
        return self.name.replace(".", "_")

    @property
    def sensitive(self) -> bool:
        return self.type is ConfigType.PASSWORD

    def parse(self, raw: object, *, strings_from_numbers: bool = False) -> ConfigValue:
        """The typed value of ``raw`` (a string from a file, or an already typed value),
        validated; ConfigError naming this key otherwise. None is accepted only where the
        default is None. ``strings_from_numbers``: a STRING value may be given as an int
        (its decimal text), as in a Python client's dict (``{"acks": 1}``)."""
        if raw is None:
            if self.default is None:
                return None
            raise ConfigError(self.name, None, f"a value of type {self.type.name} is required")
        if strings_from_numbers and self.type is ConfigType.STRING and \
                isinstance(raw, int) and not isinstance(raw, bool):
            raw = str(raw)
        try:
            value = parse_typed(self.type, raw, item_type=self.item_type)
        except ValueError as exc:
            raise ConfigError(self.name, self._loggable(raw), str(exc)) from None
        if self.validator is not None:
            problem = self.validator.problem(value)
            if problem is not None:
                raise ConfigError(self.name, self._loggable(raw), problem)
        return value

    def format(self, value: ConfigValue) -> str | None:
        """A typed value as Kafka writes it in a config entry (None stays None)."""
        if value is None:
            return None
        if isinstance(value, bool):
            return "true" if value else "false"
        if isinstance(value, tuple):
            return ",".join(value)
        if isinstance(value, PluginObjects):
            return ",".join(_plugin_name(item) for item in value.items)
        if isinstance(value, float):
            return repr(value)
        return str(value)

    def _loggable(self, raw: object) -> object:
        return "[hidden]" if self.sensitive else raw


def _plugin_name(item: object) -> str:
    if isinstance(item, str):
        return item
    if isinstance(item, type):
        return f"{item.__module__}.{item.__qualname__}"
    return repr(item)


_INTEGER_RE: Final = re.compile(r"[+-]?[0-9]+")
_INTEGER_RANGES: Final[Mapping[ConfigType, tuple[int, int]]] = {
    ConfigType.SHORT: (SHORT_MIN, SHORT_MAX),
    ConfigType.INT: (INT_MIN, INT_MAX),
    ConfigType.LONG: (LONG_MIN, LONG_MAX),
}


def parse_integer(text: str) -> int | None:
    """A decimal integer as Java's ``Long.parseLong`` reads it (sign, digits, surrounding
    whitespace trimmed; no underscores), else None."""
    text = text.strip()
    return int(text) if _INTEGER_RE.fullmatch(text) else None


def parse_csv_list(text: str) -> list[str]:
    """Kafka's ``CoreUtils.parseCsvList``: comma-separated, whitespace around commas and
    empty items dropped."""
    return [item for item in re.split(r"\s*,\s*", text.strip()) if item]


def _is_plugin_object(raw: object) -> bool:
    """A Python object that can stand for a class: not a string, number or container."""
    return not isinstance(raw, str | bytes | int | float | list | tuple | dict | set)


def parse_typed(config_type: ConfigType, raw: object,
                item_type: ConfigType = ConfigType.STRING) -> ConfigValue:
    """Kafka's ``ConfigDef.parseType``: strings are trimmed, numbers must fit the type.
    A CLASS value (and a LIST item where ``item_type`` is CLASS) may also be the Python
    object itself (PluginObjects). ValueError saying what was expected otherwise."""
    if config_type is ConfigType.BOOLEAN:
        if isinstance(raw, bool):
            return raw
        if isinstance(raw, str) and raw.strip().lower() in ("true", "false"):
            return raw.strip().lower() == "true"
        raise ValueError("expected true or false")
    if config_type in _INTEGER_RANGES:
        low, high = _INTEGER_RANGES[config_type]
        number: int | None = None
        if isinstance(raw, int) and not isinstance(raw, bool):
            number = raw
        elif isinstance(raw, str):
            number = parse_integer(raw)
        if number is None:
            raise ValueError(f"not a number of type {config_type.name}")
        if not low <= number <= high:
            raise ValueError(f"not a number of type {config_type.name} (range {low} to {high})")
        return number
    if config_type is ConfigType.DOUBLE:
        if isinstance(raw, int | float) and not isinstance(raw, bool):
            return float(raw)
        if isinstance(raw, str) and "_" not in raw:
            try:
                return float(raw.strip())
            except ValueError:
                pass
        raise ValueError("not a number of type DOUBLE")
    if config_type is ConfigType.LIST:
        if isinstance(raw, str):
            return tuple(parse_csv_list(raw))
        if isinstance(raw, list | tuple) and all(isinstance(item, str) for item in raw):
            return tuple(item.strip() for item in raw if item.strip())
        if item_type is ConfigType.CLASS and isinstance(raw, list | tuple) and all(
                isinstance(item, str) or _is_plugin_object(item) for item in raw):
            return PluginObjects(tuple(item.strip() if isinstance(item, str) else item
                                       for item in raw
                                       if not isinstance(item, str) or item.strip()))
        raise ValueError("expected a comma-separated list")
    # STRING, CLASS, PASSWORD
    if isinstance(raw, str):
        return raw.strip()
    if config_type is ConfigType.CLASS:
        if _is_plugin_object(raw):
            return PluginObjects((raw,))
        raise ValueError("expected a class name, or a Python class, function or object")
    raise ValueError("expected a string")


class ConfigDef:
    """An ordered table of config keys (Kafka's ``ConfigDef``). ``strings_from_numbers``:
    STRING values may be given as ints (see ``ConfigKey.parse``)."""

    def __init__(self, keys: Iterable[ConfigKey], *, strings_from_numbers: bool = False
                 ) -> None:
        self.strings_from_numbers = strings_from_numbers
        self._keys: dict[str, ConfigKey] = {}
        for key in keys:
            if key.name in self._keys:
                raise ValueError(f"config {key.name} is declared twice")
            if key.default is not None:
                # Every default must survive its own parser and validator.
                parsed = key.parse(key.default)
                if parsed != key.default:
                    raise ValueError(f"default of {key.name} is not its parsed form: {parsed!r}")
            self._keys[key.name] = key

    def __contains__(self, name: object) -> bool:
        return name in self._keys

    def __getitem__(self, name: str) -> ConfigKey:
        return self._keys[name]

    def __iter__(self) -> Iterator[ConfigKey]:
        return iter(self._keys.values())

    def __len__(self) -> int:
        return len(self._keys)

    def get(self, name: str) -> ConfigKey | None:
        return self._keys.get(name)

    def names(self) -> list[str]:
        return list(self._keys)

    def groups(self) -> list[str]:
        """The group names in declaration order."""
        return list(dict.fromkeys(key.group for key in self._keys.values()))

    def defaults(self) -> dict[str, ConfigValue]:
        return {name: key.default for name, key in self._keys.items()}

    def parse(self, props: Mapping[str, object]) -> tuple[dict[str, ConfigValue], list[str]]:
        """Every key's value (the supplied one parsed, else the default) and the supplied
        names the table does not know."""
        values = self.defaults()
        unknown: list[str] = []
        for name, raw in props.items():
            key = self._keys.get(name)
            if key is None:
                unknown.append(name)
            else:
                values[name] = key.parse(raw, strings_from_numbers=self.strings_from_numbers)
        return values, unknown


class AbstractConfig:
    """Parsed values of a ConfigDef with typed getters (Kafka's ``AbstractConfig``); a
    getter asked for a value of another type raises TypeError (a programming error, not a
    user's). ConfigError on an invalid value."""

    def __init__(self, definition: ConfigDef, props: Mapping[str, object]) -> None:
        self.definition = definition
        self._originals: dict[str, object] = dict(props)
        values, unknown = definition.parse(self._originals)
        self._values: dict[str, ConfigValue] = values
        self._unknown: tuple[str, ...] = tuple(unknown)

    @property
    def values(self) -> Mapping[str, ConfigValue]:
        """Every declared key's typed value."""
        return MappingProxyType(self._values)

    @property
    def originals(self) -> Mapping[str, object]:
        """What was supplied, unknown keys included."""
        return MappingProxyType(self._originals)

    @property
    def unknown_keys(self) -> tuple[str, ...]:
        """The supplied names the table does not declare."""
        return self._unknown

    def get(self, name: str) -> ConfigValue:
        """The typed value of a declared key (its default if not supplied); KeyError if the
        table does not declare it."""
        return self._values[name]

    def get_int(self, name: str) -> int:
        value = self._values[name]
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"{name} is {value!r}, not an integer")
        return value

    def get_bool(self, name: str) -> bool:
        value = self._values[name]
        if not isinstance(value, bool):
            raise TypeError(f"{name} is {value!r}, not a boolean")
        return value

    def get_float(self, name: str) -> float:
        value = self._values[name]
        if not isinstance(value, float):
            raise TypeError(f"{name} is {value!r}, not a double")
        return value

    def get_optional_str(self, name: str) -> str | None:
        value = self._values[name]
        if value is not None and not isinstance(value, str):
            raise TypeError(f"{name} is {value!r}, not a string")
        return value

    def get_str(self, name: str) -> str:
        value = self.get_optional_str(name)
        if value is None:
            raise TypeError(f"{name} is null")
        return value

    def get_list(self, name: str) -> list[str]:
        value = self._values[name]
        if not isinstance(value, tuple):
            raise TypeError(f"{name} is {value!r}, not a list")
        return list(value)

    def get_classes(self, name: str) -> list[object]:
        """A CLASS or class-LIST value's items: names (str) and Python objects; [] for
        null or an empty name."""
        value = self._values[name]
        if value is None:
            return []
        if isinstance(value, PluginObjects):
            return list(value.items)
        if isinstance(value, str):
            return [value] if value else []
        if isinstance(value, tuple):
            return list(value)
        raise TypeError(f"{name} is {value!r}, not a class")
