"""Wire request bodies → validated fields for the fak-native API and the MCP tools.

One parser for both surfaces, so HTTP and MCP refuse the same inputs with the same
message. It checks field types only; everything about the call itself (does the
arguments text parse, does it fit the schema, is the tool allowed) is the kernel's job.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

from fak_core.calls import ToolCall
from fak_core.gateway.sessions import trace_id_problem
from fak_core.gateway.state import BLANK, GatewayState, WireError
from fak_core.jsondepth import MAX_JSON_DEPTH, JsonTooDeep, loads
from fak_core.verdicts import frozen_meta

__all__ = ["CallRequest", "decode_body", "parse_admit", "parse_call", "parse_trace_id"]


@dataclass(frozen=True, slots=True)
class CallRequest:
    """The fields of a syscall / adjudicate / admit request, type-checked."""

    tool: Any
    arguments: Any
    trace_id: str | None
    witness: str
    principal: str
    read_only: bool
    result: Any = None

    def build(self, state: GatewayState, header_trace: str | None = None) -> ToolCall:
        """Mint the TAINTED call through the seam (raises :class:`WireError` on a blank tool)."""
        trace = state.trace_for(self.trace_id, header_trace)
        call = state.build_call(
            self.tool, self.arguments, trace, principal=self.principal, witness=self.witness
        )
        if self.read_only:  # an advisory hint: recorded for audit, it grants nothing
            call = call._replace(meta=frozen_meta({**call.meta, "read_only": "true"}))
        return call


def decode_body(raw: bytes) -> dict[str, Any]:
    """Parse a request body as a JSON object or raise :class:`WireError` saying what to fix."""
    if not raw.strip():
        raise WireError('empty request body: send a JSON object such as {"tool": "name"}')
    try:
        doc = loads(raw)
    except JsonTooDeep:
        raise WireError(
            f"malformed request body: it nests deeper than {MAX_JSON_DEPTH} levels; send a "
            "JSON object whose arguments nest no deeper than 64 levels"
        ) from None
    except orjson.JSONDecodeError as exc:
        raise WireError(
            f"malformed request body: not valid JSON ({exc}); send a JSON object"
        ) from None
    if not isinstance(doc, dict):
        raise WireError(
            f"request body must be a JSON object, not a JSON {_json_type(doc)}; "
            'send e.g. {"tool": "name", "arguments": {}}'
        )
    return doc


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def _opt_str(doc: dict[str, Any], key: str) -> str | None:
    value = doc.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise WireError(f"'{key}' must be a string, not a JSON {_json_type(value)}", key)
    return value


def parse_trace_id(doc: dict[str, Any], *, required: bool = False) -> str | None:
    """The body's ``trace_id`` (a string) or None; blank is refused when ``required``, and
    one over the limit as sent (blanks around it counted, as the OpenAPI document's
    ``maxLength`` counts them) always."""
    trace = _opt_str(doc, "trace_id")
    if trace is not None and (problem := trace_id_problem(trace)) is not None:
        raise WireError(problem, "trace_id")
    if required and (trace is None or not trace.strip(BLANK)):
        raise WireError("missing trace_id: send a non-empty string in 'trace_id'", "trace_id")
    return trace.strip(BLANK) if trace is not None else None


def parse_call(doc: dict[str, Any], header_principal: str | None = None) -> CallRequest:
    """Fields of a syscall / adjudicate request. ``tool`` blankness is left to build_call.
    The principal loses the :data:`BLANK` around it, in the header as in the body."""
    tool = doc.get("tool")
    if tool is not None and not isinstance(tool, str):
        raise WireError(f"'tool' must be a string, not a JSON {_json_type(tool)}", "tool")
    read_only = doc.get("read_only", False)
    if read_only is None:
        read_only = False
    if not isinstance(read_only, bool):
        raise WireError(f"'read_only' must be true or false, not a JSON {_json_type(read_only)}")
    principal = (_opt_str(doc, "principal") or "").strip(BLANK)
    if header_principal and header_principal.strip(BLANK):
        principal = header_principal.strip(BLANK)
    return CallRequest(
        tool=tool,
        arguments=doc.get("arguments"),
        trace_id=parse_trace_id(doc),
        witness=_opt_str(doc, "witness") or "",
        principal=principal,
        read_only=read_only,
    )


def parse_admit(doc: dict[str, Any], header_principal: str | None = None) -> CallRequest:
    """Fields of an admit request: the call fields plus ``result`` (object, string, absent)."""
    req = parse_call(doc, header_principal)
    result = doc.get("result")
    if result is None:
        result = "{}"
    return CallRequest(
        req.tool, req.arguments, req.trace_id, req.witness, req.principal, req.read_only, result
    )
