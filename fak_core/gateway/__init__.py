"""fak_core.gateway: the kernel on the wire (HTTP API, MCP, OpenAI and Anthropic proxies).

It only translates between the wire and the kernel: every surface decides through
:class:`GatewayState`, the one decision seam.
"""

from typing import Any

from fak_core.gateway.render import render_verdict
from fak_core.gateway.state import DEFAULT_MAX_BODY, GatewayState, WireError, raw_arguments

__all__ = [
    "DEFAULT_MAX_BODY",
    "DownstreamSpec",
    "GatewayState",
    "McpProxy",
    "WireError",
    "load_servers",
    "raw_arguments",
    "render_verdict",
]

# The MCP proxy pulls in the mcp SDK (slow to import): load it only when asked for.
_LAZY = {
    "McpProxy": "fak_core.gateway.mcp_proxy",
    "DownstreamSpec": "fak_core.gateway.mcp_downstream",
    "load_servers": "fak_core.gateway.mcp_downstream",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'fak_core.gateway' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)
