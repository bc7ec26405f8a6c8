"""fak_core.gateway: the kernel on the wire (HTTP API, MCP, OpenAI and Anthropic proxies).

It only translates between the wire and the kernel: every surface decides through
:class:`GatewayState`, the one decision seam. :func:`create_app` assembles the ASGI app;
:func:`build_mcp_server` the MCP server; :func:`proxy_routes` the model-API proxies;
:func:`error_response` is the one error envelope. The parts that pull in Starlette,
httpx or the MCP SDK are imported on first use.
"""

from importlib import import_module
from typing import TYPE_CHECKING

from fak_core.gateway.errors import error_body, error_response, error_type_for

# Eager: the module shares the function's name, and a lazy import would leave the
# package attribute bound to the module once anything imported it.
from fak_core.gateway.proxy_routes import close_proxy_routes, proxy_lifespan, proxy_routes
from fak_core.gateway.render import render_verdict
from fak_core.gateway.sessions import SessionError, Sessions
from fak_core.gateway.state import DEFAULT_MAX_BODY, GatewayState, WireError, raw_arguments

__all__ = [
    "DEFAULT_MAX_BODY",
    "DownstreamSpec",
    "GatewayState",
    "McpProxy",
    "Planner",
    "PlannerError",
    "RedisSessions",
    "SessionError",
    "Sessions",
    "Upstream",
    "UpstreamConfig",
    "UpstreamError",
    "WireError",
    "attach_shared",
    "build_mcp_server",
    "close_proxy_routes",
    "create_app",
    "default_planner",
    "error_body",
    "error_response",
    "error_type_for",
    "load_pins",
    "load_planner",
    "load_servers",
    "open_shared",
    "parse_planner",
    "planner_app",
    "planner_upstream",
    "proxy_lifespan",
    "proxy_routes",
    "raw_arguments",
    "render_verdict",
    "shared_kernel_options",
]

_LAZY = {
    "create_app": "fak_core.gateway.app",
    "build_mcp_server": "fak_core.gateway.mcp_server",
    "Planner": "fak_core.gateway.planner",
    "PlannerError": "fak_core.gateway.planner",
    "default_planner": "fak_core.gateway.planner",
    "load_planner": "fak_core.gateway.planner",
    "parse_planner": "fak_core.gateway.planner",
    "planner_app": "fak_core.gateway.planner",
    "planner_upstream": "fak_core.gateway.planner",
    "Upstream": "fak_core.gateway.upstream",
    "UpstreamConfig": "fak_core.gateway.upstream",
    "UpstreamError": "fak_core.gateway.upstream",
    "McpProxy": "fak_core.gateway.mcp_proxy",
    "DownstreamSpec": "fak_core.gateway.mcp_downstream",
    "load_servers": "fak_core.gateway.mcp_downstream",
    "load_pins": "fak_core.gateway.mcp_pins",
    "RedisSessions": "fak_core.gateway.redis_sessions",
    "attach_shared": "fak_core.gateway.replicas",
    "open_shared": "fak_core.gateway.replicas",
    "shared_kernel_options": "fak_core.gateway.replicas",
}

if TYPE_CHECKING:
    from fak_core.gateway.app import create_app
    from fak_core.gateway.mcp_downstream import DownstreamSpec, load_servers
    from fak_core.gateway.mcp_pins import load_pins
    from fak_core.gateway.mcp_proxy import McpProxy
    from fak_core.gateway.mcp_server import build_mcp_server
    from fak_core.gateway.planner import (
        Planner,
        PlannerError,
        default_planner,
        load_planner,
        parse_planner,
        planner_app,
        planner_upstream,
    )
    from fak_core.gateway.redis_sessions import RedisSessions
    from fak_core.gateway.replicas import attach_shared, open_shared, shared_kernel_options
    from fak_core.gateway.upstream import Upstream, UpstreamConfig, UpstreamError


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(module), name)
