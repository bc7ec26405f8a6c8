"""fak_core.gateway: the kernel on the wire (HTTP API, MCP, OpenAI and Anthropic proxies).

It only translates between the wire and the kernel: every surface decides through
:class:`GatewayState`, the one decision seam.
"""

from fak_core.gateway.render import render_verdict
from fak_core.gateway.state import DEFAULT_MAX_BODY, GatewayState, WireError, raw_arguments

__all__ = ["DEFAULT_MAX_BODY", "GatewayState", "WireError", "raw_arguments", "render_verdict"]
