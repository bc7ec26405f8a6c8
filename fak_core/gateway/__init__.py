"""fak_core.gateway: the kernel on the wire (HTTP API, MCP, OpenAI and Anthropic proxies).

It only translates between the wire and the kernel: every surface decides through
:class:`GatewayState`, the one decision seam.
"""

from fak_core.gateway.planner import (
    Planner,
    PlannerError,
    default_planner,
    load_planner,
    parse_planner,
    planner_app,
    planner_upstream,
)
from fak_core.gateway.proxy_routes import close_proxy_routes, proxy_lifespan, proxy_routes
from fak_core.gateway.render import render_verdict
from fak_core.gateway.state import DEFAULT_MAX_BODY, GatewayState, WireError, raw_arguments
from fak_core.gateway.upstream import Upstream, UpstreamConfig, UpstreamError

__all__ = [
    "DEFAULT_MAX_BODY",
    "GatewayState",
    "Planner",
    "PlannerError",
    "Upstream",
    "UpstreamConfig",
    "UpstreamError",
    "WireError",
    "close_proxy_routes",
    "default_planner",
    "load_planner",
    "parse_planner",
    "planner_app",
    "planner_upstream",
    "proxy_lifespan",
    "proxy_routes",
    "raw_arguments",
    "render_verdict",
]
