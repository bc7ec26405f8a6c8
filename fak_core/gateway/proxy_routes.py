"""The model-API proxy routes: ``POST /v1/chat/completions`` and ``POST /v1/messages``.

:func:`proxy_routes` binds both to one :class:`GatewayState` (the decision seam) and one
upstream; with no upstream configured they run on the embedded scripted planner, through
the same code path. The upstream keeps a pooled ``httpx`` client: an app that mounts the
routes closes it on shutdown with :func:`close_proxy_routes` (or uses
:func:`proxy_lifespan`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

from starlette.routing import BaseRoute, Route

from fak_core.gateway.anthropic_proxy import AnthropicProxy
from fak_core.gateway.openai_proxy import OpenAIProxy
from fak_core.gateway.planner import planner_upstream
from fak_core.gateway.state import GatewayState
from fak_core.gateway.upstream import Upstream, UpstreamConfig

__all__ = ["close_proxy_routes", "proxy_lifespan", "proxy_routes"]


def proxy_routes(state: GatewayState, upstream: UpstreamConfig | None) -> list[Route]:
    """The two proxy routes, forwarding to ``upstream`` (the scripted planner if None)."""
    up = Upstream(upstream if upstream is not None else planner_upstream())
    return [
        Route("/v1/chat/completions", OpenAIProxy(state, up).handle, methods=["POST"]),
        Route("/v1/messages", AnthropicProxy(state, up).handle, methods=["POST"]),
    ]


def _upstreams(routes: Sequence[BaseRoute]) -> list[Upstream]:
    found: list[Upstream] = []
    for r in routes:
        owner = getattr(getattr(r, "endpoint", None), "__self__", None)
        up = getattr(owner, "upstream", None)
        if isinstance(up, Upstream) and all(up is not f for f in found):
            found.append(up)
    return found


async def close_proxy_routes(routes: Sequence[BaseRoute]) -> None:
    """Close the upstream clients of the proxy routes among ``routes`` (this event loop's)."""
    for up in _upstreams(routes):
        await up.aclose()


def proxy_lifespan(
    routes: Sequence[BaseRoute],
) -> Callable[[Any], AbstractAsyncContextManager[None]]:
    """A Starlette ``lifespan`` that closes the proxy routes' upstream clients on shutdown."""

    @asynccontextmanager
    async def lifespan(app: Any) -> AsyncIterator[None]:
        try:
            yield
        finally:
            await close_proxy_routes(routes)

    return lifespan
