"""What every gateway surface shares: the one kernel, trace ids, and wire → call building.

This is the single decision seam: every route and MCP tool builds its call with
:meth:`GatewayState.build_call` and decides through :meth:`adjudicate`, :meth:`syscall`
or :meth:`admit`, which call the kernel and render its verdict. No surface decides on
its own, and nothing from the wire carries trust: arguments and results are minted TAINTED.
With a decision journal, every surface awaits :meth:`GatewayState.durable` (or
:meth:`GatewayState.recorded`) before it answers, so no caller is told of a decision
that is not committed.

Every decision that could wait runs under a deadline (``decide_timeout`` seconds, default
5): the kernel decides in a small pool of worker threads, and a decision that is late is
answered with DENY/DEFAULT_DENY ("adjudication timed out after Ns"), a verdict like any
other. A late adjudicator cannot be killed; it keeps its worker until it returns
(``stuck_decisions``) and its verdict is dropped; a syscall whose decision was late never
runs its tool. A decision that cannot wait, because every part of it is declared
:func:`~fak_core.nonblocking.nonblocking` (the kernel's built-in chain is), on arguments
of at most ``INLINE_ARGS_BYTES``, is decided inline instead: it cannot hang, and a thread
hop each way would cost more than the decision.

Each request runs in a journal request scope (:func:`fak_core.journal.request_scope`, opened
by the HTTP middleware and by each MCP tool call); a decision on a worker thread runs in a
copy of the caller's context, so its rows count against its request's byte bound, and a
request whose rows were refused is answered DENY/JOURNAL_DOWN.
"""

from __future__ import annotations

import contextlib
import contextvars
import threading
from dataclasses import dataclass, field
from typing import Any

import anyio.to_thread

from fak_core.calls import Result, Status, ToolCall
from fak_core.deadline import DeadlineExceeded, DeadlinePool
from fak_core.gateway.render import render_verdict
from fak_core.gateway.sessions import (
    CALLER,
    MAX_TRACE_BYTES,
    Sessions,
    new_trace_id,
    trace_id_problem,
)
from fak_core.journal import JOURNAL_DOWN, Journal, JournalError, current_receipt
from fak_core.journal import args_digest as journal_args_digest
from fak_core.journal import request_scope as journal_request_scope
from fak_core.jsonargs import args_nbytes
from fak_core.jsondepth import dumps
from fak_core.kernel import Kernel
from fak_core.nonblocking import is_nonblocking
from fak_core.reasons import Reason
from fak_core.statedown import STATE_DOWN, StateUnavailable
from fak_core.taint import Taint
from fak_core.verdicts import Verdict, VerdictKind, frozen_meta

__all__ = [
    "DEFAULT_DECIDE_TIMEOUT",
    "DEFAULT_MAX_BODY",
    "DEFAULT_MAX_TOOL_CALLS",
    "BLANK",
    "INLINE_ARGS_BYTES",
    "GatewayState",
    "WireError",
    "raw_arguments",
]

DEFAULT_MAX_BODY = 4 << 20
DEFAULT_DECIDE_TIMEOUT = 5.0
DEFAULT_MAX_TOOL_CALLS = 64
DECIDE_WORKERS = 16
#: Arguments up to this size are decided inline when the kernel cannot wait (see ``_inline``).
#: A call over it goes to the decision pool even so: a non-blocking chain still parses,
#: screens and validates the arguments, in time linear in their size (up to the body cap),
#: and inline that time would stall the event loop, every other request with it; on a
#: worker the loop goes on and the deadline bounds the answer. A7.5 states the bound in bytes.
INLINE_ARGS_BYTES = 64 << 10
_JSON_WS = " \t\r\n"
#: White space as the OpenAPI document's ``pattern: \S`` sees it (ECMA-262 ``\s``): a tool
#: name or trace id of only these is blank. ``str.strip()`` would also take \x1c-\x1f and
#: \x85, which the schema counts as text, and miss U+FEFF, which it counts as space.
BLANK = (
    "\t\n\v\f\r \xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008"
    "\u2009\u200a\u2028\u2029\u202f\u205f\u3000\ufeff"
)


class WireError(ValueError):
    """A request the gateway cannot turn into a call: a 400 with this message and ``param``."""

    def __init__(self, message: str, param: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.param = param


def raw_arguments(arguments: Any) -> str:
    """Arguments as JSON text: an object is serialised, a string is taken as the JSON text
    (the OpenAI convention), absent, empty or JSON white space only is ``{}``; anything
    else is passed as its JSON text so that rung 0 refuses it with a clear reason."""
    if arguments is None:
        return "{}"
    if isinstance(arguments, str):
        # JSON white space only is {}; str.strip would also eat \x1c, \u2028 and friends,
        # which are not JSON and must reach rung 0 to be refused.
        return arguments if arguments.strip(_JSON_WS) else "{}"
    try:  # orjson, else an iterative writer: any depth, any integer (the kernel judges)
        return dumps(arguments).decode("utf-8")
    except (TypeError, ValueError) as exc:
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
    journal: Journal | None = None
    #: Who owns each trace (see :mod:`fak_core.gateway.sessions`).
    sessions: Sessions = field(default_factory=Sessions)
    #: Inbound tool results one proxied turn may carry (``fak serve --max-tool-results``).
    max_tool_results: int = 256
    _lock: threading.Lock = field(default_factory=threading.Lock)
    #: Seconds one decision may take before it is a DENY (None: decide inline, no deadline).
    decide_timeout: float | None = DEFAULT_DECIDE_TIMEOUT
    #: Proposed tool calls adjudicated per model turn; the rest are refused undecided.
    max_tool_calls: int = DEFAULT_MAX_TOOL_CALLS
    #: Decisions answered DENY because they missed the deadline.
    decide_timeouts: int = field(default=0, init=False)
    #: Proxied turns refused for carrying more than ``max_tool_results`` tool results.
    tool_results_refused: int = field(default=0, init=False)
    _deciders: DeadlinePool = field(
        default_factory=lambda: DeadlinePool(DECIDE_WORKERS, "fak-decide"), init=False
    )
    #: The shared session state (a :class:`fak_core.redis_state.RedisState`), or None: the
    #: in-memory stores of this one process. ``/healthz`` probes it.
    shared: Any = None
    #: The model's text in a tainted session: ``police`` (links to ungrounded destinations
    #: replaced by a marker, :mod:`fak_core.gateway.text_output`) or ``off``.
    text_links: str = "police"

    def __setattr__(self, name: str, value: Any) -> None:
        object.__setattr__(self, name, value)
        if name == "sessions":  # whichever owner table it is given, it opens in the ledger
            value.on_open = self._opened

    def _opened(self, trace: str) -> None:
        """A claim bound ``trace`` to a new owner: begin it in the ledger (if the ledger
        can), charged to the caller's credential, else its address (C4.11)."""
        begin = getattr(self.kernel.ledger, "begin", None)
        if callable(begin):
            client, credential = CALLER.get()
            begin(trace, credential or (f"client:{client}" if client else ""))

    def __post_init__(self) -> None:
        if self.decide_timeout is not None and not 0 < self.decide_timeout < float("inf"):
            raise ValueError(
                f"decide_timeout must be a positive number of seconds, not {self.decide_timeout}"
            )
        if self.max_tool_calls < 1:
            raise ValueError(f"max_tool_calls must be at least 1, not {self.max_tool_calls}")
        if self.max_tool_results < 1:
            raise ValueError(f"max_tool_results must be at least 1, not {self.max_tool_results}")
        if self.text_links not in ("police", "off"):
            raise ValueError(f"text_links must be 'police' or 'off', not {self.text_links!r}")

    @property
    def stuck_decisions(self) -> int:
        """Decisions that missed the deadline and are still running (each holds a worker)."""
        return self._deciders.stuck

    def limits(self) -> dict[str, int]:
        """Every store's bound and counters (``/healthz`` shows them under ``limits``)."""
        kernel = self.kernel
        with self._lock:
            out = {
                "max_body": self.max_body,
                "max_tool_calls": self.max_tool_calls,
                "max_tool_results": self.max_tool_results,
                "tool_results_refused": self.tool_results_refused,
                "max_trace_id_bytes": MAX_TRACE_BYTES,
                "decide_timeouts": self.decide_timeouts,
            }
        ledger_stats = getattr(kernel.ledger, "stats", None)
        if callable(ledger_stats):
            out.update(ledger_stats())
        out.update(kernel.held.stats())
        out.update(kernel.grounding.stats())  # policy v2: trusted context per session
        out.update(self.sessions.stats())
        return out

    def refuse_tool_results(self, count: int) -> str | None:
        """Why a turn carrying ``count`` inbound tool results is refused (over
        ``max_tool_results``), counted; None when it is within the cap."""
        if count <= self.max_tool_results:
            return None
        with self._lock:
            self.tool_results_refused += 1
        return (
            f"the request carries {count} tool results; this gateway admits at most "
            f"{self.max_tool_results} per turn (fak serve --max-tool-results N)"
        )

    def close(self) -> None:
        """Stop the idle decision workers (stuck ones stop when their decision returns)
        and close the connection to the shared state, if any."""
        self._deciders.close()
        if self.shared is not None:
            self.shared.close()

    def _late(self, call: ToolCall) -> Verdict:
        with self._lock:
            self.decide_timeouts += 1
        verdict = Verdict.deny(
            Reason.DEFAULT_DENY,
            "gateway",
            claim=f"adjudication timed out after {self.decide_timeout:g}s",
        )
        journal = self.journal
        if journal is not None:  # the answer the caller gets is the one on record
            with contextlib.suppress(JournalError):  # a failed journal shows on durable()
                journal.record_fields(
                    {
                        "event": "decide",
                        "trace": call.trace_id,
                        "tool": call.tool,
                        "args_digest": journal_args_digest(call),
                        "verdict": "DENY",
                        "reason": "DEFAULT_DENY",
                        "by": "gateway",
                    }
                )
        return verdict

    def trace_for(self, body_trace: Any = None, header_trace: str | None = None) -> str:
        """Body ``trace_id``, else the ``X-Trace-Id`` header, else the default, else minted
        (128 random bits: a minted id cannot be guessed). A trace id over
        :data:`~fak_core.gateway.sessions.MAX_TRACE_BYTES` as sent, the blanks around it
        included (the OpenAPI document's ``maxLength``), is a :class:`WireError`."""
        for given in (body_trace if isinstance(body_trace, str) else None, header_trace):
            if given and (trace := given.strip(BLANK)):
                problem = trace_id_problem(given)
                if problem is not None:
                    raise WireError(problem, "trace_id")
                return trace
        if self.default_trace:
            return self.default_trace
        return new_trace_id()

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
        if not isinstance(tool, str) or not tool.strip(BLANK):
            raise WireError("missing tool name: send a non-empty string in 'tool'", "tool")
        meta: dict[str, str] = {}
        if witness:
            meta["witness"] = str(witness)
        if principal:
            meta["principal"] = str(principal)
        client, credential = CALLER.get()  # set by the middleware, never by the body
        if client:
            meta["client"] = client
        if credential:
            meta["credential"] = credential
        return ToolCall(
            tool.strip(BLANK),
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

    def _inline(self, call: ToolCall) -> bool:
        """Decide on the calling thread even under a deadline: nothing in the decision can
        wait (every part declared non-blocking) and the arguments are small enough that
        parsing and validating them is a matter of microseconds."""
        return args_nbytes(call.args) <= INLINE_ARGS_BYTES and self.kernel.decides_without_waiting()

    def decide(self, call: ToolCall) -> Verdict:
        """The kernel's verdict on ``call``, or DENY/DEFAULT_DENY when it is late."""
        timeout = self.decide_timeout
        if timeout is None or self._inline(call):
            return self.kernel.decide(call)
        try:
            ctx = contextvars.copy_context()  # the request's journal scope goes along
            verdict: Verdict = self._deciders.run(
                ctx.run, self.kernel.decide, call, timeout=timeout
            )
            return verdict
        except DeadlineExceeded:
            return self._late(call)

    async def record_trusted(self, trace: str, items: list[tuple[str, str]]) -> None:
        """The user's and system's own words for a session (policy v2): inline with the
        in-memory grounding store, on a worker thread with a shared one (a round trip);
        a shared store that cannot be reached raises :class:`StateUnavailable`."""
        kernel = self.kernel
        if is_nonblocking(kernel.grounding):
            kernel.record_trusted_many(trace, items)
        else:
            await anyio.to_thread.run_sync(kernel.record_trusted_many, trace, items)

    async def decide_async(self, call: ToolCall) -> Verdict:
        """:meth:`decide` from a coroutine. A decision that cannot wait runs inline; any
        other runs on a decision worker (one hop) while the event loop goes on, and late
        is DENY/DEFAULT_DENY, as in :meth:`decide`."""
        timeout = self.decide_timeout
        if timeout is None or self._inline(call):
            return self.kernel.decide(call)
        try:
            ctx = contextvars.copy_context()
            return await self._deciders.arun(ctx.run, self.kernel.decide, call, timeout=timeout)
        except DeadlineExceeded:
            return self._late(call)

    def authorize(self, call: ToolCall) -> tuple[ToolCall, Verdict, bool]:
        """:meth:`Kernel.authorize` under the deadline; a late one may not run."""
        timeout = self.decide_timeout
        if timeout is None:
            return self.kernel.authorize(call)
        try:
            ctx = contextvars.copy_context()
            out: tuple[ToolCall, Verdict, bool] = self._deciders.run(
                ctx.run, self.kernel.authorize, call, timeout=timeout
            )
            return out
        except DeadlineExceeded:
            return call, self._late(call), False

    def adjudicate(self, call: ToolCall) -> dict[str, Any]:
        """Decide only: ``{"verdict", "repaired_arguments"?, "trace_id"}``."""
        return self._adjudication(call, self.decide(call))

    async def adjudicate_async(self, call: ToolCall) -> dict[str, Any]:
        """:meth:`adjudicate` from a coroutine (the decision as in :meth:`decide_async`)."""
        return self._adjudication(call, await self.decide_async(call))

    def _adjudication(self, call: ToolCall, v: Verdict) -> dict[str, Any]:
        out: dict[str, Any] = {"verdict": self.render(v), "trace_id": call.trace_id}
        if v.kind == VerdictKind.TRANSFORM and v.repaired_args is not None:
            out["repaired_arguments"] = v.repaired_args
        return out

    def syscall(self, call: ToolCall) -> dict[str, Any]:
        """Decide and run: ``{"verdict", "result": {status, content, meta}, "trace_id"}``.

        With a deadline, only the decision (``Kernel.authorize``) runs under it; the tool's
        own time is bounded by the kernel's ``tool_timeout``.
        """
        kernel = self.kernel
        try:
            if self.decide_timeout is None:
                result, v = kernel.syscall(call)
            else:
                authorized, v, runnable = self.authorize(call)
                if runnable:
                    result, v = kernel.run_authorized(authorized, v)
                else:
                    result = kernel.deny_result(v)
        except StateUnavailable as exc:  # the result's taint could not be recorded: withheld
            return self._state_down(call, exc)
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
        try:
            admitted, v = self.kernel.admit(call, Result(Status.OK, payload, taint=Taint.TAINTED))
        except StateUnavailable as exc:  # its taint could not be recorded: withheld
            return self._state_down(call, exc)
        return {
            "verdict": self.render(v, admitted.meta),
            "result": {
                "status": admitted.status.value,
                "content": admitted.payload,
                "meta": dict(admitted.meta),
            },
            "trace_id": call.trace_id,
        }

    def _state_down(self, call: ToolCall, exc: StateUnavailable) -> dict[str, Any]:
        """The answer when the shared state failed mid-call: DENY/STATE_DOWN, no content
        (a result whose taint is not on record is never handed out)."""
        verdict = Verdict.deny(STATE_DOWN, "state", claim=str(exc))
        result = self.kernel.deny_result(verdict)
        meta = {**result.meta, "admit": "denied"}
        return {
            "verdict": self.render(verdict, meta),
            "result": {"status": result.status.value, "content": "", "meta": meta},
            "trace_id": call.trace_id,
        }

    # Durability -------------------------------------------------------------------
    def request_scope(self) -> contextlib.AbstractContextManager[Any]:
        """The journal's request scope for one request (harmless without a journal)."""
        return journal_request_scope()

    def journal_refusal(self) -> str | None:
        """Why the current request's journal scope was refused (None: it was not), so a
        request can stop before doing more work whose answer is already a refusal."""
        receipt = current_receipt() if self.journal is not None else None
        return None if receipt is None else receipt.refused

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
