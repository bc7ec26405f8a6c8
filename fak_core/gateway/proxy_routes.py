"""The model-API proxy routes: ``POST /v1/chat/completions`` and ``POST /v1/messages``.

:func:`proxy_routes` binds both to one :class:`GatewayState` (the decision seam) and one
upstream; with no upstream configured they run on the embedded scripted planner, through
the same code path.
"""

from __future__ import annotations

from starlette.routing import Route

from fak_core.gateway.anthropic_proxy import AnthropicProxy
from fak_core.gateway.openai_proxy import OpenAIProxy
from fak_core.gateway.planner import planner_upstream
from fak_core.gateway.state import GatewayState
from fak_core.gateway.upstream import Upstream, UpstreamConfig

__all__ = ["proxy_routes"]


def proxy_routes(state: GatewayState, upstream: UpstreamConfig | None) -> list[Route]:
    """The two proxy routes, forwarding to ``upstream`` (the scripted planner if None)."""
    up = Upstream(upstream if upstream is not None else planner_upstream())
    return [
        Route("/v1/chat/completions", OpenAIProxy(state, up).handle, methods=["POST"]),
        Route("/v1/messages", AnthropicProxy(state, up).handle, methods=["POST"]),
    ]
