"""A gateway and its scripted upstream in this process (``httpx.ASGITransport``), for the
property witnesses: no sockets, so their code is measured and mutant re-runs are cheap."""

from __future__ import annotations

import uuid
from typing import Any

import httpx
from starlette.applications import Starlette

from fak_core.gateway import GatewayState, UpstreamConfig, proxy_routes

from .clients import SESSION
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


def fresh_trace(prefix: str) -> str:
    """A trace of its own for one turn: a turn of a module's shared gateway never reads
    the taint an earlier turn left (a mutant re-run that tainted a fixed trace would fail
    every later run of the witness, the unmutated control included)."""
    return f"{prefix}-{uuid.uuid4().hex[:16]}"


#: the route of a turn on each wire
TURN_PATHS = {"openai": "/v1/chat/completions", "anthropic": "/v1/messages"}


async def post_turn(
    app: Starlette, wire: str, doc: dict[str, Any], trace: str | None = None
) -> httpx.Response:
    """POST the turn ``doc`` to ``wire``'s route of ``app`` in process (``max_tokens``, which
    Anthropic requires, added when the document has none), as trace ``trace`` if given,
    with the test run's session token (:data:`~.clients.SESSION`), as a real client's."""
    if wire == "anthropic":
        doc = {"max_tokens": 8, **doc}
    headers = {"x-fak-session": SESSION}
    if trace is not None:
        headers["x-trace-id"] = trace
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://gw") as c:
        return await c.post(TURN_PATHS[wire], json=doc, headers=headers)
