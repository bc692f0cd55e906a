"""A real PostgreSQL for the JDBC connector tests: one server per module (initdb into a
temporary directory, postgres on a free 127.0.0.1 port, stopped by its PID at the end).
Per module, not per session: its stop and clean-up then count against the generous
timeout of a JDBC test, not against whichever test happens to run last."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from kafkaclone.testing.postgres import PostgresServer


@pytest.fixture(scope="module")
def postgres() -> Iterator[PostgresServer]:
    with PostgresServer() as server:
        yield server
