"""Message schemas declared once as data, compiled into flat per-version codecs.

A message is declared once for all of its versions, the way Kafka's
``clients/src/main/resources/common/message/*.json`` files do it: every field carries the
versions it exists in, the versions in which it may be null, and (for KIP-482 tagged
fields) its tag. For example::

    PRODUCE_REQUEST = request(0, "ProduceRequest", valid="0-9", flexible="9+", fields=[
        field("transactional_id", "string", "3+", nullable="3+", default=None),
        field("acks", "int16"),
        field("timeout_ms", "int32"),
        field("topic_data", "[]TopicProduceData", fields=[
            field("name", "string"),
            field("partition_data", "[]PartitionProduceData", fields=[
                field("index", "int32"),
                field("records", "records", nullable="0+"),
            ]),
        ]),
    ])

At import, :func:`compile_message` turns each (message, version) into one generated Python
function for decoding and one for encoding: consecutive fixed-width fields become a single
precompiled ``struct`` call, and no field list is interpreted at run time. Decoded messages
are instances of a slotted dataclass; nested structs are classes reachable as attributes of
their parent (``ProduceRequest.TopicProduceData``).

The dataclasses of the messages kafkaclone declares are written out, typed, in
:mod:`kafkaclone.protocol.message_types` (by ``python -m kafkaclone.tools.protocol_types
--write``, from :func:`class_source`), so mypy checks every field a handler touches; the
compiler decodes into those very classes after checking that their fields are the declared
ones. A message declared elsewhere (a test's) gets its class from the same source, made at
run time.

Types: ``bool int8 int16 uint16 int32 uint32 int64 float64 string bytes records uuid``,
``[]T`` for arrays of any of those or of a struct, and a capitalised name for a struct.
``file_records`` is ``records`` on the wire whose value may also be a
:class:`~kafkaclone.common.file_region.FileRegion` (the Fetch response's records, sent with
sendfile): :func:`kafkaclone.protocol.api.encode_response_parts` leaves such a region out
of the encoded bytes, as a part of its own.
"""

from __future__ import annotations

import dataclasses
import struct
import threading
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final, Generic, TypeVar

from kafkaclone.common.errors import DecodeError, UnsupportedVersionError
from kafkaclone.protocol import message_types
from kafkaclone.protocol import types as t

MAX_VERSION: Final = 0x7FFF

_FIXED_FORMATS: Final = {
    "bool": "?",
    "int8": "b",
    "int16": "h",
    "uint16": "H",
    "int32": "i",
    "uint32": "I",
    "int64": "q",
    "float64": "d",
}
_VARIABLE_TYPES: Final = {"string", "bytes", "records", "file_records", "uuid"}
_ZERO_DEFAULTS: Final[dict[str, Any]] = {
    "bool": False,
    "int8": 0,
    "int16": 0,
    "uint16": 0,
    "int32": 0,
    "uint32": 0,
    "int64": 0,
    "float64": 0.0,
    "string": "",
    "bytes": b"",
    "records": None,
    "file_records": None,
    "uuid": t.ZERO_UUID,
}


@dataclass(frozen=True)
class Versions:
    """An inclusive version range, written as Kafka writes it: "0+", "3-5", "2", "none"."""

    low: int
    high: int

    @classmethod
    def parse(cls, text: str) -> Versions:
        text = text.strip()
        if text == "none":
            return NO_VERSIONS
        if text.endswith("+"):
            return cls(int(text[:-1]), MAX_VERSION)
        if "-" in text:
            low, high = text.split("-")
            return cls(int(low), int(high))
        return cls(int(text), int(text))

    def __contains__(self, version: object) -> bool:
        return isinstance(version, int) and self.low <= version <= self.high

    def __str__(self) -> str:
        if self.low > self.high:
            return "none"
        if self.high == MAX_VERSION:
            return f"{self.low}+"
        if self.low == self.high:
            return str(self.low)
        return f"{self.low}-{self.high}"

    def intersect(self, other: Versions) -> Versions:
        return Versions(max(self.low, other.low), min(self.high, other.high))


NO_VERSIONS: Final = Versions(1, 0)

_UNSET: Final[Any] = object()


@dataclass(frozen=True)
class Field:
    name: str
    type: str
    versions: Versions
    nullable: Versions
    tagged: Versions
    tag: int | None
    default: Any
    fields: tuple[Field, ...] | None
    flexible: Versions | None
    about: str

    @property
    def is_array(self) -> bool:
        return self.type.startswith("[]")

    @property
    def element_type(self) -> str:
        return self.type[2:] if self.is_array else self.type

    @property
    def is_struct(self) -> bool:
        return self.element_type[:1].isupper()


def field(
    name: str,
    type: str,
    versions: str = "0+",
    *,
    nullable: str = "none",
    tag: int | None = None,
    tagged: str | None = None,
    default: Any = _UNSET,
    fields: Sequence[Field] | None = None,
    flexible: str | None = None,
    about: str = "",
) -> Field:
    """Declare one field. ``tagged`` defaults to ``versions`` when a ``tag`` is given."""
    declared = Versions.parse(versions)
    if tag is not None and tagged is None:
        tagged = versions
    element = type[2:] if type.startswith("[]") else type
    if element[:1].isupper():
        if fields is None:
            raise ValueError(f"struct field {name!r} of type {type!r} needs its fields")
    elif element not in _FIXED_FORMATS and element not in _VARIABLE_TYPES:
        raise ValueError(f"field {name!r} has unknown type {type!r}")
    return Field(
        name=name,
        type=type,
        versions=declared,
        nullable=Versions.parse(nullable),
        tagged=Versions.parse(tagged) if tagged is not None else NO_VERSIONS,
        tag=tag,
        default=default,
        fields=tuple(fields) if fields is not None else None,
        flexible=Versions.parse(flexible) if flexible is not None else None,
        about=about,
    )


@dataclass(frozen=True)
class MessageSpec:
    name: str
    kind: str  # "request", "response", "header" or "data"
    api_key: int | None
    valid: Versions
    flexible: Versions
    fields: tuple[Field, ...]


def request(
    api_key: int, name: str, *, valid: str, flexible: str, fields: Sequence[Field]
) -> MessageSpec:
    return MessageSpec(name, "request", api_key, Versions.parse(valid),
                       Versions.parse(flexible), tuple(fields))


def response(
    api_key: int, name: str, *, valid: str, flexible: str, fields: Sequence[Field]
) -> MessageSpec:
    return MessageSpec(name, "response", api_key, Versions.parse(valid),
                       Versions.parse(flexible), tuple(fields))


def data(name: str, *, valid: str, flexible: str, fields: Sequence[Field]) -> MessageSpec:
    """A message that is not an API body (headers, embedded consumer-protocol payloads)."""
    return MessageSpec(name, "data", None, Versions.parse(valid),
                       Versions.parse(flexible), tuple(fields))


Decoder = Callable[[Any, int], tuple[Any, int]]
Encoder = Callable[[Any, bytearray], None]

MessageT = TypeVar("MessageT")


class Message(Generic[MessageT]):
    """A compiled message: its class and one encoder/decoder per version."""

    def __init__(self, spec: MessageSpec, cls: type[MessageT], structs: dict[str, type[Any]],
                 decoders: dict[int, Decoder], encoders: dict[int, Encoder]) -> None:
        self.spec = spec
        self.name = spec.name
        self.cls = cls
        self.structs = structs
        """Every struct class of the message by name, however deeply nested."""
        self.min_version = spec.valid.low
        self.max_version = spec.valid.high
        self._decoders = decoders
        self._encoders = encoders

    def __call__(self, **kwargs: Any) -> MessageT:
        return self.cls(**kwargs)

    def is_flexible(self, version: int) -> bool:
        return version in self.spec.flexible

    def decode(self, buf: t.Buffer, version: int, pos: int = 0) -> tuple[MessageT, int]:
        """Decode one message at ``pos``; returns it and the position after it."""
        decoder = self._decoders.get(version)
        if decoder is None:
            raise UnsupportedVersionError(f"{self.name} has no version {version}")
        try:
            return decoder(buf, pos)
        except DecodeError:
            raise
        except (struct.error, IndexError, ValueError, OverflowError, MemoryError) as exc:
            raise DecodeError(f"malformed {self.name} v{version}: {exc}") from None

    def decode_exact(self, buf: t.Buffer, version: int) -> MessageT:
        """Decode a buffer that must hold exactly one message and nothing after it."""
        value, end = self.decode(buf, version)
        if end != len(buf):
            raise DecodeError(f"{len(buf) - end} bytes left over after {self.name} v{version}")
        return value

    def encode(self, value: MessageT, version: int) -> bytes:
        out = bytearray()
        self.encode_into(value, version, out)
        return bytes(out)

    def encode_into(self, value: MessageT, version: int, out: bytearray) -> None:
        encoder = self._encoders.get(version)
        if encoder is None:
            raise UnsupportedVersionError(f"{self.name} has no version {version}")
        try:
            encoder(value, out)
        except (struct.error, AttributeError, TypeError, OverflowError) as exc:
            raise ValueError(f"cannot encode {self.name} v{version}: {exc}") from exc

    def __repr__(self) -> str:
        return f"<Message {self.name} v{self.spec.valid}>"


# --- the typed classes ---------------------------------------------------------------------

_PYTHON_TYPES: Final = {
    "bool": "bool",
    "int8": "int",
    "int16": "int",
    "uint16": "int",
    "int32": "int",
    "uint32": "int",
    "int64": "int",
    "float64": "float",
    "string": "str",
    "bytes": "bytes",
    "records": "Buffer",
    "file_records": "Records",
    "uuid": "UUID",
}
CLASS_IMPORTS: Final = """\
from dataclasses import dataclass, field
from uuid import UUID

from kafkaclone.protocol.types import ZERO_UUID, Buffer, Records
"""
"""What the source of :func:`class_source` needs imported."""
_SOURCE_NAMES: Final = frozenset(
    {"dataclass", "field", "UUID", "ZERO_UUID", "Buffer", "Records", *_PYTHON_TYPES.values(),
     "list",
     "tuple", "unknown_tagged_fields"})
"""Names a field of a message may not take: the class bodies use them."""


def class_source(spec: MessageSpec) -> str:
    """Python source of the dataclass of ``spec``, its structs as nested classes.

    Every field of every version, with its Python type (``| None`` where some version may be
    null or the default is null) and its default. A struct with several parents (Kafka's
    commonStruct) is written once, where it first appears, and named by its path elsewhere;
    the compiler makes it an attribute of its other parents too.
    """
    return "\n".join(_ClassWriter(spec).write()) + "\n"


class _ClassWriter:
    def __init__(self, spec: MessageSpec) -> None:
        self.spec = spec
        self.paths: dict[str, str] = {}
        """Each struct class written so far, by name: its path from the module."""
        self.lines: list[str] = []

    def write(self) -> list[str]:
        self._class(self.spec.name, self.spec.fields, self.spec.name, "")
        return self.lines

    def _class(self, name: str, fields: tuple[Field, ...], path: str, ind: str) -> None:
        self.paths[name] = path
        inner = ind + "    "
        self.lines.append(f"{ind}@dataclass(slots=True)")
        self.lines.append(f"{ind}class {name}:")
        if path == self.spec.name:
            spec = self.spec
            kind = f"API key {spec.api_key}" if spec.api_key is not None else "data"
            self.lines.append(f'{inner}"""{name} ({kind}): versions {spec.valid}, '
                              f'flexible {spec.flexible}."""')
            self.lines.append("")
        for f in fields:
            if f.is_struct and f.element_type not in self.paths:
                assert f.fields is not None
                self._class(f.element_type, f.fields, f"{path}.{f.element_type}", inner)
                self.lines.append("")
        for f in fields:
            self._field(f, path, inner)
        self.lines.append(f"{inner}unknown_tagged_fields: list[tuple[int, bytes]] = "
                          f"field(default_factory=list)")

    def _field(self, f: Field, path: str, ind: str) -> None:
        if f.name in _SOURCE_NAMES:
            raise ValueError(f"{self.spec.name}: a field may not be named {f.name!r}")
        notes = []
        if str(f.versions) != "0+":
            notes.append(f"versions {f.versions}")
        if f.nullable.low <= f.nullable.high:
            notes.append(f"nullable {f.nullable}")
        if f.tag is not None:
            notes.append(f"tag {f.tag}")
        if notes:
            self.lines.append(f"{ind}# {', '.join(notes)}")
        default = self._default(f, path)
        element = (self._struct_ref(f.element_type, path) if f.is_struct
                   else _PYTHON_TYPES[f.element_type])
        annotation = f"list[{element}]" if f.is_array else element
        if f.nullable.low <= f.nullable.high or default == "None":
            annotation += " | None"
        line = f"{ind}{f.name}: {annotation} = {default}"
        if len(line) > 100:
            line = f"{ind}{f.name}: {annotation} = (\n{ind}    {default})"
        self.lines.append(line)

    def _struct_ref(self, name: str, path: str) -> str:
        """How the class body at ``path`` names the struct class ``name``."""
        own = self.paths[name]
        return name if own == f"{path}.{name}" else own

    def _default(self, f: Field, path: str) -> str:
        if f.is_array:
            return "None" if f.default is None else "field(default_factory=list)"
        if f.is_struct:
            if f.default is None:
                return "None"
            ref = self._struct_ref(f.element_type, path)
            if ref != f.element_type:
                raise ValueError(f"{self.spec.name}.{f.name}: a shared struct must be an array")
            return f"field(default_factory={ref})"
        value = _ZERO_DEFAULTS[f.type] if f.default is _UNSET else f.default
        if isinstance(value, uuid.UUID):
            return "ZERO_UUID" if value == t.ZERO_UUID else f'UUID("{value}")'
        if isinstance(value, str) and value.isprintable() and not {'"', '\\'} & set(value):
            return f'"{value}"'
        return repr(value)


_TYPED_CLASSES: Final[dict[str, type[Any]]] = {
    name: vars(message_types)[name] for name in message_types.__all__
}


def _message_class(spec: MessageSpec) -> type[Any]:
    """The typed class of a message kafkaclone declares; for another one (a test's), a class
    made at run time from the same source."""
    typed = _TYPED_CLASSES.get(spec.name)
    if typed is not None:
        return typed
    namespace: dict[str, Any] = {"__name__": __name__}
    source = "from __future__ import annotations\n" + CLASS_IMPORTS + class_source(spec)
    exec(compile(source, f"<kafkaclone class {spec.name}>", "exec"), namespace)
    cls: type[Any] = namespace[spec.name]
    return cls


# --- compilation ---------------------------------------------------------------------------


_COMPILED: dict[int, tuple[MessageSpec, Message[Any]]] = {}
_COMPILING = threading.RLock()


def compile_message(spec: MessageSpec) -> Message[Any]:
    """The class and per-version codecs of one declared message, generated once per spec.

    Compiling the same declaration twice returns the same Message, so every module that
    needs a message (the registry, the consumer-protocol helpers) shares one class.
    """
    cached = _COMPILED.get(id(spec))
    if cached is not None and cached[0] is spec:
        return cached[1]
    with _COMPILING:  # APIs compile on first use, maybe from two threads at once
        cached = _COMPILED.get(id(spec))
        if cached is not None and cached[0] is spec:
            return cached[1]
        message = _compile(spec)
        _COMPILED[id(spec)] = (spec, message)
        return message


def _compile(spec: MessageSpec) -> Message[Any]:
    compiler = _Compiler(spec)
    cls = compiler.adopt_classes(_message_class(spec))
    names = {
        version: compiler.make_codecs(spec.name, spec.fields, version)
        for version in range(spec.valid.low, spec.valid.high + 1)
    }
    namespace = compiler.finish()
    decoders = {version: namespace[dec] for version, (dec, _) in names.items()}
    encoders = {version: namespace[enc] for version, (_, enc) in names.items()}
    return Message(spec, cls, dict(compiler.classes), decoders, encoders)


def _default_expr(f: Field, namespace: dict[str, Any]) -> str:
    """Python source for a fresh default value of ``f`` (lists must not be shared)."""
    if f.is_array:
        return "None" if f.default is None else "[]"
    if f.is_struct:
        return "None" if f.default is None else f"_cls_{f.element_type}()"
    value = _ZERO_DEFAULTS[f.type] if f.default is _UNSET else f.default
    if value is None or isinstance(value, (bool, int, float)):
        return repr(value)
    key = f"_default_{len(namespace)}"
    namespace[key] = value
    return key


class _Compiler:
    """Writes the source of all codecs of one message and executes it once."""

    def __init__(self, spec: MessageSpec) -> None:
        self.spec = spec
        self.namespace: dict[str, Any] = {
            "t": t,
            "DecodeError": DecodeError,
            "_struct": struct,
            "_INT32": t.INT32,
            "_INT16": t.INT16,
        }
        self.classes: dict[str, type[Any]] = {}
        self.struct_fields: dict[str, tuple[Field, ...]] = {}
        self.lines: list[str] = []
        self.written: set[str] = set()
        self.counter = 0

    # classes

    def adopt_classes(self, cls: type[Any]) -> type[Any]:
        """Check the message's class and its nested structs against the declaration and
        make them the classes the decoders build."""
        self._adopt(self.spec.name, self.spec.fields, cls)
        return cls

    def _adopt(self, name: str, fields: tuple[Field, ...], cls: type[Any]) -> None:
        declared = [f.name for f in fields] + ["unknown_tagged_fields"]
        actual = [f.name for f in dataclasses.fields(cls)]
        if actual != declared:
            raise ValueError(
                f"{cls.__qualname__} has the fields {actual}, but {name} declares {declared} "
                f"(run python -m kafkaclone.tools.protocol_types --write)")
        self.struct_fields[name] = fields
        self.classes[name] = cls
        self.namespace[f"_cls_{name}"] = cls
        for f in fields:
            if not f.is_struct:
                continue
            assert f.fields is not None
            known = self.classes.get(f.element_type)
            if known is None:
                child = vars(cls).get(f.element_type)
                if child is None:
                    raise ValueError(
                        f"{cls.__qualname__} has no struct class {f.element_type} "
                        f"(run python -m kafkaclone.tools.protocol_types --write)")
                self._adopt(f.element_type, f.fields, child)
            elif self.struct_fields[f.element_type] != f.fields:
                raise ValueError(
                    f"{self.spec.name}: struct {f.element_type} declared twice, differently")
            else:
                # Kafka's commonStruct: one class, written where it first appears and
                # reachable as an attribute of every parent.
                setattr(cls, f.element_type, known)

    # codecs

    def make_codecs(self, name: str, fields: tuple[Field, ...], version: int) -> tuple[str, str]:
        """Write the decoder and encoder of one version; returns their function names."""
        return (self._struct_decoder(name, fields, version),
                self._struct_encoder(name, fields, version))

    def finish(self) -> dict[str, Any]:
        source = "\n".join(self.lines)
        code = compile(source, f"<kafkaclone schema {self.spec.name}>", "exec")
        exec(code, self.namespace)
        return self.namespace

    def _flexible(self, f: Field, version: int) -> bool:
        if f.flexible is not None:
            return version in f.flexible
        return version in self.spec.flexible

    def _fname(self, kind: str, name: str, version: int) -> str:
        return f"_{kind}_{name}_v{version}"

    def _struct_decoder(self, name: str, fields: tuple[Field, ...], version: int) -> str:
        fname = self._fname("dec", name, version)
        if fname in self.written:
            return fname
        self.written.add(fname)
        flexible = version in self.spec.flexible
        body: list[str] = []
        values: list[str] = []
        run: list[tuple[str, str]] = []  # (var, struct format) of consecutive fixed fields

        def flush_run() -> None:
            if not run:
                return
            fmt = ">" + "".join(code for _, code in run)
            key = self._const(struct.Struct(fmt))
            names = ", ".join(var for var, _ in run)
            body.append(f"    ({names},) = {key}.unpack_from(buf, pos)")
            body.append(f"    pos += {struct.calcsize(fmt)}")
            run.clear()

        tagged_fields: list[Field] = []
        for i, f in enumerate(fields):
            var = f"v{i}"
            values.append(var)
            if version not in f.versions:
                body_default = _default_expr(f, self.namespace)
                flush_run()
                body.append(f"    {var} = {body_default}")
                continue
            if version in f.tagged:
                tagged_fields.append(f)
                body.append(f"    {var} = {_default_expr(f, self.namespace)}")
                continue
            if not f.is_array and f.type in _FIXED_FORMATS:
                run.append((var, _FIXED_FORMATS[f.type]))
                continue
            flush_run()
            body.extend(self._decode_value(f, version, var, "    "))
        flush_run()
        unknown = "[]"
        if flexible:
            unknown = "unknown"
            body.extend(self._decode_tagged(fields, tagged_fields, version))
        args = ", ".join([*values, unknown])
        lines = [f"def {fname}(buf, pos):", *body, f"    return _cls_{name}({args}), pos", ""]
        self.lines.extend(lines)
        return fname

    def _decode_tagged(self, fields: tuple[Field, ...], tagged: list[Field],
                       version: int) -> list[str]:
        # Nearly every struct has no tagged field: its count, one zero byte, is read
        # inline; the loop below (one level deeper) reads the others.
        head = [
            "    unknown = []",
            "    if pos < len(buf) and buf[pos] == 0:",
            "        pos += 1",
            "    else:",
        ]
        body = [
            "    ntags, pos = t.read_uvarint(buf, pos)",
            "    if ntags > len(buf) - pos:",
            "        raise DecodeError('more tagged fields than bytes')",
            "    for _ in range(ntags):",
            "        tag, pos = t.read_uvarint(buf, pos)",
            "        size, pos = t.read_uvarint(buf, pos)",
            "        end = pos + size",
            "        if end > len(buf):",
            "            raise DecodeError('tagged field runs past the end of the buffer')",
        ]
        keyword = "if"
        for f in tagged:
            var = f"v{fields.index(f)}"
            body.append(f"        {keyword} tag == {f.tag}:")
            body.extend(self._decode_value(f, version, var, "            "))
            body.append("            if pos != end:")
            body.append(f"                raise DecodeError('bad size of tagged field {f.name}')")
            keyword = "elif"
        if tagged:
            body.append("        else:")
            indent = "            "
        else:
            indent = "        "
        body.append(f"{indent}unknown.append((tag, bytes(buf[pos:end])))")
        body.append(f"{indent}pos = end")
        return head + ["    " + line for line in body]

    def _decode_value(self, f: Field, version: int, var: str, ind: str) -> list[str]:
        flexible = self._flexible(f, version)
        nullable = version in f.nullable
        elem = f.element_type
        if f.is_array:
            min_size = self._min_size(f, version, element=True)
            reader = "read_compact_array_length" if flexible else "read_array_length"
            out = [f"{ind}n, pos = t.{reader}(buf, pos, {min_size})"]
            if nullable:
                out.append(f"{ind}if n < 0:")
                out.append(f"{ind}    {var} = None")
                out.append(f"{ind}else:")
            else:
                out.append(f"{ind}if n < 0:")
                out.append(f"{ind}    raise DecodeError('non-nullable array {f.name} is null')")
                out.append(f"{ind}if True:")
            if elem in _FIXED_FORMATS:
                code = _FIXED_FORMATS[elem]
                size = struct.calcsize(">" + code)
                out.append(f"{ind}    {var} = list(_struct.unpack_from('>%d{code}' % n, buf, pos))")
                out.append(f"{ind}    pos += n * {size}")
                return out
            out.append(f"{ind}    {var} = []")
            out.append(f"{ind}    append = {var}.append")
            out.append(f"{ind}    for _ in range(n):")
            if f.is_struct:
                assert f.fields is not None
                sub = self._struct_decoder(elem, f.fields, version)
                out.append(f"{ind}        item, pos = {sub}(buf, pos)")
            else:
                reader = self._reader(elem, flexible, False)
                out.append(f"{ind}        item, pos = {reader}(buf, pos)")
            out.append(f"{ind}        append(item)")
            return out
        if f.is_struct:
            assert f.fields is not None
            if nullable:
                raise ValueError(f"{self.spec.name}.{f.name}: nullable structs are not supported")
            sub = self._struct_decoder(elem, f.fields, version)
            return [f"{ind}{var}, pos = {sub}(buf, pos)"]
        if elem in _FIXED_FORMATS:
            key = self._const(struct.Struct(">" + _FIXED_FORMATS[elem]))
            size = struct.calcsize(">" + _FIXED_FORMATS[elem])
            return [f"{ind}({var},) = {key}.unpack_from(buf, pos)", f"{ind}pos += {size}"]
        return [f"{ind}{var}, pos = {self._reader(elem, flexible, nullable)}(buf, pos)"]

    @staticmethod
    def _reader(elem: str, flexible: bool, nullable: bool) -> str:
        if elem == "uuid":
            return "t.read_uuid"
        if elem in ("records", "file_records"):
            return "t.read_compact_records" if flexible else "t.read_records"
        prefix = "t.read_compact_" if flexible else "t.read_"
        return prefix + ("nullable_" if nullable else "") + elem

    @staticmethod
    def _writer(elem: str, flexible: bool, nullable: bool) -> str:
        if elem == "uuid":
            return "t.write_uuid"
        if elem == "records":
            return "t.write_compact_records" if flexible else "t.write_records"
        if elem == "file_records":
            return "t.write_compact_file_records" if flexible else "t.write_file_records"
        prefix = "t.write_compact_" if flexible else "t.write_"
        return prefix + ("nullable_" if nullable else "") + elem

    def _min_size(self, f: Field, version: int, *, element: bool = False) -> int:
        """The fewest bytes one value (or one array element) of ``f`` can take."""
        flexible = self._flexible(f, version)
        if f.is_array and not element:
            return 1 if flexible else 4
        elem = f.element_type
        if elem in _FIXED_FORMATS:
            return struct.calcsize(">" + _FIXED_FORMATS[elem])
        if elem == "uuid":
            return 16
        if elem in ("string",):
            return 1 if flexible else 2
        if elem in ("bytes", "records", "file_records"):
            return 1 if flexible else 4
        assert f.fields is not None
        total = 1 if version in self.spec.flexible else 0
        for sub in f.fields:
            if version in sub.versions and version not in sub.tagged:
                total += self._min_size(sub, version)
        return total

    def _struct_encoder(self, name: str, fields: tuple[Field, ...], version: int) -> str:
        fname = self._fname("enc", name, version)
        if fname in self.written:
            return fname
        self.written.add(fname)
        flexible = version in self.spec.flexible
        body: list[str] = []
        run: list[tuple[str, str]] = []

        def flush_run() -> None:
            if not run:
                return
            fmt = ">" + "".join(code for _, code in run)
            key = self._const(struct.Struct(fmt))
            args = ", ".join(expr for expr, _ in run)
            body.append(f"    out += {key}.pack({args})")
            run.clear()

        tagged_fields: list[Field] = []
        for f in fields:
            if version not in f.versions:
                continue
            if version in f.tagged:
                tagged_fields.append(f)
                continue
            if not f.is_array and f.type in _FIXED_FORMATS:
                run.append((f"obj.{f.name}", _FIXED_FORMATS[f.type]))
                continue
            flush_run()
            body.extend(self._encode_value(f, version, f"obj.{f.name}", "out", "    "))
        flush_run()
        if flexible:
            body.extend(self._encode_tagged(tagged_fields, version))
        if not body:
            body.append("    pass")
        self.lines.extend([f"def {fname}(obj, out):", *body, ""])
        return fname

    def _encode_tagged(self, tagged: list[Field], version: int) -> list[str]:
        body = ["    tagged = list(obj.unknown_tagged_fields)"]
        for f in sorted(tagged, key=lambda f: f.tag or 0):
            default = _default_expr(f, self.namespace)
            body.append(f"    value = obj.{f.name}")
            body.append(f"    if value != {default}:")
            body.append("        tb = bytearray()")
            body.extend(self._encode_value(f, version, "value", "tb", "        "))
            body.append(f"        tagged.append(({f.tag}, bytes(tb)))")
        body.extend([
            "    if tagged:",
            "        tagged.sort(key=lambda item: item[0])",
            "        t.write_uvarint(out, len(tagged))",
            "        for tag, payload in tagged:",
            "            t.write_uvarint(out, tag)",
            "            t.write_uvarint(out, len(payload))",
            "            out += payload",
            "    else:",
            "        out.append(0)",
        ])
        return body

    def _encode_value(self, f: Field, version: int, expr: str, out: str, ind: str) -> list[str]:
        flexible = self._flexible(f, version)
        nullable = version in f.nullable
        elem = f.element_type
        if f.is_array:
            lines = [f"{ind}items = {expr}"]
            null_bytes = "b'\\x00'" if flexible else "b'\\xff\\xff\\xff\\xff'"
            lines.append(f"{ind}if items is None:")
            if nullable:
                lines.append(f"{ind}    {out} += {null_bytes}")
            else:
                lines.append(f"{ind}    raise ValueError('non-nullable array {f.name} is None')")
            lines.append(f"{ind}else:")
            if flexible:
                lines.append(f"{ind}    t.write_uvarint({out}, len(items) + 1)")
            else:
                lines.append(f"{ind}    {out} += _INT32.pack(len(items))")
            if elem in _FIXED_FORMATS:
                code = _FIXED_FORMATS[elem]
                lines.append(f"{ind}    {out} += _struct.pack('>%d{code}' % len(items), *items)")
                return lines
            if f.is_struct:
                assert f.fields is not None
                sub = self._struct_encoder(elem, f.fields, version)
                lines.append(f"{ind}    for item in items:")
                lines.append(f"{ind}        {sub}(item, {out})")
            else:
                writer = self._writer(elem, flexible, False)
                lines.append(f"{ind}    for item in items:")
                lines.append(f"{ind}        {writer}({out}, item)")
            return lines
        if f.is_struct:
            assert f.fields is not None
            sub = self._struct_encoder(elem, f.fields, version)
            return [f"{ind}{sub}({expr}, {out})"]
        if elem in _FIXED_FORMATS:
            key = self._const(struct.Struct(">" + _FIXED_FORMATS[elem]))
            return [f"{ind}{out} += {key}.pack({expr})"]
        return [f"{ind}{self._writer(elem, flexible, nullable)}({out}, {expr})"]

    def _const(self, value: Any) -> str:
        for key, existing in self.namespace.items():
            if key.startswith("_S") and existing == value:
                return key
        self.counter += 1
        key = f"_S{self.counter}"
        self.namespace[key] = value
        return key


__all__ = [
    "CLASS_IMPORTS",
    "Field",
    "Message",
    "MessageSpec",
    "Versions",
    "class_source",
    "compile_message",
    "data",
    "field",
    "request",
    "response",
]
