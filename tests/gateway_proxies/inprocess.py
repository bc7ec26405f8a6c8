"""A gateway and its scripted upstream in this process (``httpx.ASGITransport``), for the
property witnesses: no sockets, so their code is measured and mutant re-runs are cheap."""

from __future__ import annotations

import httpx
from starlette.applications import Starlette

from fak_core.gateway import GatewayState, UpstreamConfig, proxy_routes

from .kernels import make_state
from .scripted_upstream import ScriptedUpstream


def in_process_gateway() -> tuple[ScriptedUpstream, GatewayState, Starlette]:
    """A fresh scripted upstream, the proxy tests' gateway state, and the proxy app."""
    upstream = ScriptedUpstream()
    state = make_state()
    transport = httpx.ASGITransport(app=upstream.app)
    app = Starlette(
        routes=proxy_routes(state, UpstreamConfig(base_url="http://up/v1", transport=transport))
    )
    return upstream, state, app
