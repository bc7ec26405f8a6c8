"""One proxied model turn, wire-neutral: admit inbound tool results, adjudicate proposals.

Both proxy routes translate their wire into :class:`InboundResult` and
:class:`ProposedCall` values and call :func:`admit_results` before the model runs and
:func:`adjudicate_proposed` after it. Every decision goes through the
:class:`~fak_core.gateway.state.GatewayState` seam; this module only applies the kernel's
verdict: ALLOW is kept verbatim, TRANSFORM is kept with the repaired arguments, and the
default branch drops everything else.

A turn may propose at most ``GatewayState.max_tool_calls`` calls (per choice): the first
that many are adjudicated in order; every call past the limit is dropped undecided with
DENY/OVERSIZE by ``gateway`` and a claim naming the limit (the kernel never sees it, so a
runaway model cannot make the gateway decide without bound).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

import orjson
from starlette.concurrency import run_in_threadpool

from fak_core.gateway.state import GatewayState, WireError
from fak_core.jsondepth import dumps
from fak_core.reasons import Reason
from fak_core.taint import Taint
from fak_core.verdicts import Verdict, VerdictKind

__all__ = [
    "Adjudication",
    "InboundResult",
    "ProposedCall",
    "TurnOutcome",
    "adjudicate_proposed",
    "admit_results",
    "args_digest",
    "over_limit",
    "refusal_summary",
]

BY = "gateway"
#: The tool name used when the wire does not say which tool produced a result.
PLACEHOLDER_TOOL = "tool_result"


@dataclass(frozen=True)
class ProposedCall:
    """A tool call the model proposed: its wire id, name and raw argument text."""

    id: str
    name: Any  # a string when the upstream behaved; anything else is refused as MALFORMED
    arguments: Any  # the JSON text (OpenAI) or the decoded value (Anthropic)


@dataclass(frozen=True)
class Adjudication:
    """What the kernel decided about one proposed call, and what the client receives."""

    call: ProposedCall
    verdict: dict[str, Any]
    admitted: bool
    arguments: str = ""  # the arguments the client receives, as JSON text (when admitted)
    digest: str = ""
    repaired: str | None = None
    choice: int = 0

    def to_wire(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "tool_call_id": self.call.id,
            "tool": self.call.name,
            "args_digest": self.digest,
            "admitted": self.admitted,
            "verdict": self.verdict,
        }
        if self.repaired is not None:
            out["repaired_arguments"] = self.repaired
        return out


@dataclass
class InboundResult:
    """A tool result the client sends back to the model (OpenAI ``tool`` message,
    Anthropic ``tool_result`` block): the text the kernel screens."""

    tool_call_id: str
    tool: str
    content: str
    admission: dict[str, Any] = field(default_factory=dict)
    rewritten: str | None = None  # the content the model sees instead, when rewritten
    #: the holder is a block whose content has no text form (a provider-run tool's
    #: result): a rewrite replaces the whole block with a text block of the kernel's text
    whole_block: bool = False

    def to_wire(self) -> dict[str, Any]:
        return {
            "tool_call_id": self.tool_call_id,
            "tool": self.tool,
            "verdict": self.admission.get("verdict", {}),
            "rewritten": self.rewritten is not None,
        }


@dataclass
class TurnOutcome:
    """The adjudications of one choice's proposed calls, in order."""

    adjudications: list[Adjudication] = field(default_factory=list)

    @property
    def kept(self) -> list[Adjudication]:
        return [a for a in self.adjudications if a.admitted]

    @property
    def dropped(self) -> list[Adjudication]:
        return [a for a in self.adjudications if not a.admitted]


def args_digest(arguments: Any) -> str:
    """``sha256:`` + hex over the canonical JSON of the arguments (sorted keys, compact);
    over the raw text when it does not parse; ``{}`` when empty."""
    if isinstance(arguments, str):
        text = arguments if arguments.strip(" \t\r\n") else "{}"
        try:
            value = orjson.loads(text)
        except orjson.JSONDecodeError:
            return "sha256:" + hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
    else:
        value = {} if arguments is None else arguments
    try:
        canon = orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
    except TypeError:  # deeper than orjson writes, an int over 64 bits, a lone surrogate
        try:
            text = json.dumps(value, sort_keys=True, separators=(",", ":"), allow_nan=False)
        except (TypeError, ValueError, RecursionError):
            text = "<arguments that cannot be encoded as JSON>"
        canon = text.encode("utf-8", "surrogatepass")
    return "sha256:" + hashlib.sha256(canon).hexdigest()


def _malformed(state: GatewayState, claim: str) -> dict[str, Any]:
    return state.render(Verdict.deny(Reason.MALFORMED, BY, claim=claim))


async def adjudicate_one(
    state: GatewayState, proposed: ProposedCall, trace_id: str, choice: int = 0
) -> Adjudication:
    """Decide one proposed call through the seam; only ALLOW and TRANSFORM are admitted."""
    digest = args_digest(proposed.arguments)
    try:
        call = state.build_call(proposed.name, proposed.arguments, trace_id)
    except WireError as exc:
        wire = _malformed(state, exc.message)
        return Adjudication(proposed, wire, False, digest=digest, choice=choice)
    verdict = await state.decide_async(call)
    wire = state.render(verdict)
    if verdict.kind == VerdictKind.ALLOW:
        return Adjudication(proposed, wire, True, str(call.args), digest, choice=choice)
    if verdict.kind == VerdictKind.TRANSFORM:
        repaired = verdict.repaired_args
        if repaired is not None:
            try:
                parsed = orjson.loads(repaired)
            except orjson.JSONDecodeError:
                parsed = None
            if isinstance(parsed, dict):
                return Adjudication(
                    proposed, wire, True, repaired, digest, repaired=repaired, choice=choice
                )
        wire = _malformed(state, "TRANSFORM carried no repaired JSON object")
        return Adjudication(proposed, wire, False, digest=digest, choice=choice)
    # The default branch: DENY, QUARANTINE, REQUIRE_WITNESS, DEFER, INDETERMINATE and every
    # kind this gateway does not know are dropped.
    return Adjudication(proposed, wire, False, digest=digest, choice=choice)


def over_limit(
    state: GatewayState, proposed: ProposedCall, position: int, total: int, choice: int = 0
) -> Adjudication:
    """The refusal of a call past the turn's limit (``position`` counts from 1)."""
    limit = state.max_tool_calls
    claim = (
        f"the turn proposes {total} tool calls, over the gateway's limit of {limit} per "
        f"turn; call {position} was not adjudicated: ask the model for at most {limit}"
    )
    verdict = state.render(Verdict.deny(Reason.OVERSIZE, BY, claim=claim))
    digest = args_digest(proposed.arguments)
    return Adjudication(proposed, verdict, False, digest=digest, choice=choice)


async def adjudicate_proposed(
    state: GatewayState, calls: list[ProposedCall], trace_id: str, choice: int = 0
) -> TurnOutcome:
    """Adjudicate the proposed calls in order, up to ``state.max_tool_calls``; refuse the rest.

    Each decision runs on a decision worker under the state's deadline while the event
    loop serves other requests (:meth:`GatewayState.decide_async`)."""
    limit = state.max_tool_calls
    total = len(calls)
    out = [await adjudicate_one(state, c, trace_id, choice) for c in calls[:limit]]
    for position in range(limit + 1, total + 1):
        out.append(over_limit(state, calls[position - 1], position, total, choice))
    return TurnOutcome(out)


def admit_results(state: GatewayState, results: list[InboundResult], trace_id: str) -> None:
    """Admit each inbound result on the trace (raising its taint); set ``rewritten`` when
    the kernel replaced what the model may see (quarantine stub, page-out, refusal)."""
    for r in results:
        try:
            call = state.build_call(r.tool or PLACEHOLDER_TOOL, "{}", trace_id)
            admitted = state.admit(call, r.content)
        except Exception as exc:  # fail closed: an admission that errs hides the result
            stub = orjson.dumps(
                {"_quarantined": True, "boundary": "proxy", "reason": "ADMIT_ERROR"}
            ).decode()
            r.admission = {
                "verdict": {
                    "kind": "QUARANTINE",
                    "reason": "ADMIT_ERROR",
                    "by": BY,
                    "detail": {"claim": f"{type(exc).__name__}: {exc}"[:200]},
                },
                "trace_id": trace_id,
            }
            r.rewritten = stub
            state.kernel.ledger.raise_to(trace_id, Taint.QUARANTINED)
            continue
        r.admission = admitted
        result = admitted.get("result", {})
        admit = result.get("meta", {}).get("admit")
        if admit in ("quarantined", "transformed"):
            r.rewritten = str(result.get("content", ""))
        elif admit == "denied" or result.get("status") != "OK":
            reason = admitted.get("verdict", {}).get("reason", "DENIED")
            r.rewritten = orjson.dumps(
                {"_quarantined": True, "boundary": "proxy", "reason": reason}
            ).decode()


async def admit_inbound(
    state: GatewayState,
    doc: dict[str, Any],
    pairs: list[tuple[dict[str, Any], InboundResult]],
    trace_id: str,
    raw: bytes,
) -> tuple[list[InboundResult], bytes]:
    """Admit a turn's inbound tool results (off the event loop, and only if there are any),
    put the kernel's rewrites in their holders' ``content``, and return the results with
    the body to send upstream: the client's own bytes when nothing was rewritten (so the
    upstream's prompt-cache prefix survives)."""
    results = [r for _, r in pairs]
    if not results:
        return results, raw
    await run_in_threadpool(admit_results, state, results, trace_id)
    rewritten = False
    for holder, r in pairs:
        if r.rewritten is None:
            continue
        rewritten = True
        if r.whole_block:
            holder.clear()
            holder.update({"type": "text", "text": r.rewritten})
        else:
            holder["content"] = r.rewritten
            rewritten = True
    return results, (dumps(doc) if rewritten else raw)


def refusal_summary(dropped: list[Adjudication]) -> str:
    """``tool: KIND (REASON/DISPOSITION)`` for every refused call, joined by ``; ``."""
    items = []
    for a in dropped:
        v = a.verdict
        parts = [p for p in (v.get("reason"), v.get("disposition")) if p]
        why = f" ({'/'.join(parts)})" if parts else ""
        items.append(f"{a.call.name or '<unnamed>'}: {v.get('kind', 'DENY')}{why}")
    return "All proposed tool calls were refused by the fak kernel: " + "; ".join(items)
