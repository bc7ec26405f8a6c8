"""Pins of a downstream MCP server's tool metadata: the operator's word that it is trusted.

A downstream server's tool metadata is untrusted text that the client's model reads. The
MCP proxy lets the operator vouch for exactly the metadata they reviewed: a *pin* is the
SHA-256 of a tool's listed metadata, as the server lists it (every field of the MCP
``Tool``: name, title, description, ``inputSchema``, ``outputSchema``, ``execution``,
icons, annotations, ``_meta``), written as canonical JSON (keys sorted, no whitespace,
UTF-8). :func:`tool_digest` computes it; :func:`pin_status` compares a listed tool with
the pins: a server with no pins is ``unpinned`` (its metadata is untrusted text); on a
pinned server a tool whose digest matches is ``pinned``, one whose digest differs is
``changed`` and one the pins do not name is ``unknown`` (both fail closed: the proxy
hides them). The pins file (JSON, or TOML when its name ends in ``.toml``) is
``{"pins": {"<server>": {"<tool>": "sha256:<64 hex>"}}}``; ``fak mcp-proxy --print-pins``
writes one (:meth:`fak_core.gateway.mcp_proxy.McpProxy.current_pins`) and
:func:`load_pins` reads one.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import mcp_types as types
import orjson

from fak_core.gateway.mcp_downstream import ServerConfigError, load_config

__all__ = [
    "DIGEST_PREFIX",
    "PinStatus",
    "Pins",
    "load_pins",
    "parse_pins",
    "pin_status",
    "pins_for",
    "tool_digest",
]

DIGEST_PREFIX = "sha256:"
_DIGEST = re.compile(r"sha256:[0-9a-f]{64}")
#: server -> downstream tool name -> digest
Pins = Mapping[str, Mapping[str, str]]
PinStatus = Literal["unpinned", "pinned", "changed", "unknown"]


def tool_digest(tool: types.Tool) -> str:
    """``sha256:<hex>`` of the tool's listed metadata as canonical JSON (keys sorted)."""
    metadata = tool.model_dump(mode="json", by_alias=True, exclude_none=True)
    canonical = orjson.dumps(metadata, option=orjson.OPT_SORT_KEYS)
    return DIGEST_PREFIX + hashlib.sha256(canonical).hexdigest()


def pin_status(pins: Pins, server: str, tool: types.Tool) -> tuple[PinStatus, str]:
    """How ``tool`` as ``server`` lists it stands against the pins, and its digest."""
    digest = tool_digest(tool)
    table = pins.get(server)
    if table is None:
        return "unpinned", digest
    pinned = table.get(tool.name)
    if pinned is None:
        return "unknown", digest
    return ("pinned" if pinned == digest else "changed"), digest


def pins_for(pins: Pins, servers: list[str]) -> dict[str, dict[str, str]]:
    """A copy of ``pins`` for a proxy of ``servers``; a ``ValueError`` naming a pinned
    server the proxy does not front (a typo would otherwise leave the real one unpinned)."""
    stray = sorted(set(pins) - set(servers))
    if stray:
        raise ValueError(
            f"pins name server {stray[0]!r}, which is not a downstream server of this proxy "
            f"({', '.join(servers)}); pin only the servers it fronts"
        )
    return {server: dict(tools) for server, tools in pins.items()}


def parse_pins(doc: Any) -> dict[str, dict[str, str]]:
    """Validate a decoded pins document: ``{"pins": {server: {tool: digest}}}``."""
    if not isinstance(doc, dict) or set(doc) != {"pins"}:
        raise ServerConfigError(
            "a pins file has one key, 'pins': {server: {tool: 'sha256:<64 hex>'}} "
            "(write one with 'fak mcp-proxy --print-pins ...')"
        )
    table = doc["pins"]
    if not isinstance(table, dict):
        raise ServerConfigError("'pins' must be a table of server -> {tool: digest}")
    out: dict[str, dict[str, str]] = {}
    for server, tools in table.items():
        if not isinstance(tools, dict):
            raise ServerConfigError(f"pins of server {server!r}: expected a table tool -> digest")
        for tool, digest in tools.items():
            if not isinstance(digest, str) or not _DIGEST.fullmatch(digest):
                raise ServerConfigError(
                    f"pin of tool {tool!r} on server {server!r}: expected 'sha256:' and 64 "
                    f"lowercase hex digits, got {str(digest)[:80]!r}"
                )
        out[str(server)] = {str(t): str(d) for t, d in tools.items()}
    return out


def load_pins(path: str | Path) -> dict[str, dict[str, str]]:
    """Read a pins file (TOML when it ends in ``.toml``, else JSON)."""
    return load_config(path, "pins", parse_pins)
