"""Fixtures: a scripted upstream and a gateway, both on real loopback sockets."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from typing import Any

import pytest
from starlette.applications import Starlette

from fak_core.gateway import GatewayState, UpstreamConfig, proxy_lifespan, proxy_routes
from pytest_fak.fixtures import serve_app

from .clients import close_all
from .kernels import make_state
from .scripted_upstream import ScriptedUpstream


@dataclass
class Gateway:
    url: str
    state: GatewayState


def gateway_app(state: GatewayState, cfg: UpstreamConfig | None) -> Starlette:
    """The proxy routes in a bare Starlette app that closes its upstream client on exit."""
    routes = proxy_routes(state, cfg)
    return Starlette(routes=routes, lifespan=proxy_lifespan(routes))


@pytest.fixture(scope="session")
def _upstream_server() -> Iterator[tuple[ScriptedUpstream, str]]:
    up = ScriptedUpstream()
    with serve_app(up.app) as url:
        yield up, url


@pytest.fixture
def upstream(_upstream_server: tuple[ScriptedUpstream, str]) -> ScriptedUpstream:
    up, _ = _upstream_server
    up.reset()
    return up


@pytest.fixture
def upstream_url(_upstream_server: tuple[ScriptedUpstream, str]) -> str:
    return _upstream_server[1]


@pytest.fixture(scope="session")
def _default_gateway(_upstream_server: tuple[ScriptedUpstream, str]) -> Iterator[Gateway]:
    state = make_state()
    cfg = UpstreamConfig(base_url=_upstream_server[1] + "/v1", timeout=5.0)
    with serve_app(gateway_app(state, cfg)) as url:
        yield Gateway(url, state)


@pytest.fixture
def gateway(_default_gateway: Gateway, upstream: ScriptedUpstream) -> Gateway:
    """The shared gateway in front of the (freshly reset) scripted upstream."""
    return _default_gateway


@pytest.fixture
def make_gateway(upstream_url: str) -> Iterator[Callable[..., Gateway]]:
    """Start a gateway with its own upstream settings (stopped at test end)."""
    with ExitStack() as stack:

        def make(**kw: Any) -> Gateway:
            state = kw.pop("state", None) or make_state()
            base = kw.pop("base_url", upstream_url + "/v1")
            cfg = UpstreamConfig(base_url=base, **{"timeout": 5.0, **kw})
            url = stack.enter_context(serve_app(gateway_app(state, cfg)))
            return Gateway(url, state)

        yield make


@pytest.fixture(autouse=True)
def _close_sdk_clients() -> Iterator[None]:
    yield
    close_all()
