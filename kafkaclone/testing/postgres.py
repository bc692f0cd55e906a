"""A real PostgreSQL server for tests, from Debian's ``postgresql`` package.

``PostgresServer`` runs ``initdb`` into a temporary directory and starts ``postgres`` on a
free 127.0.0.1 port (trust authentication, user ``postgres``, fsync off), waits until it
accepts connections, and on exit stops it by its PID (SIGINT: PostgreSQL's fast shutdown)
and removes the directory::

    with PostgresServer() as pg:
        url = pg.jdbc_url("postgres")   # jdbc:postgresql://127.0.0.1:<port>/postgres?user=postgres
        pg.create_database("target")

PostgreSQL refuses to run as root: as root, the server runs as ``nobody`` (the data
directory is given to it), started directly with ``subprocess``'s ``user=`` so the PID
the launcher holds is the postmaster's own.
"""

from __future__ import annotations

import glob
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from types import TracebackType
from typing import Final

from kafkaclone.testing.zookeeper import free_port

RUN_AS_WHEN_ROOT: Final = "nobody"
SUPERUSER: Final = "postgres"


class PostgresStartError(RuntimeError):
    """initdb failed, or postgres exited or did not accept connections in time."""


def find_bin_dir() -> Path:
    """The newest ``/usr/lib/postgresql/<version>/bin`` (``POSTGRES_BIN_DIR`` wins)."""
    configured = os.environ.get("POSTGRES_BIN_DIR")
    if configured:
        return Path(configured)
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/postgres"),
                   key=lambda p: int(Path(p).parent.parent.name)
                   if Path(p).parent.parent.name.isdigit() else 0)
    if not found:
        raise PostgresStartError("PostgreSQL is not installed (Debian package postgresql; "
                                 "scripts/test.sh installs it)")
    return Path(found[-1]).parent


class PostgresServer:
    def __init__(self, start_timeout: float = 120.0) -> None:
        self.bin_dir = find_bin_dir()
        self.port = free_port()
        self.start_timeout = start_timeout
        self.root = Path(tempfile.mkdtemp(prefix="kafkaclone-pg-"))
        self.data_dir = self.root / "data"
        self.log_path = self.root / "postgres.log"
        self.process: subprocess.Popen[bytes] | None = None
        self.user = RUN_AS_WHEN_ROOT if os.geteuid() == 0 else None

    @property
    def host(self) -> str:
        return "127.0.0.1"

    def jdbc_url(self, database: str = SUPERUSER) -> str:
        return f"jdbc:postgresql://{self.host}:{self.port}/{database}?user={SUPERUSER}"

    def start(self) -> PostgresServer:
        if self.user is not None:
            shutil.chown(self.root, self.user)
        try:
            subprocess.run(
                [str(self.bin_dir / "initdb"), "-D", str(self.data_dir), "-U", SUPERUSER,
                 "-A", "trust", "-E", "UTF8", "--no-sync", "--locale=C.UTF-8"],
                check=True, capture_output=True, timeout=self.start_timeout, cwd=self.root,
                user=self.user)
        except subprocess.CalledProcessError as exc:
            raise PostgresStartError(f"initdb failed: {exc.stderr.decode(errors='replace')}"
                                     ) from exc
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(
                [str(self.bin_dir / "postgres"), "-D", str(self.data_dir), "-p",
                 str(self.port), "-h", self.host, "-k", str(self.root), "-c", "fsync=off",
                 "-c", "synchronous_commit=off", "-c", "full_page_writes=off"],
                stdout=log, stderr=log, cwd=self.root, user=self.user)
        self._wait_ready()
        return self

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + self.start_timeout
        assert self.process is not None
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise PostgresStartError(f"postgres exited: {self.log_tail()}")
            try:
                self.execute(SUPERUSER, "SELECT 1")
                return
            except Exception:  # not up yet: "the database system is starting up"
                time.sleep(0.2)
        self.stop()
        raise PostgresStartError(f"postgres did not start in {self.start_timeout}s: "
                                 f"{self.log_tail()}")

    def log_tail(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-3000:]
        except OSError:
            return ""

    def execute(self, database: str, sql: str, params: tuple[object, ...] = ()
                ) -> list[tuple[object, ...]]:
        """Run one statement (autocommit) and return its rows (empty for DDL / DML)."""
        import psycopg

        with socket.create_connection((self.host, self.port), timeout=2):
            pass  # fail fast with OSError while the port is closed
        with psycopg.connect(host=self.host, port=self.port, dbname=database,
                             user=SUPERUSER, autocommit=True, connect_timeout=5) as conn:
            cursor = conn.execute(sql.encode(), params)
            return list(cursor.fetchall()) if cursor.description else []

    def create_database(self, name: str) -> None:
        self.execute(SUPERUSER, f'CREATE DATABASE "{name}"')

    def stop(self) -> None:
        if self.process is not None:
            if self.process.poll() is None:
                self.process.send_signal(signal.SIGINT)  # fast shutdown
                try:
                    self.process.wait(30)
                except subprocess.TimeoutExpired:
                    self.process.kill()
                    self.process.wait(10)
            self.process = None
        shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> PostgresServer:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()
