"""The gateway's ASGI application: routes, middleware, error envelopes and the MCP mount.

:func:`create_app` assembles the fak-native API, ``/openapi.json``, MCP over streamable
HTTP at ``/mcp``, and whatever ``extra_routes`` the caller adds (the OpenAI and Anthropic
proxies), all behind one middleware stack: trace ids, auth, body cap. Every error a client
can see is the one envelope from :mod:`fak_core.gateway.errors`.
"""

from __future__ import annotations

import contextlib
import importlib
from collections.abc import AsyncIterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import anyio.to_thread
from mcp.server import Server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route
from starlette.types import Message, Receive, Scope, Send

from fak_core.gateway.errors import error_response
from fak_core.gateway.mcp_server import build_mcp_server, depth_error
from fak_core.gateway.middleware import (
    AuthMiddleware,
    BodyLimitMiddleware,
    HostOriginMiddleware,
    JournalScopeMiddleware,
    TraceMiddleware,
    allowed_hosts_for,
)
from fak_core.gateway.native import PolicySource, json_response, native_routes
from fak_core.gateway.openapi import build_openapi
from fak_core.gateway.state import GatewayState
from fak_core.jsondepth import dumps

__all__ = ["McpHttpEndpoint", "create_app"]


class McpHttpEndpoint:
    """ASGI endpoint for ``/mcp``: a fresh SDK session manager per app lifespan.

    The SDK's manager can run once; making it per lifespan lets one app be started,
    stopped and started again (tests, reloaders). Outside a running lifespan it answers 503.
    """

    def __init__(self, server: Server[Any], *, max_body: int) -> None:
        self.server = server
        self.max_body = max_body
        # Host, Origin and Content-Type are checked for every route, /mcp included, by
        # HostOriginMiddleware (one implementation); the SDK's own check is left off.
        self.security = TransportSecuritySettings(enable_dns_rebinding_protection=False)
        self.manager: StreamableHTTPSessionManager | None = None

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        manager = StreamableHTTPSessionManager(
            app=self.server,
            security_settings=self.security,
            max_request_body_size=self.max_body,
        )
        async with manager.run():
            self.manager = manager
            try:
                yield
            finally:
                self.manager = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        manager = self.manager
        if manager is None:
            response = error_response(
                503, "the MCP transport is not running: serve the app with its lifespan on"
            )
            await response(scope, receive, send)
            return
        if scope.get("method") == "POST":
            checked = await self._checked_body(scope, receive, send)
            if checked is None:
                return
            receive = checked
        await manager.handle_request(scope, receive, send)

    async def _checked_body(self, scope: Scope, receive: Receive, send: Send) -> Receive | None:
        """Read a POST body (at most ``max_body`` bytes) and refuse a JSON-RPC message
        nested deeper than the gateway reads (400, -32600) before the SDK parses it; else
        a ``receive`` that replays the body. Bodies that are not JSON are left to the SDK."""
        chunks: list[bytes] = []
        size = 0
        more = True
        while more:
            message = await receive()
            if message["type"] != "http.request":
                return None  # the client went away
            chunk = message.get("body", b"")
            size += len(chunk)
            chunks.append(chunk)
            more = bool(message.get("more_body", False))
            if size > self.max_body:
                break  # over the limit: the SDK refuses it from what it is replayed
        body = b"".join(chunks)
        if not more:
            error = depth_error(body)
            if error is not None:
                # exclude_unset, as the SDK writes its own: an unknown id stays, as null
                payload = error.model_dump(by_alias=True, exclude_unset=True)
                await Response(dumps(payload), 400, media_type="application/json")(
                    scope, receive, send
                )
                return None
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": more}
            return await receive()

        return replay


async def _close_extra_routes(routes: Sequence[BaseRoute]) -> None:
    """Close the proxies' pooled upstream clients on shutdown, when the proxies are installed."""
    if not routes:
        return
    try:
        proxies = importlib.import_module("fak_core.gateway.proxy_routes")
    except ModuleNotFoundError as exc:
        if exc.name != "fak_core.gateway.proxy_routes":
            raise
        return
    close = getattr(proxies, "close_proxy_routes", None)
    if close is not None:
        await close(routes)


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    status = exc.status_code
    if status == 404:
        message = f"no route {request.url.path}: see GET /openapi.json for the routes"
    elif status == 405:
        allowed = (exc.headers or {}).get("Allow", "")
        message = f"method {request.method} not allowed on {request.url.path}: use {allowed}"
    else:
        message = str(exc.detail)
    return error_response(status, message, headers=dict(exc.headers or {}))


def create_app(
    state: GatewayState,
    *,
    extra_routes: Sequence[BaseRoute] = (),
    api_key: str | None = None,
    policy_path: str | Path | None = None,
    models: Sequence[str] = ("fak",),
    health: Mapping[str, Any] | None = None,
    mcp: bool = True,
    host: str = "127.0.0.1",
    openapi_extra: Mapping[str, Any] | None = None,
    allowed_hosts: Sequence[str] = (),
    operator_key: str | None = None,
) -> Starlette:
    """Build the gateway app over ``state``.

    ``extra_routes`` are served behind the same middleware (the proxies); ``api_key``
    requires a bearer key on every path but ``/healthz``; ``policy_path`` enables
    ``/v1/fak/policy/reload``; ``health`` adds fields to ``/healthz``; ``host`` is where
    the app will listen: bound to loopback, every route answers only for the loopback
    names unless ``allowed_hosts`` names others (:class:`HostOriginMiddleware`);
    ``openapi_extra`` may hold ``paths`` and ``schemas`` to merge into ``/openapi.json``;
    ``operator_key`` may read and reset any session. A journal on ``state`` is closed when
    the app shuts down.
    """
    if operator_key is not None:
        state.sessions.set_operator_key(operator_key)
    routes: list[BaseRoute] = list(
        native_routes(state, policy_source=PolicySource(policy_path), models=models, health=health)
    )
    routes.extend(extra_routes)
    document = build_openapi(
        extra_paths=(openapi_extra or {}).get("paths"),
        extra_schemas=(openapi_extra or {}).get("schemas"),
        mcp=mcp,
    )

    async def openapi(request: Request) -> Response:
        return json_response(document)

    routes.append(Route("/openapi.json", openapi, methods=["GET"]))

    endpoint: McpHttpEndpoint | None = None
    if mcp:
        endpoint = McpHttpEndpoint(build_mcp_server(state), max_body=state.max_body)
        routes.append(Route("/mcp", endpoint))

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        try:
            if endpoint is None:
                yield
            else:
                async with endpoint.running():
                    yield
        finally:
            await _close_extra_routes(extra_routes)
            if state.journal is not None:  # the requests are drained: commit what is queued
                await anyio.to_thread.run_sync(state.journal.close)

    middleware = [
        Middleware(TraceMiddleware, mint=state.trace_for),
        Middleware(HostOriginMiddleware, allowed=allowed_hosts_for(host, allowed_hosts)),
    ]
    if api_key is not None:
        if not api_key:
            raise ValueError("api_key is empty: pass None to serve without auth")
        middleware.append(Middleware(AuthMiddleware, api_key=api_key))
    middleware.append(Middleware(BodyLimitMiddleware, limit=lambda: state.max_body))
    middleware.append(Middleware(JournalScopeMiddleware))  # also for a journal attached later

    app = Starlette(
        routes=routes,
        middleware=middleware,
        exception_handlers={HTTPException: _http_error},
        lifespan=lifespan,
    )
    app.state.gateway = state
    return app
