"""Fixtures for the gateway tests."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from starlette.applications import Starlette

from fak_core.gateway.state import GatewayState
from tests.gateway.support import POLICY_DOC, LiveServer, make_kernel


@pytest.fixture
def state() -> GatewayState:
    return GatewayState(make_kernel())


@pytest.fixture
def policy_file(tmp_path: Path) -> Path:
    path = tmp_path / "policy.json"
    path.write_text(json.dumps(POLICY_DOC), encoding="utf-8")
    return path


@pytest.fixture
def live_server() -> Iterator[Callable[[Starlette], LiveServer]]:
    """Start apps on real sockets; every one is stopped when the test ends."""
    started: list[LiveServer] = []

    def start(app: Starlette) -> LiveServer:
        server = LiveServer(app).__enter__()
        started.append(server)
        return server

    yield start
    for server in started:
        server.__exit__(None, None, None)
