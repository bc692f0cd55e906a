"""The compiled APIs and the framing of requests and responses.

Every module in :mod:`kafkaclone.protocol.messages` that declares a ``REQUEST`` and a
``RESPONSE`` is an API, registered by its key at import; its messages are compiled on first
use. Adding an API is adding a declaration module, nothing else.

Header versions follow Kafka: a request whose version is flexible (KIP-482) carries request
header v2, otherwise v1 (ControlledShutdown v0 alone uses v0); a flexible response carries
response header v1, otherwise v0, except ApiVersions, whose response header is always v0 so
a client can read it before it knows what the broker speaks.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Final

from kafkaclone.common.errors import DecodeError, InvalidRequestError, UnsupportedVersionError
from kafkaclone.common.file_region import FileRegion
from kafkaclone.protocol import message_types
from kafkaclone.protocol import messages as _messages_pkg
from kafkaclone.protocol import types as t
from kafkaclone.protocol.api_keys import ApiKey
from kafkaclone.protocol.messages.headers import REQUEST_HEADER, RESPONSE_HEADER
from kafkaclone.protocol.schema import Message, MessageSpec, compile_message


class Api:
    """One declared API: its key and its request and response messages, compiled on first
    use (compiling every API's codecs at import cost a process about a second of CPU, and
    a client or a tool speaks a handful of them)."""

    __slots__ = ("_request", "_response", "key", "request_spec", "response_spec")

    def __init__(self, key: ApiKey, request_spec: MessageSpec,
                 response_spec: MessageSpec) -> None:
        self.key = key
        self.request_spec = request_spec
        self.response_spec = response_spec
        self._request: Message[Any] | None = None
        self._response: Message[Any] | None = None

    @property
    def request(self) -> Message[Any]:
        message = self._request
        if message is None:
            message = self._request = compile_message(self.request_spec)
        return message

    @property
    def response(self) -> Message[Any]:
        message = self._response
        if message is None:
            message = self._response = compile_message(self.response_spec)
        return message

    @property
    def name(self) -> str:
        return self.request_spec.name.removesuffix("Request")

    @property
    def min_version(self) -> int:
        return self.request_spec.valid.low

    @property
    def max_version(self) -> int:
        return self.request_spec.valid.high

    def request_header_version(self, version: int) -> int:
        if self.key == ApiKey.CONTROLLED_SHUTDOWN and version == 0:
            return 0
        return 2 if self.request.is_flexible(version) else 1

    def response_header_version(self, version: int) -> int:
        if self.key == ApiKey.API_VERSIONS:
            return 0
        return 1 if self.response.is_flexible(version) else 0


RequestHeader: Final[Message[message_types.RequestHeader]] = compile_message(REQUEST_HEADER)
ResponseHeader: Final[Message[message_types.ResponseHeader]] = compile_message(RESPONSE_HEADER)


class _Messages(Mapping[str, Message[Any]]):
    """Declared messages by name, each compiled when first looked up."""

    def __init__(self, specs: dict[str, MessageSpec]) -> None:
        self._specs = specs

    def __getitem__(self, name: str) -> Message[Any]:
        return compile_message(self._specs[name])

    def __iter__(self) -> Iterator[str]:
        return iter(self._specs)

    def __len__(self) -> int:
        return len(self._specs)


def _load_apis() -> tuple[dict[int, Api], dict[str, MessageSpec]]:
    apis: dict[int, Api] = {}
    specs: dict[str, MessageSpec] = {}
    for info in sorted(pkgutil.iter_modules(_messages_pkg.__path__), key=lambda i: i.name):
        module = importlib.import_module(f"{_messages_pkg.__name__}.{info.name}")
        for spec in vars(module).values():
            if isinstance(spec, MessageSpec) and spec.kind == "data" and spec.name not in (
                "RequestHeader", "ResponseHeader"
            ):
                specs[spec.name] = spec
        req_spec = getattr(module, "REQUEST", None)
        resp_spec = getattr(module, "RESPONSE", None)
        if req_spec is None or resp_spec is None:
            continue
        if req_spec.api_key != resp_spec.api_key or req_spec.valid != resp_spec.valid:
            raise ValueError(f"{info.name}: request and response disagree on key or versions")
        key = ApiKey(req_spec.api_key)
        if key in apis:
            raise ValueError(f"API {key.name} is declared twice")
        apis[key] = Api(key, req_spec, resp_spec)
        specs[req_spec.name] = req_spec
        specs[resp_spec.name] = resp_spec
    return dict(sorted(apis.items())), specs


_LOADED: Final = _load_apis()
APIS: Final[dict[int, Api]] = _LOADED[0]
"""Every declared API by key (its messages compiled on first use)."""
MESSAGES: Final[Mapping[str, Message[Any]]] = _Messages(_LOADED[1])
"""Every declared message (request, response and embedded data) by name, compiled when
first looked up."""


def api(key: int) -> Api:
    """The API with this key; InvalidRequestError if kafkaclone does not declare it."""
    try:
        return APIS[key]
    except KeyError:
        raise InvalidRequestError(f"unknown API key {key}") from None


@dataclass(frozen=True, slots=True)
class RequestFrame:
    """A decoded request: its header, its API and its body."""

    header: message_types.RequestHeader
    api: Api
    body: Any

    @property
    def api_version(self) -> int:
        return int(self.header.request_api_version)

    @property
    def correlation_id(self) -> int:
        return int(self.header.correlation_id)


def peek_request_header(frame: t.Buffer) -> tuple[int, int, int]:
    """(api_key, api_version, correlation_id) of a request, without decoding the rest."""
    if len(frame) < 8:
        raise DecodeError(f"request of {len(frame)} bytes is shorter than its header")
    key = int.from_bytes(frame[0:2], "big", signed=True)
    version = int.from_bytes(frame[2:4], "big", signed=True)
    correlation_id = int.from_bytes(frame[4:8], "big", signed=True)
    return key, version, correlation_id


def decode_request_header(frame: t.Buffer) -> tuple[message_types.RequestHeader, Api, int]:
    """Decode the header of a request frame (the bytes after the 4-byte length).

    Returns the header, the API and the position of the body. Raises InvalidRequestError for
    an unknown API key, UnsupportedVersionError (with the header decoded as far as possible,
    in ``exc.header``) for a version kafkaclone does not implement, DecodeError otherwise.
    """
    key, version, _ = peek_request_header(frame)
    target = api(key)
    if not target.min_version <= version <= target.max_version:
        header, _pos = RequestHeader.decode(frame, 1)
        exc = UnsupportedVersionError(
            f"{target.name} v{version} is not supported (supported: "
            f"{target.min_version}-{target.max_version})"
        )
        exc.header = header  # type: ignore[attr-defined]
        raise exc
    header, pos = RequestHeader.decode(frame, target.request_header_version(version))
    return header, target, pos


def decode_request(frame: t.Buffer) -> RequestFrame:
    """Decode a whole request frame; the body must use every byte of it."""
    view = memoryview(frame)
    header, target, pos = decode_request_header(view)
    version = int(header.request_api_version)
    body, end = target.request.decode(view, version, pos)
    if end != len(view):
        raise DecodeError(
            f"{len(view) - end} bytes left over after {target.request.name} v{version}"
        )
    return RequestFrame(header, target, body)


def encode_request(key: int, version: int, correlation_id: int, client_id: str | None,
                   body: Any) -> bytes:
    """A request frame without its 4-byte length prefix."""
    target = api(key)
    header = RequestHeader.cls(
        request_api_key=key, request_api_version=version,
        correlation_id=correlation_id, client_id=client_id,
    )
    out = bytearray()
    RequestHeader.encode_into(header, target.request_header_version(version), out)
    target.request.encode_into(body, version, out)
    return bytes(out)


def encode_request_parts(key: int, version: int, correlation_id: int,
                         client_id: str | None, body: Any) -> list[t.Buffer]:
    """A request frame without its 4-byte length prefix, as :func:`encode_request`, in
    parts to be written in order: the encoded bytes around each ``records`` value, and
    the values themselves as they were given (a Produce request's record batches are not
    copied)."""
    target = api(key)
    header = RequestHeader.cls(
        request_api_key=key, request_api_version=version,
        correlation_id=correlation_id, client_id=client_id,
    )
    out = t.BufferParts()
    RequestHeader.encode_into(header, target.request_header_version(version), out)
    target.request.encode_into(body, version, out)
    return out.finish()


@dataclass(frozen=True, slots=True)
class EncodedResponse:
    """A response body already encoded for one version, to be sent after the header as it
    is: a handler's answer kept and sent again while nothing it says has changed (Metadata's,
    per metadata version). Made by :func:`encode_response_body`."""

    version: int
    data: bytes


def encode_response_body(key: int, version: int, body: Any) -> EncodedResponse:
    """``body`` encoded once for ``version``, for :func:`encode_response` to send as is."""
    out = bytearray()
    api(key).response.encode_into(body, version, out)
    return EncodedResponse(version, bytes(out))


def encode_response(key: int, version: int, correlation_id: int, body: Any) -> bytes:
    """A response frame without its 4-byte length prefix; ``body`` a response or an
    :class:`EncodedResponse` of this version."""
    target = api(key)
    out = bytearray()
    ResponseHeader.encode_into(
        ResponseHeader.cls(correlation_id=correlation_id),
        target.response_header_version(version), out,
    )
    encode_response_body_into(target, version, body, out)
    return bytes(out)


def encode_response_body_into(target: Api, version: int, body: Any, out: bytearray) -> None:
    """``body``, a response or an :class:`EncodedResponse` of ``version`` (written as it
    is), encoded onto ``out``."""
    if type(body) is EncodedResponse:
        if body.version != version:
            raise ValueError(f"a {target.name} body encoded for v{body.version} sent as "
                             f"v{version}")
        out += body.data
    else:
        target.response.encode_into(body, version, out)


def encode_response_parts(key: int, version: int, correlation_id: int,
                          body: Any) -> bytes | list[bytes | FileRegion]:
    """A response frame without its 4-byte length prefix, as :func:`encode_response`; a
    response whose ``file_records`` fields hold file regions comes back as its parts, the
    encoded bytes around each region, to be written in order (their lengths add up to the
    frame's)."""
    target = api(key)
    out = t.FrameParts()
    ResponseHeader.encode_into(
        ResponseHeader.cls(correlation_id=correlation_id),
        target.response_header_version(version), out,
    )
    target.response.encode_into(body, version, out)
    if not out.parts:
        return bytes(out)
    return out.finish()


def decode_response(key: int, version: int, frame: t.Buffer) -> tuple[int, Any]:
    """Decode a response frame (after its length prefix): (correlation_id, body)."""
    target = api(key)
    view = memoryview(frame)
    header, pos = ResponseHeader.decode(view, target.response_header_version(version))
    body, end = target.response.decode(view, version, pos)
    if end != len(view):
        raise DecodeError(
            f"{len(view) - end} bytes left over after {target.response.name} v{version}"
        )
    return int(header.correlation_id), body
