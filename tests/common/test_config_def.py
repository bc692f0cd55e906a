"""The shared config machinery: kafkaclone.common.config_def."""

from __future__ import annotations

import pytest

from kafkaclone.common.config_def import (
    LONG_MAX,
    AbstractConfig,
    ConfigDef,
    ConfigError,
    ConfigKey,
    ConfigType,
    Importance,
    PluginObjects,
    at_least,
    between,
    each_one_of,
    one_of,
    parse_typed,
)
from kafkaclone.common.errors import InvalidConfigError

LOW = Importance.LOW


@pytest.mark.parametrize(
    ("config_type", "raw", "expected"),
    [
        (ConfigType.INT, " 42 ", 42),
        (ConfigType.INT, "+7", 7),
        (ConfigType.LONG, str(LONG_MAX), LONG_MAX),
        (ConfigType.SHORT, -5, -5),
        (ConfigType.DOUBLE, "0.25", 0.25),
        (ConfigType.DOUBLE, 1, 1.0),
        (ConfigType.BOOLEAN, "TRUE", True),
        (ConfigType.BOOLEAN, False, False),
        (ConfigType.STRING, " x ", "x"),
        (ConfigType.LIST, "a, b,,c ", ("a", "b", "c")),
        (ConfigType.LIST, ["a", " b"], ("a", "b")),
        (ConfigType.LIST, "", ()),
    ],
)
def test_parse_typed(config_type: ConfigType, raw: object, expected: object) -> None:
    assert parse_typed(config_type, raw) == expected


@pytest.mark.parametrize(
    ("config_type", "raw"),
    [
        (ConfigType.INT, "1_000"),
        (ConfigType.INT, "1.5"),
        (ConfigType.INT, True),
        (ConfigType.INT, str(2**31)),
        (ConfigType.SHORT, "40000"),
        (ConfigType.DOUBLE, "1_0"),
        (ConfigType.DOUBLE, "much"),
        (ConfigType.BOOLEAN, "yes"),
        (ConfigType.STRING, 5),
        (ConfigType.LIST, [1, 2]),
    ],
)
def test_parse_typed_refuses(config_type: ConfigType, raw: object) -> None:
    with pytest.raises(ValueError, match=config_type.name if config_type.name in (
        "INT", "SHORT", "DOUBLE") else "expected"):
        parse_typed(config_type, raw)


def test_validators_say_what_is_allowed() -> None:
    assert at_least(1).problem(0) == "must be at least 1"
    assert at_least(1).problem(1) is None
    assert between(0, 1).problem(1.5) == "must be in [0, 1]"
    assert between(0, 1).describe() == "[0,...,1]"
    assert one_of("a", "b").problem("c") == "must be one of a, b"
    assert each_one_of("a", "b").problem(("a", "c")) == "must be a list of a, b"
    assert each_one_of("a", "b").problem(()) is None


def test_a_bad_value_is_a_config_error_naming_the_key() -> None:
    key = ConfigKey("x.y", ConfigType.INT, 1, LOW, "X.", validator=at_least(1))
    assert key.parse("3") == 3
    with pytest.raises(ConfigError) as raised:
        key.parse("0")
    error = raised.value
    assert isinstance(error, InvalidConfigError) and error.code == 40
    assert (error.key, error.value) == ("x.y", "0")
    assert str(error) == "Invalid value '0' for configuration x.y: must be at least 1"
    with pytest.raises(ConfigError, match="a value of type INT is required"):
        key.parse(None)


def test_passwords_are_not_shown() -> None:
    key = ConfigKey("secret", ConfigType.PASSWORD, None, LOW, "S.", validator=one_of("a"))
    with pytest.raises(ConfigError) as raised:
        key.parse("hunter2")
    assert "hunter2" not in str(raised.value)


def test_format_is_kafkas_string_form() -> None:
    key = ConfigKey("k", ConfigType.LIST, (), LOW, "K.")
    assert key.format(("a", "b")) == "a,b"
    assert key.format(True) == "true"
    assert key.format(0.5) == "0.5"
    assert key.format(None) is None
    assert ConfigKey("segment.bytes", ConfigType.INT, 1, LOW, "S.").attribute == "segment_bytes"


def test_config_def_parses_with_defaults_and_reports_unknown_names() -> None:
    table = ConfigDef([
        ConfigKey("a", ConfigType.INT, 1, LOW, "A.", group="G"),
        ConfigKey("b", ConfigType.STRING, None, LOW, "B.", group="H"),
    ])
    assert table.names() == ["a", "b"] and len(table) == 2 and "a" in table
    assert table.groups() == ["G", "H"]
    assert table.parse({"a": "5", "c": "?"}) == ({"a": 5, "b": None}, ["c"])
    with pytest.raises(ValueError, match="not its parsed form"):
        ConfigDef([ConfigKey("d", ConfigType.STRING, " d ", LOW, "D.")])


def test_class_values_may_be_python_objects() -> None:
    def plugin() -> None:
        pass

    assert parse_typed(ConfigType.CLASS, " a.b.C ") == "a.b.C"
    value = parse_typed(ConfigType.CLASS, plugin)
    assert isinstance(value, PluginObjects) and value.items == (plugin,)
    with pytest.raises(ValueError, match="class name"):
        parse_typed(ConfigType.CLASS, 5)
    classes = parse_typed(ConfigType.LIST, ["x.Y ", plugin], item_type=ConfigType.CLASS)
    assert isinstance(classes, PluginObjects) and classes.items == ("x.Y", plugin)
    with pytest.raises(ValueError, match="expected"):
        parse_typed(ConfigType.LIST, ["x.Y", plugin])  # a list of names only
    key = ConfigKey("plugins", ConfigType.LIST, (), LOW, "P.", item_type=ConfigType.CLASS)
    assert key.format(classes) == f"x.Y,{plugin!r}"


def test_strings_from_numbers_and_typed_getters() -> None:
    keys = [ConfigKey("acks", ConfigType.STRING, "1", LOW, "A.", validator=one_of("1", "-1")),
            ConfigKey("n", ConfigType.INT, 1, LOW, "N."),
            ConfigKey("flag", ConfigType.BOOLEAN, False, LOW, "F."),
            ConfigKey("names", ConfigType.LIST, ("a",), LOW, "L."),
            ConfigKey("plugin", ConfigType.CLASS, None, LOW, "C.")]
    with pytest.raises(ConfigError, match="expected a string"):
        ConfigDef(keys).parse({"acks": -1})
    config = AbstractConfig(ConfigDef(keys, strings_from_numbers=True),
                            {"acks": -1, "n": "7", "other": 1, "plugin": print})
    assert config.get_str("acks") == "-1" and config.get_int("n") == 7
    assert config.get_bool("flag") is False and config.get_list("names") == ["a"]
    assert config.get_classes("plugin") == [print] and config.unknown_keys == ("other",)
    with pytest.raises(TypeError, match="not an integer"):
        config.get_int("acks")
