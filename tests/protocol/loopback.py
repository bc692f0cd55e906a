"""A loopback Kafka lookalike that real clients can talk to, for tests.

:class:`LoopbackBroker` listens on 127.0.0.1; one thread accepts, one thread per connection
reads a request frame (the bytes after the 4-byte length), answers it and reads the next,
so responses leave in request order. Requests are decoded with kafkaclone's compiled
messages and handed to a responder per API, ``(decoded request) -> response body`` (None:
no response); the body is encoded the same way. :func:`api_versions_response` and
:func:`metadata_response` build the answers every client needs first.

Plain sockets and threads, no Twisted: ``with`` a broker, ``stop()`` closes every socket
and joins every thread even when the test fails. What goes wrong (an undecodable request,
one without a responder, a failing responder, a bad frame length) is kept in ``problems``.
"""

from __future__ import annotations

import contextlib
import logging
import socket
import struct
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from types import TracebackType
from typing import Any, Self

from kafkaclone.common.errors import KafkaError, UnsupportedVersionError
from kafkaclone.protocol.api import (
    APIS,
    RequestFrame,
    decode_request,
    encode_response,
    peek_request_header,
)
from kafkaclone.protocol.api_keys import ApiKey
from kafkaclone.protocol.schema import Message
from kafkaclone.protocol.types import ZERO_UUID

log = logging.getLogger(__name__)

Responder = Callable[[RequestFrame], Any]

BROKER_ID = 0
_MAX_FRAME = 16 * 1024 * 1024
_POLL = 0.05


# --- building responses from kafkaclone's compiled messages --------------------------------


def make(message: Message, **values: Any) -> Any:
    """An instance of a compiled message, nested dicts becoming its nested structs.

    A name the declaration does not have is an error, so a response never silently lacks
    a field because of a misspelling.
    """
    return _make(message.cls, message.spec.fields, values)


def _make(cls: type[Any], fields: Iterable[Any], values: dict[str, Any]) -> Any:
    by_name = {f.name: f for f in fields}
    kwargs = {}
    for name, value in values.items():
        f = by_name.get(name)
        if f is None:
            raise KeyError(f"{cls.__qualname__} has no field {name!r}")
        if f.is_struct and value is not None:
            sub = getattr(cls, f.element_type)
            if f.is_array:
                value = [_make(sub, f.fields, v) if isinstance(v, dict) else v for v in value]
            elif isinstance(value, dict):
                value = _make(sub, f.fields, value)
        kwargs[name] = value
    return cls(**kwargs)


def response(req: RequestFrame, **values: Any) -> Any:
    """The response body to ``req``, of the request's version."""
    return make(req.api.response, **values)


def api_versions_response(req: RequestFrame,
                          advertised: Mapping[int, tuple[int, int]] | None = None) -> Any:
    """ApiVersions' answer: ``advertised`` (API key -> (min, max) version), by default every
    API kafkaclone declares with its whole range."""
    if advertised is None:
        advertised = {key: (api.min_version, api.max_version) for key, api in APIS.items()}
    return response(req, error_code=0, throttle_time_ms=0, api_keys=[
        {"api_key": key, "min_version": low, "max_version": high}
        for key, (low, high) in sorted(advertised.items())
    ])


def requested_topics(req: RequestFrame) -> list[str] | None:
    """The topics a Metadata request names; None when it asks for every topic (a null
    array, or an empty one at v0)."""
    requested = req.body.topics
    if requested is None or (req.api_version == 0 and not requested):
        return None
    return [topic.name for topic in requested if topic.name is not None]


UNKNOWN_AUTHORIZED_OPERATIONS = -2147483648


def metadata_response(req: RequestFrame, host: str, port: int, partitions: Mapping[str, int],
                      cluster_id: str,
                      topic_id: Callable[[str], uuid.UUID] = lambda _: ZERO_UUID) -> Any:
    """Metadata's answer for a one-broker cluster (node :data:`BROKER_ID` at
    ``host:port``) that leads every partition: ``partitions`` is topic -> partition count."""
    return response(
        req,
        throttle_time_ms=0,
        brokers=[{"node_id": BROKER_ID, "host": host, "port": port, "rack": None}],
        cluster_id=cluster_id,
        controller_id=BROKER_ID,
        topics=[
            {"error_code": 0, "name": name, "topic_id": topic_id(name), "is_internal": False,
             "partitions": [_partition_metadata(i) for i in range(count)],
             "topic_authorized_operations": UNKNOWN_AUTHORIZED_OPERATIONS}
            for name, count in partitions.items()
        ],
        cluster_authorized_operations=UNKNOWN_AUTHORIZED_OPERATIONS,
    )


def _partition_metadata(index: int) -> dict[str, Any]:
    return {"error_code": 0, "partition_index": index, "leader_id": BROKER_ID,
            "leader_epoch": 0, "replica_nodes": [BROKER_ID], "isr_nodes": [BROKER_ID],
            "offline_replicas": []}


# --- request dispatch ----------------------------------------------------------------------


class Unanswerable(Exception):
    """A request the pretend broker closes the connection on."""


def api_label(key: int) -> str:
    try:
        return ApiKey(key).name
    except ValueError:
        return f"api {key}"


def respond(responders: Mapping[ApiKey, Responder], frame: bytes) -> bytes | None:
    """The response frame (without its length) to a request frame; None if there is none.

    Raises Unanswerable for a request a broker would close the connection on.
    """
    key, version, correlation_id = peek_request_header(frame)
    if key == ApiKey.API_VERSIONS and key in APIS and version > APIS[key].max_version:
        # KIP-511, as Kafka 2.8 does it: a v0 response with UNSUPPORTED_VERSION and the
        # ApiVersions range, so the client can retry with a version the broker knows.
        api = APIS[key]
        body = make(api.response, error_code=UnsupportedVersionError.code, api_keys=[
            {"api_key": key, "min_version": api.min_version, "max_version": api.max_version},
        ])
        return encode_response(key, 0, correlation_id, body)
    try:
        request = decode_request(frame)
    except KafkaError as exc:
        raise Unanswerable(f"cannot decode {api_label(key)} v{version}: {exc!r}") from exc
    responder = responders.get(ApiKey(key))
    if responder is None:
        raise Unanswerable(f"no responder for {api_label(key)} v{version}")
    try:
        body = responder(request)
    except Exception as exc:
        raise Unanswerable(
            f"responder for {api_label(key)} v{version} failed: {exc!r}") from exc
    if body is None:
        return None
    return encode_response(key, version, correlation_id, body)


# --- the listener --------------------------------------------------------------------------


class LoopbackBroker:
    """A listener on 127.0.0.1 answering with ``self.responders``; a subclass fills them in
    (and may override :meth:`handle` to see every frame)."""

    def __init__(self, name: str = "loopback") -> None:
        self.name = name
        self.label = f"{name} broker"  # for the log
        self.responders: dict[ApiKey, Responder] = {}
        self.problems: list[str] = []
        self.stopping = threading.Event()
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        self._conns: list[socket.socket] = []
        self._server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._server.bind(("127.0.0.1", 0))
        self._server.listen(16)
        self._server.settimeout(_POLL)
        self.host: str
        self.port: int
        self.host, self.port = self._server.getsockname()[:2]

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    def handle(self, frame: bytes) -> bytes | None:
        """The response frame to a request frame (None: no response)."""
        return respond(self.responders, frame)

    def start(self) -> Self:
        self._spawn(self._accept_loop, f"{self.name}-accept")
        return self

    def stop(self) -> None:
        self.stopping.set()
        with self._lock:
            conns = list(self._conns)
        for conn in conns:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
        deadline = time.monotonic() + 5
        while True:
            with self._lock:
                threads = [th for th in self._threads if th.is_alive()]
            if not threads or time.monotonic() > deadline:
                break
            threads[0].join(max(0.0, deadline - time.monotonic()))
        self._server.close()
        with self._lock:
            for conn in self._conns:
                conn.close()
            self._conns.clear()
            alive = [th.name for th in self._threads if th.is_alive()]
        if alive:
            raise RuntimeError(f"{self.name} broker threads did not stop: {alive}")

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    def _spawn(self, target: Callable[..., None], name: str, *args: Any) -> None:
        thread = threading.Thread(target=target, args=args, name=name, daemon=True)
        with self._lock:
            self._threads.append(thread)
        thread.start()

    def _accept_loop(self) -> None:
        while not self.stopping.is_set():
            try:
                conn, _addr = self._server.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            conn.settimeout(_POLL)
            with self._lock:
                if self.stopping.is_set():
                    conn.close()
                    return
                self._conns.append(conn)
                name = f"{self.name}-conn-{len(self._conns)}"
            self._spawn(self._serve, name, conn)

    def _recv_exact(self, conn: socket.socket, size: int) -> bytes | None:
        chunks = bytearray()
        while len(chunks) < size:
            if self.stopping.is_set():
                return None
            try:
                chunk = conn.recv(min(size - len(chunks), 1 << 20))
            except TimeoutError:
                continue
            except OSError:
                return None
            if not chunk:
                return None
            chunks += chunk
        return bytes(chunks)

    def _serve(self, conn: socket.socket) -> None:
        try:
            while not self.stopping.is_set():
                prefix = self._recv_exact(conn, 4)
                if prefix is None:
                    return
                (size,) = struct.unpack(">i", prefix)
                if not 0 <= size <= _MAX_FRAME:
                    self._problem(f"frame length {size}")
                    return
                frame = self._recv_exact(conn, size)
                if frame is None:
                    return
                try:
                    response_frame = self.handle(frame)
                except Unanswerable as exc:
                    self._problem(str(exc))
                    return
                if response_frame is None:
                    continue
                conn.settimeout(5)
                conn.sendall(struct.pack(">i", len(response_frame)) + response_frame)
                conn.settimeout(_POLL)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client hung up, as clients do when they close
        except OSError as exc:
            if not self.stopping.is_set():
                self._problem(f"connection error: {exc}")
        except Exception as exc:  # a bug in the broker: kept for the test to report
            self._problem(f"{type(exc).__name__}: {exc}")
        finally:
            conn.close()

    def _problem(self, text: str) -> None:
        log.warning("%s: %s", self.label, text)
        with self._lock:
            self.problems.append(text)
