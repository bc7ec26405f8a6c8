"""fak_core.gateway: the kernel on the wire (HTTP API, MCP, OpenAI and Anthropic proxies).

It only translates between the wire and the kernel: every surface decides through
:class:`GatewayState`, the one decision seam. :func:`create_app` assembles the ASGI app;
:func:`build_mcp_server` the MCP server; :func:`error_response` is the one error envelope.
"""

from typing import TYPE_CHECKING

from fak_core.gateway.errors import error_body, error_response, error_type_for
from fak_core.gateway.render import render_verdict
from fak_core.gateway.state import DEFAULT_MAX_BODY, GatewayState, WireError, raw_arguments

__all__ = [
    "DEFAULT_MAX_BODY",
    "GatewayState",
    "WireError",
    "build_mcp_server",
    "create_app",
    "error_body",
    "error_response",
    "error_type_for",
    "raw_arguments",
    "render_verdict",
]

if TYPE_CHECKING:
    from fak_core.gateway.app import create_app
    from fak_core.gateway.mcp_server import build_mcp_server


def __getattr__(name: str) -> object:
    # The app and the MCP server pull in Starlette and the MCP SDK: import them on use.
    if name == "create_app":
        from fak_core.gateway.app import create_app

        return create_app
    if name == "build_mcp_server":
        from fak_core.gateway.mcp_server import build_mcp_server

        return build_mcp_server
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
