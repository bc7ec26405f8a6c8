"""What every gateway surface shares: the one kernel, trace ids, and wire → call building.

This is the single decision seam: every route and MCP tool builds its call with
:meth:`GatewayState.build_call` and decides through :meth:`adjudicate`, :meth:`syscall`
or :meth:`admit`, which call the kernel and render its verdict. No surface decides on
its own, and nothing from the wire carries trust: arguments and results are minted TAINTED.
With a decision journal, every surface awaits :meth:`GatewayState.durable` (or
:meth:`GatewayState.recorded`) before it answers, so no caller is told of a decision
that is not committed.
"""

from __future__ import annotations

import itertools
import threading
from dataclasses import dataclass, field
from typing import Any

import anyio.to_thread
import orjson

from fak_core.calls import Result, Status, ToolCall
from fak_core.gateway.render import render_verdict
from fak_core.journal import JOURNAL_DOWN, Journal, JournalError
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
    return orjson.dumps(arguments).decode("utf-8")


@dataclass
class GatewayState:
    """The kernel behind every surface, plus trace minting and request limits."""

    kernel: Kernel
    max_body: int = DEFAULT_MAX_BODY
    default_trace: str = ""
    journal: Journal | None = None
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
        payload = result if isinstance(result, str) else raw_arguments(result)
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

    # Durability -------------------------------------------------------------------
    async def durable(self) -> None:
        """Return once every decision made so far is committed to the journal (group
        commit, waited for off the event loop); :class:`JournalError` if it cannot be.
        Without a journal this returns at once."""
        journal = self.journal
        if journal is not None:
            await anyio.to_thread.run_sync(journal.sync)

    async def recorded(self, body: dict[str, Any]) -> dict[str, Any]:
        """``body`` once its decision is durable; if the journal failed, a refusal in its
        place: DENY/JOURNAL_DOWN with the reason, no result and no repaired arguments."""
        try:
            await self.durable()
        except JournalError as exc:
            refusal = Verdict.deny(JOURNAL_DOWN, "journal", claim=str(exc))
            return {"verdict": self.render(refusal), "trace_id": body.get("trace_id", "")}
        return body
