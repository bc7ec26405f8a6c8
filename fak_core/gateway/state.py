"""What every gateway surface shares: the one kernel, trace ids, and wire → call building.

This is the single decision seam: every route and MCP tool builds its call with
:meth:`GatewayState.build_call` and decides through :meth:`adjudicate`, :meth:`syscall`
or :meth:`admit`, which call the kernel and render its verdict. No surface decides on
its own, and nothing from the wire carries trust: arguments and results are minted TAINTED.
"""

from __future__ import annotations

import itertools
import json
import threading
from dataclasses import dataclass, field
from typing import Any

import orjson

from fak_core.calls import Result, Status, ToolCall
from fak_core.gateway.render import render_verdict
from fak_core.kernel import Kernel
from fak_core.taint import Taint
from fak_core.verdicts import Verdict, VerdictKind, frozen_meta

__all__ = ["DEFAULT_MAX_BODY", "GatewayState", "WireError", "raw_arguments"]

DEFAULT_MAX_BODY = 4 << 20


class WireError(ValueError):
    """A request the gateway cannot turn into a call: a 400 with this message and ``param``."""

    def __init__(self, message: str, param: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.param = param


def raw_arguments(arguments: Any) -> str:
    """Arguments as JSON text: an object is serialised, a string is taken as the JSON text
    (the OpenAI convention), absent or empty is ``{}``; anything else is passed as its JSON
    text so that rung 0 refuses it with a clear reason."""
    if arguments is None:
        return "{}"
    if isinstance(arguments, str):
        return arguments if arguments.strip() else "{}"
    try:
        return orjson.dumps(arguments).decode("utf-8")
    except TypeError:  # nested deeper than orjson writes (255), an int over 64 bits, ...
        pass
    try:
        return json.dumps(arguments, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    except (TypeError, ValueError, RecursionError) as exc:
        raise WireError(
            f"arguments cannot be written back as JSON text ({type(exc).__name__}: "
            f"{str(exc)[:80]}); send a JSON object nested no deeper than 64 levels",
            "arguments",
        ) from None


@dataclass
class GatewayState:
    """The kernel behind every surface, plus trace minting and request limits."""

    kernel: Kernel
    max_body: int = DEFAULT_MAX_BODY
    default_trace: str = ""
    _counter: itertools.count[int] = field(default_factory=lambda: itertools.count(1))
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def trace_for(self, body_trace: Any = None, header_trace: str | None = None) -> str:
        """Body ``trace_id``, else the ``X-Trace-Id`` header, else the default, else minted."""
        if isinstance(body_trace, str) and body_trace.strip():
            return body_trace.strip()
        if header_trace and header_trace.strip():
            return header_trace.strip()
        if self.default_trace:
            return self.default_trace
        with self._lock:
            return f"gw-{next(self._counter)}"

    def build_call(
        self,
        tool: Any,
        arguments: Any = None,
        trace_id: str = "",
        *,
        principal: str = "",
        witness: str = "",
    ) -> ToolCall:
        """Validate wire fields and mint a TAINTED call; raise :class:`WireError` on bad input."""
        if not isinstance(tool, str) or not tool.strip():
            raise WireError("missing tool name: send a non-empty string in 'tool'", "tool")
        meta: dict[str, str] = {}
        if witness:
            meta["witness"] = str(witness)
        if principal:
            meta["principal"] = str(principal)
        return ToolCall(
            tool.strip(),
            raw_arguments(arguments),
            trace_id or self.trace_for(),
            str(principal or ""),
            frozen_meta(meta),
            Taint.TAINTED,
        )

    # The decision seam -------------------------------------------------------------
    def render(self, verdict: Verdict, result_meta: Any = None) -> dict[str, Any]:
        k = self.kernel
        return render_verdict(verdict, k.kinds, k.reasons, result_meta)

    def adjudicate(self, call: ToolCall) -> dict[str, Any]:
        """Decide only: ``{"verdict", "repaired_arguments"?, "trace_id"}``."""
        v = self.kernel.decide(call)
        out: dict[str, Any] = {"verdict": self.render(v), "trace_id": call.trace_id}
        if v.kind == VerdictKind.TRANSFORM and v.repaired_args is not None:
            out["repaired_arguments"] = v.repaired_args
        return out

    def syscall(self, call: ToolCall) -> dict[str, Any]:
        """Decide and run: ``{"verdict", "result": {status, content, meta}, "trace_id"}``."""
        result, v = self.kernel.syscall(call)
        return {
            "verdict": self.render(v, result.meta),
            "result": {
                "status": result.status.value,
                "content": result.payload,
                "meta": dict(result.meta),
            },
            "trace_id": call.trace_id,
        }

    def admit(self, call: ToolCall, result: Any) -> dict[str, Any]:
        """Admit a client-run result (minted TAINTED): ``{"verdict", "result", "trace_id"}``."""
        try:
            payload = result if isinstance(result, str) else raw_arguments(result)
        except WireError as exc:
            raise WireError(exc.message.replace("arguments", "result", 1), "result") from None
        admitted, v = self.kernel.admit(call, Result(Status.OK, payload, taint=Taint.TAINTED))
        return {
            "verdict": self.render(v, admitted.meta),
            "result": {
                "status": admitted.status.value,
                "content": admitted.payload,
                "meta": dict(admitted.meta),
            },
            "trace_id": call.trace_id,
        }
