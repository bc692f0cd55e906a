"""A real Apache ZooKeeper server for tests, started from an installed distribution.

``ZooKeeperServer`` runs ZooKeeper's own ``ZooKeeperServerMain`` on the JRE (Debian's
``zookeeper`` package, or a tarball pointed at by ``ZOOKEEPER_HOME``), standalone, on a free
127.0.0.1 port with a temporary data directory, and waits until it serves requests::

    with ZooKeeperServer() as zk:
        client = KazooClient(hosts=zk.connect_string)
        ...

It is test support in the spirit of ``kazoo.testing``: usable from anyone's tests, it kills
only the process it started and always waits for it. ``restart()`` keeps the port and the
data, so sessions and persistent znodes survive it as they would a real server restart.

``expire_session`` forces a client's session to expire the classic way: a second client
attaches to the same session (same id and password) and closes it.
"""

from __future__ import annotations

import logging
import os
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType
from typing import IO, Any

from kafkaclone.tools.zookeeper_install import (
    DEFAULT_JVM_FLAGS,
    MAIN_CLASS,
    find_classpath,
    find_java,
)

logger = logging.getLogger(__name__)


class ZooKeeperStartError(RuntimeError):
    """The ZooKeeper process exited or did not serve requests in time."""


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port nobody listens on right now (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        port: int = sock.getsockname()[1]
        return port


def four_letter_word(host: str, port: int, command: str, timeout: float = 2.0) -> str:
    """Send a four-letter-word command (``ruok``, ``srvr``, ``mntr`` ...) and return the
    answer. The server must whitelist it (``4lw.commands.whitelist``)."""
    with socket.create_connection((host, port), timeout=timeout) as sock:
        sock.sendall(command.encode("ascii"))
        chunks = []
        while True:
            chunk = sock.recv(4096)
            if not chunk:
                break
            chunks.append(chunk)
    return b"".join(chunks).decode("utf-8", errors="replace")


class ZooKeeperServer:
    """One standalone ZooKeeper server process.

    ``tick_time_ms`` is ZooKeeper's tick: the minimum session timeout is two ticks, so the
    default (200 ms) lets tests expire sessions quickly; ``max_session_timeout_ms`` stays
    generous so a broker's default ``zookeeper.session.timeout.ms`` is honoured.
    """

    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        port: int | None = None,
        data_dir: str | os.PathLike[str] | None = None,
        tick_time_ms: int = 200,
        max_session_timeout_ms: int = 60_000,
        startup_timeout: float = 30.0,
        java: str | None = None,
        classpath: str | None = None,
        jvm_flags: Sequence[str] = DEFAULT_JVM_FLAGS,
        extra_config: dict[str, str] | None = None,
    ) -> None:
        self.host = host
        self._requested_port = port
        self.port = port if port is not None else 0
        self._given_data_dir = Path(data_dir) if data_dir is not None else None
        self._temp_dir: tempfile.TemporaryDirectory[str] | None = None
        self.base_dir: Path | None = None
        self.tick_time_ms = tick_time_ms
        self.max_session_timeout_ms = max_session_timeout_ms
        self.startup_timeout = startup_timeout
        self._java = java
        self._classpath = classpath
        self.jvm_flags = tuple(jvm_flags)
        self.extra_config = dict(extra_config or {})
        self._process: subprocess.Popen[bytes] | None = None
        self._log_file: IO[bytes] | None = None
        self._lock = threading.Lock()

    # -- properties ---------------------------------------------------------------------

    @property
    def connect_string(self) -> str:
        """``host:port``, what ``zookeeper.connect`` and kazoo's ``hosts`` take."""
        if not self.port:
            raise RuntimeError("ZooKeeperServer is not started")
        return f"{self.host}:{self.port}"

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    @property
    def data_dir(self) -> Path:
        if self._given_data_dir is not None:
            return self._given_data_dir
        return self._base() / "data"

    @property
    def config_path(self) -> Path:
        return self._base() / "zoo.cfg"

    @property
    def log_path(self) -> Path:
        """The server's stdout and stderr (ZooKeeper's log, with an SLF4J binding)."""
        return self._base() / "zookeeper.log"

    def log_tail(self, lines: int = 40) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    # -- lifecycle ----------------------------------------------------------------------

    def start(self) -> ZooKeeperServer:
        """Start the server and wait until it serves requests. Returns self."""
        with self._lock:
            if self.running:
                return self
            if not self.port:
                self.port = free_port(self.host)
            self.data_dir.mkdir(parents=True, exist_ok=True)
            self._write_config()
            self._spawn()
        try:
            self._wait_until_serving()
        except BaseException:
            self.stop()
            raise
        logger.info("ZooKeeper pid %s serving on %s", self.pid, self.connect_string)
        return self

    def stop(self, timeout: float = 15.0) -> None:
        """Stop the process this object started (SIGTERM, then SIGKILL after ``timeout``)
        and wait for it. The data directory is kept until ``close()``."""
        with self._lock:
            process, self._process = self._process, None
            log_file, self._log_file = self._log_file, None
            try:
                if process is not None:
                    _terminate(process, timeout)
            finally:
                if log_file is not None:
                    log_file.close()

    def restart(self) -> None:
        """Stop, then start again on the same port with the same data.

        Beware: ZooKeeper 3.8.0 (Debian bookworm's) mishandles a client that connects while
        it is starting up (a NullPointerException leaves the connection open and silent),
        so a client reconnecting across a restart may wait its whole connect timeout (the
        session timeout divided by the number of hosts) before it retries. To cut a
        client's connection quickly, put a proxy between it and the server instead."""
        self.stop()
        self.start()

    def close(self) -> None:
        """Stop the server and remove the temporary directory it created."""
        self.stop()
        if self._temp_dir is not None:
            self._temp_dir.cleanup()
            self._temp_dir = None
            self.base_dir = None

    def __enter__(self) -> ZooKeeperServer:
        try:
            return self.start()
        except BaseException:
            self.close()
            raise

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # -- internals ----------------------------------------------------------------------

    def _base(self) -> Path:
        if self.base_dir is None:
            self._temp_dir = tempfile.TemporaryDirectory(prefix="kafkaclone-zk-")
            self.base_dir = Path(self._temp_dir.name)
        return self.base_dir

    def _write_config(self) -> None:
        config: dict[str, Any] = {
            "tickTime": self.tick_time_ms,
            "dataDir": self.data_dir,
            "clientPort": self.port,
            "clientPortAddress": self.host,
            "maxClientCnxns": 0,
            "maxSessionTimeout": self.max_session_timeout_ms,
            "admin.enableServer": "false",
            "4lw.commands.whitelist": "*",
            "autopurge.purgeInterval": 0,
        }
        config.update(self.extra_config)
        self.config_path.write_text("".join(f"{key}={value}\n" for key, value in config.items()))

    def _spawn(self) -> None:
        java = self._java or find_java()
        classpath = self._classpath or find_classpath()
        command = [
            java,
            *self.jvm_flags,
            f"-Dzookeeper.log.dir={self._base()}",
            "-cp",
            classpath,
            MAIN_CLASS,
            str(self.config_path),
        ]
        log_file = open(self.log_path, "ab")  # closed in stop()
        try:
            self._process = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=log_file,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # a ^C in the test runner reaches us, not the JVM
            )
        except BaseException:
            log_file.close()
            raise
        self._log_file = log_file

    def _wait_until_serving(self) -> None:
        deadline = time.monotonic() + self.startup_timeout
        while True:
            process = self._process
            if process is None or process.poll() is not None:
                code = None if process is None else process.returncode
                raise ZooKeeperStartError(
                    f"ZooKeeper exited with {code} during startup; log tail:\n{self.log_tail()}"
                )
            try:
                if four_letter_word(self.host, self.port, "srvr").startswith("Zookeeper version"):
                    return
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise ZooKeeperStartError(
                    f"ZooKeeper did not serve on {self.connect_string} within "
                    f"{self.startup_timeout}s; log tail:\n{self.log_tail()}"
                )
            time.sleep(0.05)


def _terminate(process: subprocess.Popen[bytes], timeout: float) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout)
            return
        except subprocess.TimeoutExpired:
            logger.warning("ZooKeeper pid %s ignored SIGTERM, killing it", process.pid)
            process.kill()
    process.wait()


def expire_session(client: Any, timeout: float = 10.0) -> None:
    """Expire the session of a started ``kazoo.client.KazooClient``.

    A second client attaches to the same session (id and password) and closes it, so the
    server expires the session at once; the original client then sees ``KazooState.LOST``
    when it reconnects, and kazoo opens a new session. Blocks until the session is closed
    (use it from test code, never from a reactor thread).
    """
    from kazoo.client import KazooClient

    client_id = client.client_id
    if client_id is None:
        raise RuntimeError("the client has no session to expire")
    hosts = ",".join(f"{host}:{port}" for host, port in client.hosts)
    intruder = KazooClient(hosts=hosts, client_id=client_id, timeout=timeout)
    try:
        intruder.start(timeout=timeout)
    finally:
        intruder.stop()
        intruder.close()
