"""Plugin discovery: connectors, converters and transforms are classes registered under
the entry point group ``kafkaclone.connect.plugins`` (Kafka's ``plugin.path`` scan, done
the Python way). An entry point's name is the name a config uses: Kafka's class name
(``org.apache.kafka.connect.file.FileStreamSourceConnector``) or a short alias
(``FileStreamSource``). A third-party package registers its own the same way::

    [options.entry_points]
    kafkaclone.connect.plugins =
        com.example.MySourceConnector = my_package.connector:MySourceConnector

The project's own plugins are declared the same way, in its setup.cfg (the README's
set-up installs them; after editing the entry points, install the package again).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from importlib.metadata import entry_points
from typing import Final

from kafkaclone.connect.api import Connector, SinkConnector, SourceConnector
from kafkaclone.connect.converters import Converter
from kafkaclone.connect.transforms import Transformation

GROUP: Final = "kafkaclone.connect.plugins"


class PluginNotFoundError(LookupError):
    pass


@dataclass(frozen=True)
class PluginDesc:
    """One entry of ``GET /connector-plugins``."""

    name: str
    target: str

    def load(self) -> type:
        module_name, _, attribute = self.target.partition(":")
        loaded: object = importlib.import_module(module_name)
        for part in attribute.split("."):
            loaded = getattr(loaded, part)
        if not isinstance(loaded, type):
            raise PluginNotFoundError(f"{self.name} = {self.target} is not a class")
        return loaded


class Plugins:
    """The registered plugins by name (Kafka's ``Plugins``)."""

    def __init__(self, extra: dict[str, str] | None = None) -> None:
        found = {entry.name: entry.value for entry in entry_points(group=GROUP)}
        found.update(extra or {})
        self.entries = {name: PluginDesc(name, target) for name, target in found.items()}

    def _load(self, name: str) -> type:
        desc = self.entries.get(name)
        if desc is None:
            raise PluginNotFoundError(
                f"Failed to find any class that implements Connector and which name matches "
                f"{name}, available connectors are: {', '.join(self.connector_names())}")
        return desc.load()

    def connector_class(self, name: str) -> type[Connector]:
        cls = self._load(name)
        if not issubclass(cls, Connector):
            raise PluginNotFoundError(f"{name} is not a Connector")
        return cls

    def converter_class(self, name: str) -> type[Converter]:
        cls = self._load(name)
        if not issubclass(cls, Converter):
            raise PluginNotFoundError(f"{name} is not a Converter")
        return cls

    def transformation_class(self, name: str) -> type[Transformation]:
        cls = self._load(name)
        if not issubclass(cls, Transformation):
            raise PluginNotFoundError(f"{name} is not a Transformation")
        return cls

    def connector_names(self) -> list[str]:
        return sorted(name for name, desc in self.entries.items() if "." in name
                      and _is_subclass(desc, Connector))

    def connector_plugins(self) -> list[dict[str, str]]:
        """``GET /connector-plugins``: Kafka's class name, type and version of each
        connector (aliases left out, as Kafka lists each class once)."""
        out: list[dict[str, str]] = []
        seen: set[str] = set()
        # Kafka's class names (dotted) before their short aliases, each class once.
        by_kafka_name = sorted(self.entries.items(),
                               key=lambda item: ("." not in item[0], item[0]))
        for name, desc in by_kafka_name:
            if desc.target in seen or not _is_subclass(desc, Connector):
                continue
            seen.add(desc.target)
            cls = desc.load()
            assert issubclass(cls, Connector)
            kind = "source" if issubclass(cls, SourceConnector) else \
                "sink" if issubclass(cls, SinkConnector) else "unknown"
            out.append({"class": name, "type": kind, "version": cls().version()})
        return out


def _is_subclass(desc: PluginDesc, base: type) -> bool:
    try:
        return issubclass(desc.load(), base)
    except (ImportError, AttributeError, PluginNotFoundError):
        return False
