"""A real PostgreSQL for the JDBC connector tests: one server for the session (initdb into
a temporary directory, postgres on a free 127.0.0.1 port, stopped by its PID at the end)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from kafkaclone.testing.postgres import PostgresServer


@pytest.fixture(scope="session")
def postgres() -> Iterator[PostgresServer]:
    with PostgresServer() as server:
        yield server
