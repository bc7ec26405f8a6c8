"""Fixtures for the replica tests: one redis-server per test session (per xdist worker)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from .support import RedisServer


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    """A real redis-server of our own on a free loopback port (never the system service).
    Tests that share it use trace ids of their own; a test that stops Redis starts its own."""
    server = RedisServer(Path(tmp_path_factory.mktemp("redis")))
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def own_redis(tmp_path: Path) -> Iterator[RedisServer]:
    """A redis-server for one test (one it may stop, kill or restart)."""
    server = RedisServer(tmp_path / "redis-data")
    try:
        yield server
    finally:
        server.stop()
