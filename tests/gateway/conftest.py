"""Fixtures for the gateway tests."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest
from starlette.applications import Starlette

from fak_core.gateway.state import GatewayState
from pytest_fak.fixtures import serve_app
from tests.gateway.support import POLICY_DOC, make_kernel


@pytest.fixture
def state() -> GatewayState:
    return GatewayState(make_kernel())


@pytest.fixture
def policy_file(tmp_path: Path) -> Path:
    path = tmp_path / "policy.json"
    path.write_text(json.dumps(POLICY_DOC), encoding="utf-8")
    return path


@pytest.fixture
def live_server() -> Iterator[Callable[[Starlette], str]]:
    """Start apps on real sockets (each call yields a base URL); all stop when the test ends."""
    with ExitStack() as stack:
        yield lambda app: stack.enter_context(serve_app(app))
