"""The kernel: one instance owns its chain, tools, schemas, witnesses, taint and counters.

``decide`` folds the adjudicator chain over a call. ``syscall`` decides, resolves a
REQUIRE_WITNESS, runs the tool only on ALLOW or TRANSFORM (with the repaired arguments),
and admits the result. ``admit`` runs the result-side chain and raises the session's
taint mark. Nothing escapes as an exception: a refusal or a failure is a value.

With ``tool_timeout`` set, ``syscall`` runs each tool in a small worker pool the kernel
owns (:class:`~fak_core.deadline.DeadlinePool`, ``tool_workers`` threads) and answers an
ERROR result ("tool X timed out after Ns") when the tool is late. A Python thread cannot
be killed: the late tool keeps its worker until it returns (its result is then dropped).
:attr:`Kernel.stuck_tools` counts such workers; once every worker is stuck, further tool
calls wait in the queue and time out the same way (they never start late).

Dispatch gates (:meth:`Kernel.add_dispatch_gate`) run after the decision and before the
tool: each may refuse the run with a verdict (the decision journal's gate refuses until
the call's ALLOW is committed). Unlike a subscriber, a gate is not isolated: a gate that
refuses or raises stops the tool, and the call is answered with that refusal.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from fak_core.adjudicators import (
    Adjudicator,
    Registration,
    ResultAdmitter,
    WitnessOutcome,
    WitnessResolver,
    as_adjudicator,
    as_admitter,
)
from fak_core.admission import HeldStore, ResultScreen, ScreenConfig, quarantine_stub
from fak_core.calls import Result, Status, ToolCall
from fak_core.confidential import ConfidentialStore
from fak_core.deadline import DeadlineExceeded, DeadlinePool
from fak_core.events import Counters, Event, EventKind, Subscriber
from fak_core.floor import CapabilityFloor
from fak_core.fold import Witnessed, fold, fold_results, fold_results_witnessed
from fak_core.grounding import GroundingStore
from fak_core.identifiers import MAX_IDENTIFIERS, MAX_RESULT_CHARS, identifier_values
from fak_core.jsonargs import DEFAULT_MAX_ARGS_BYTES, DEFAULT_MAX_DEPTH
from fak_core.jsondepth import dumps
from fak_core.ledger import MemoryLedger, TaintLedger
from fak_core.nonblocking import is_nonblocking
from fak_core.policy import Policy, default_policy
from fak_core.preflight import Ladder, Rung
from fak_core.provenance import Source, SourceRegistry
from fak_core.ratelimit import RateLimit, RateLimiter
from fak_core.reasons import Disposition, Reason, ReasonRegistry
from fak_core.rules import RuleGate
from fak_core.schemas import SchemaRegistry
from fak_core.sinkclasses import SinkClassRegistry
from fak_core.sinks import SinkGate
from fak_core.taint import Taint
from fak_core.verdicts import (
    EXTENSION_KIND_MIN,
    KindRegistry,
    Verdict,
    VerdictKind,
    frozen_meta,
)
from fak_core.view import CallView

if TYPE_CHECKING:
    from fak_core.approvals import NonceStore

__all__ = [
    "DispatchGate",
    "PREFLIGHT_RANK",
    "RATE_LIMIT_RANK",
    "FLOOR_RANK",
    "SINK_GATE_RANK",
    "SCREEN_RANK",
    "Kernel",
    "Tool",
]

RATE_LIMIT_RANK = 8
PREFLIGHT_RANK = 10
SINK_GATE_RANK = 30
FLOOR_RANK = 100
SCREEN_RANK = 10
RULES_RANK = 40

Tool = Callable[[dict[str, Any]], Any]

#: ``gate(call, verdict)`` before a tool runs: None lets it run, a verdict refuses it.
DispatchGate = Callable[[ToolCall, Verdict], Verdict | None]


def _noting(fn: Tool, own: list[BaseException]) -> Tool:
    """``fn``, noting in ``own`` a :class:`DeadlineExceeded` it raises itself, so the kernel
    does not read it as the tool pool's deadline."""

    def tool(args: dict[str, Any]) -> Any:
        try:
            return fn(args)
        except DeadlineExceeded as exc:
            own.append(exc)
            raise

    return tool


_ALLOW = VerdictKind.ALLOW
_DENY = VerdictKind.DENY
_TRANSFORM = VerdictKind.TRANSFORM
_QUARANTINE = VerdictKind.QUARANTINE
_WITNESS = VerdictKind.REQUIRE_WITNESS


class Kernel:
    """A tool-call adjudication kernel. Two kernels in one process share nothing."""

    def __init__(
        self,
        policy: Policy | None = None,
        *,
        ledger: TaintLedger | None = None,
        builtin_chain: bool = True,
        require_schema: bool = False,
        max_args_bytes: int = DEFAULT_MAX_ARGS_BYTES,
        max_depth: int = DEFAULT_MAX_DEPTH,
        max_negatives: int = 8192,
        held_limit: int = 8192,
        tool_timeout: float | None = None,
        tool_workers: int = 8,
        held: HeldStore | None = None,
        rate_limiter: Callable[[RateLimit], RateLimiter] = RateLimiter,
        approval_nonces: NonceStore | None = None,
        grounding: GroundingStore | None = None,
        confidential: ConfidentialStore | None = None,
    ) -> None:
        self.kinds = KindRegistry()
        self.reasons = ReasonRegistry()
        self.schemas = SchemaRegistry()
        self.sources = SourceRegistry()
        #: Sink class names a policy for this kernel may use (load with ``sinks=``).
        self.sink_classes = SinkClassRegistry()
        self.ledger: TaintLedger = ledger if ledger is not None else MemoryLedger()
        #: Held results; a shared store (``held``) lets several replicas hold for each other.
        self.held = held if held is not None else HeldStore(held_limit)
        #: Builds the policy's rate limiter (a shared one keeps its windows in a shared store).
        self._rate_limiter_factory = rate_limiter
        #: Where spent approval nonces are kept (shared by replicas); None: in this process.
        self._approval_nonces = approval_nonces
        self.counters = Counters()
        self.max_args_bytes = max_args_bytes
        self.max_depth = max_depth
        if tool_timeout is not None and not 0 < tool_timeout < float("inf"):
            raise ValueError(
                f"tool_timeout must be a positive number of seconds, not {tool_timeout}"
            )
        #: Seconds a tool may run under :meth:`syscall` before it is an ERROR (None: no limit).
        self.tool_timeout = tool_timeout
        self._tool_pool = DeadlinePool(tool_workers, "fak-tool")
        self._lock = threading.RLock()
        self._seq = itertools.count(1)
        self._tools: dict[str, Tool] = {}
        self._host_sources: dict[str, Source] = {}
        self._host_schemas: dict[str, Mapping[str, Any] | bool] = {}
        self._policy_schemas: set[str] = set()
        self._adjudicators: list[Registration] = []
        self._admitters: list[Registration] = []
        self._witnesses: list[tuple[str, WitnessResolver]] = []
        self._subscribers: tuple[Subscriber, ...] = ()
        self._dispatch_gates: tuple[DispatchGate, ...] = ()
        self._chains: dict[str, tuple[Adjudicator, ...]] = {}
        self._default_chain: tuple[Adjudicator, ...] = ()
        self._result_chains: dict[str, tuple[ResultAdmitter, ...]] = {}
        self._default_result_chain: tuple[ResultAdmitter, ...] = ()
        self.policy = policy if policy is not None else default_policy()
        self.ladder = Ladder(
            self.schemas,
            require_schema=require_schema,
            max_negatives=max_negatives,
            reasons=self.reasons,
        )
        #: Per-session trusted context and untrusted content (destination grounding); a
        #: shared store (``grounding``) lets several replicas ground for each other.
        self.grounding = grounding if grounding is not None else GroundingStore()
        #: Per-session confidential values a tainted session's sinks may not carry.
        self.confidential = confidential if confidential is not None else ConfidentialStore()
        self._grounds_results = _grounds(self.policy)
        self._recorders = self._recorders_for(self.policy)
        self.sink_gate = SinkGate(self.ledger, self.policy, self.grounding, self.confidential)
        self.floor = CapabilityFloor(self.policy, self.reasons)
        self.rules = RuleGate(self.ledger, self.policy.rules, self.reasons)
        self._host_screen: ScreenConfig | None = None
        self.screen = ResultScreen(
            self.policy.secret_patterns, config=self.policy.screen, minted=self.held.minted
        )
        self.rate_limiter: RateLimiter | None = None
        self._builtin = builtin_chain
        if builtin_chain:
            self.add_adjudicator(self.ladder, PREFLIGHT_RANK, name="preflight")
            self.add_adjudicator(self.sink_gate, SINK_GATE_RANK, name="ifc-sink")
            self.add_adjudicator(self.floor, FLOOR_RANK, name="floor")
            self.add_admitter(self.screen, SCREEN_RANK, name="result-screen")
        self._apply_policy_tables(self.policy)

    # ------------------------------------------------------------------ configuration
    def set_policy(self, policy: Policy) -> None:
        """Swap the policy the floor, sink gate, screen, sources and schemas use."""
        with self._lock:
            self.floor.set_policy(policy)
            self.sink_gate.set_policy(policy)
            self.rules.set_rules(policy.rules)
            self._grounds_results = _grounds(policy)
            self._recorders = self._recorders_for(policy)
            self.screen.set_patterns(policy.secret_patterns)
            self.screen.configure(policy.screen or self._host_screen or ScreenConfig())
            self.policy = policy
            self._apply_policy_tables(policy)

    def configure_screen(self, config: ScreenConfig) -> None:
        """Set the result screen's markers and page-out sizes from the host; a policy with
        a ``screen`` table overrides them while it is the running policy."""
        with self._lock:
            self._host_screen = config
            self.screen.configure(self.policy.screen or config)

    def _apply_rate_limit(self, policy: Policy) -> None:
        with self._lock:
            old = self.rate_limiter
            if old is not None and (policy.rate_limit is None or old.limit != policy.rate_limit):
                self._adjudicators = [r for r in self._adjudicators if r.impl is not old]
                self._default_chain, self._chains = self._build(self._adjudicators)
                self.rate_limiter = None
            if policy.rate_limit is not None and self.rate_limiter is None and self._builtin:
                self.rate_limiter = self._rate_limiter_factory(policy.rate_limit)
                self.add_adjudicator(self.rate_limiter, RATE_LIMIT_RANK, name="rate-limit")

    def _apply_rules(self, policy: Policy) -> None:
        """The argument rules' gate is in the chain exactly while the policy has rules (an
        empty gate has no opinion on any call; leaving it out saves a step per decision)."""
        with self._lock:
            chained = any(r.impl is self.rules for r in self._adjudicators)
            if chained and not policy.rules:
                self._adjudicators = [r for r in self._adjudicators if r.impl is not self.rules]
                self._default_chain, self._chains = self._build(self._adjudicators)
            elif policy.rules and not chained and self._builtin:
                self.add_adjudicator(self.rules, RULES_RANK, name="rules")

    def _apply_policy_tables(self, policy: Policy) -> None:
        """Make sources and schemas exactly: host registrations, overridden by the policy."""
        self._apply_rate_limit(policy)
        self._apply_rules(policy)
        sources = SourceRegistry()
        for tool, src in self._host_sources.items():
            sources.register(tool, src)
        for tool, name in policy.sources.items():
            sources.register(tool, name)
        self.sources = sources
        for tool in self._policy_schemas - set(policy.schemas):
            if tool in self._host_schemas:
                self.schemas.register(tool, self._host_schemas[tool])
            else:
                self.schemas.remove(tool)
        for tool, schema in policy.schemas.items():
            self.schemas.register(tool, schema)
        self._policy_schemas = set(policy.schemas)

    def register_schema(self, tool: str, schema: Mapping[str, Any] | bool) -> None:
        """Set the tool's rung-1 schema (checked and compiled now; an invalid one raises)."""
        self.schemas.register(tool, schema)
        self._host_schemas[tool] = schema

    def register_tool(
        self,
        name: str,
        fn: Tool,
        *,
        schema: Mapping[str, Any] | bool | None = None,
        source: Source | str = Source.UNTRUSTED,
    ) -> None:
        """Make ``fn(args: dict)`` runnable by :meth:`syscall` under ``name``."""
        if not callable(fn):
            raise TypeError(f"tool {name!r} must be callable")
        if schema is not None:
            self.register_schema(name, schema)
        self._host_sources[name] = Source(source)
        if name not in self.policy.sources:
            self.sources.register(name, source)
        self._tools[name] = fn

    def tools(self) -> list[str]:
        return sorted(self._tools)

    def add_rung(self, rung: Rung) -> None:
        self.ladder.add_rung(rung)

    def add_adjudicator(
        self,
        adjudicator: Adjudicator | Callable[[CallView], Verdict],
        rank: int,
        *,
        tools: Iterable[str] | None = None,
        name: str = "",
    ) -> None:
        """Add to the pre-call chain; lower ranks run first; ``tools`` scopes it."""
        reg = Registration(rank, as_adjudicator(adjudicator), Registration.scope(tools), name)
        with self._lock:
            self._adjudicators.append(reg)
            self._adjudicators.sort(key=lambda r: r.rank)
            self._default_chain, self._chains = self._build(self._adjudicators)

    def add_admitter(
        self,
        admitter: ResultAdmitter | Callable[[ToolCall, Result], Verdict],
        rank: int,
        *,
        tools: Iterable[str] | None = None,
        name: str = "",
    ) -> None:
        """Add to the result-side chain; ``tools`` scopes it."""
        reg = Registration(rank, as_admitter(admitter), Registration.scope(tools), name)
        with self._lock:
            self._admitters.append(reg)
            self._admitters.sort(key=lambda r: r.rank)
            self._default_result_chain, self._result_chains = self._build(self._admitters)

    def add_witness_resolver(self, resolver_id: str, resolver: WitnessResolver) -> None:
        """Resolvers are consulted in id order; the first CONFIRMED allows."""
        with self._lock:
            self._witnesses.append((resolver_id, resolver))
            self._witnesses.sort(key=lambda t: t[0])

    def register_kind(
        self, code: int, name: str, rank: int, fallback: VerdictKind = VerdictKind.DENY
    ) -> int:
        return self.kinds.register(code, name, rank, fallback)

    def enable_approvals(self, key: bytes | None = None) -> bool:
        """Accept signed approval tokens (:mod:`fak_core.approvals`) for calls the policy
        sends to a human; the key defaults to ``FAK_APPROVAL_KEY``. False when no key."""
        from fak_core.approvals import ApprovalResolver, approval_key_from_env

        key = key if key is not None else approval_key_from_env()
        if key is None:
            return False
        self.add_witness_resolver("approval", ApprovalResolver(key, nonces=self._approval_nonces))
        return True

    def register_sink_class(self, name: str) -> str:
        """Add a sink class; load policies naming it with
        ``load_policy(..., sinks=kernel.sink_classes)``."""
        return self.sink_classes.register(name)

    def register_reason(
        self, code: int, name: str, disposition: Disposition = Disposition.TERMINAL
    ) -> int:
        return self.reasons.register(code, name, disposition)

    def subscribe(self, subscriber: Subscriber) -> Callable[[], None]:
        """Receive every :class:`Event`; returns a function that unsubscribes."""
        with self._lock:
            self._subscribers = (*self._subscribers, subscriber)

        def unsubscribe() -> None:
            with self._lock:
                self._subscribers = tuple(s for s in self._subscribers if s is not subscriber)

        return unsubscribe

    def add_dispatch_gate(self, gate: DispatchGate) -> None:
        """Run ``gate(call, verdict)`` before every tool :meth:`syscall` (or
        :meth:`run_authorized`) would run: None lets the tool run; a verdict (or an
        exception) refuses it, and the call is answered with that refusal, a DENY."""
        with self._lock:
            self._dispatch_gates = (*self._dispatch_gates, gate)

    @staticmethod
    def _build(regs: list[Registration]) -> tuple[tuple[Any, ...], dict[str, tuple[Any, ...]]]:
        default = tuple(r.impl for r in regs if r.tools is None)
        scoped_tools = set().union(*(r.tools for r in regs if r.tools is not None))
        chains = {
            t: tuple(r.impl for r in regs if r.tools is None or t in r.tools) for t in scoped_tools
        }
        return default, chains

    def decides_without_waiting(self) -> bool:
        """True when every part :meth:`decide` may run is declared
        :func:`~fak_core.nonblocking.nonblocking`: each adjudicator (any scope), each
        preflight rung and the ladder's probe, each subscriber, the taint ledger and the
        grounding store. A host that registers an undeclared part makes this False (the gateway then
        decides on a worker thread under its deadline)."""
        ladder = self.ladder
        parts: list[Any] = [r.impl for r in self._adjudicators]
        parts += ladder.rungs
        parts += self._subscribers
        parts.append(self.ledger)
        parts.append(self.grounding)
        if ladder.probe is not None:
            parts.append(ladder.probe)
        return all(is_nonblocking(p) for p in parts)

    def chain_for(self, tool: str) -> tuple[Adjudicator, ...]:
        """The adjudicators folded for ``tool``, in rank order."""
        return self._chains.get(tool, self._default_chain)

    # ------------------------------------------------------------------ decisions
    def _emit(
        self,
        kind: EventKind,
        call: ToolCall,
        verdict: Verdict | None = None,
        result: Result | None = None,
        elapsed_ns: int = 0,
    ) -> None:
        event = Event(kind, call, verdict, result, elapsed_ns)
        for sub in self._subscribers:
            try:
                sub(event)
            except Exception:
                self.counters.subscriber_errors += 1

    def view(self, call: ToolCall) -> CallView:
        return CallView(call, self.max_args_bytes, self.max_depth)

    def decide(self, call: ToolCall) -> Verdict:
        """Fold the chain over ``call``; the raw verdict (REQUIRE_WITNESS unresolved).

        The adjudicators that asked (``CallView.on_settle``) are told whether the raw
        verdict lets the call run: ALLOW, TRANSFORM, an extension kind whose fallback is
        ALLOW, or a REQUIRE_WITNESS whose other opinions would run once it is confirmed.
        """
        view = CallView(call, self.max_args_bytes, self.max_depth)
        v = self._decide(call, view)
        if view._settle is not None:
            kind = v.kind
            if kind == _WITNESS:
                after = view.witnessed.after if view.witnessed is not None else None
                kind = _ALLOW if after is None else after.kind
            view.settle(self._runs(kind))
        return v

    def _runs(self, kind: int) -> bool:
        """Whether a settled verdict of ``kind`` runs the tool (D1.2)."""
        if kind >= EXTENSION_KIND_MIN:
            kind = self.kinds.fallback(kind)
        return kind in (_ALLOW, _TRANSFORM)

    def _decide(self, call: ToolCall, view: CallView) -> Verdict:
        """The fold over a fresh ``view`` of ``call``, counted and announced; on a
        REQUIRE_WITNESS the fold leaves its :class:`~fak_core.fold.Witnessed` (what stands
        once its claims are confirmed) on ``view.witnessed``. The view is not settled
        here: :meth:`decide` and :meth:`authorize` settle it with what they conclude."""
        start = time.perf_counter_ns()
        v = fold(self._chains.get(call.tool, self._default_chain), view, self.kinds)
        elapsed = time.perf_counter_ns() - start
        c = self.counters
        c.decisions += 1
        c.decide_ns += elapsed
        if v.kind == _DENY:
            c.denies += 1
        if self._subscribers:
            self._emit(EventKind.DECIDE, call, v, elapsed_ns=elapsed)
            if v.kind == _DENY:
                self._emit(EventKind.DENY, call, v)
        return v

    def resolve_witness(
        self, call: ToolCall, verdict: Verdict, witnessed: Witnessed | None = None
    ) -> Verdict:
        """Settle a REQUIRE_WITNESS: DENY unless a resolver confirms every claim, and then
        the fold of the other opinions (``witnessed.after``; ALLOW by ``witness`` when none
        is above ALLOW), never less restrictive than that fold (D8.1)."""
        opinions = (verdict,) if witnessed is None else witnessed.opinions
        meta: dict[str, str] = {}
        for claim in dict.fromkeys(o.claim for o in opinions):  # each distinct claim, in order
            answer = self._resolve_claim(call, claim)
            if isinstance(answer, Verdict):
                return answer
            meta = meta or {"witness": "confirmed", "resolver": answer, "claim": claim}
        after = None if witnessed is None else witnessed.after
        if after is None:
            return Verdict.allow("witness", meta=meta)
        # the other opinion's own metadata stays as it is; the witness is noted beside it
        noted = {"witness": "confirmed", "witness_resolver": meta["resolver"]}
        return after._replace(
            meta=frozen_meta({**after.meta, **noted, "witness_claim": meta["claim"]})
        )

    def _settle_witness(
        self, call: ToolCall, verdict: Verdict, witnessed: Witnessed | None
    ) -> Verdict:
        """Resolve the decision's REQUIRE_WITNESS and tell the subscribers what it settled
        to (a WITNESS event: the journal's row of it, C1.5)."""
        settled = self.resolve_witness(call, verdict, witnessed)
        if self._subscribers:
            self._emit(EventKind.WITNESS, call, settled)
        return settled

    def _resolve_claim(self, call: ToolCall, claim: str) -> str | Verdict:
        """The id of the first resolver (in id order) that confirms ``claim``, or the DENY."""
        refuted = False
        for rid, resolver in tuple(self._witnesses):
            try:
                outcome = resolver.resolve(call, claim)
            except Exception as exc:
                # a resolver that could not reach its state (a shared nonce store that is
                # down) refuses with that reason; any other crash is no confirmation
                reason = getattr(exc, "deny_reason", None)
                if isinstance(reason, int):
                    # a refutation with its reason (a stale approval) says so
                    said = getattr(exc, "witness", "error")
                    meta = {"witness": said if said == "refuted" else "error", "claim": claim}
                    return Verdict.deny(reason, "witness", claim=str(exc), meta=meta)
                outcome = WitnessOutcome.ABSTAIN
            if outcome == WitnessOutcome.CONFIRMED:
                return rid
            if outcome == WitnessOutcome.REFUTED:
                refuted = True
        if refuted:
            return Verdict.deny(
                Reason.TRUST_VIOLATION, "witness", meta={"witness": "refuted", "claim": claim}
            )
        return Verdict.deny(
            Reason.UNWITNESSED, "witness", meta={"witness": "unwitnessed", "claim": claim}
        )

    def deny_result(self, verdict: Verdict) -> Result:
        """A refusal as a value: status ERROR, the verdict's reason, disposition and ``by``."""
        reason = verdict.reason if verdict.reason != Reason.NONE else Reason.DEFAULT_DENY
        disposition = self.reasons.disposition(reason)
        meta = {
            "verdict": "deny",
            "kind": self.kinds.name(verdict.kind),
            "reason": self.reasons.name(reason),
            "disposition": disposition.value,
            "by": verdict.by,
        }
        if verdict.claim:
            meta["claim"] = verdict.claim
        if disposition is Disposition.WAIT:
            for key in ("retry_after", "retry_after_ms"):
                if key in verdict.meta:
                    meta[key] = verdict.meta[key]
        return Result(Status.ERROR, "", frozen_meta(meta))

    def authorize(self, call: ToolCall) -> tuple[ToolCall, Verdict, bool]:
        """The pre-dispatch half of :meth:`syscall`, for a host that runs the tool itself.

        Numbers the call, decides, resolves a REQUIRE_WITNESS and applies a TRANSFORM, with
        the same events and counters as :meth:`syscall`. Returns the call to run (repaired
        arguments on TRANSFORM), the final verdict, and whether the call may run at all;
        when it may not, :meth:`deny_result` is the refusal to hand back.
        """
        if call.seq == 0:
            call = call.with_seq(next(self._seq))
        self.counters.submits += 1
        if self._subscribers:
            self._emit(EventKind.SUBMIT, call)
        view = CallView(call, self.max_args_bytes, self.max_depth)
        verdict = self._decide(call, view)
        witnessed = view.witnessed  # set by the fold only on a REQUIRE_WITNESS
        kind = verdict.kind
        if kind == _WITNESS:
            verdict = self._settle_witness(call, verdict, witnessed)
            kind = verdict.kind
            if kind == _DENY:
                self.counters.denies += 1
                if self._subscribers:
                    self._emit(EventKind.DENY, call, verdict)
        if kind >= EXTENSION_KIND_MIN and self.kinds.fallback(kind) == _ALLOW:
            kind = _ALLOW  # a registered extension kind that declared ALLOW as its fallback
        view.settle(kind in (_ALLOW, _TRANSFORM))  # after the witness: what runs
        if kind == _TRANSFORM:
            self.counters.transforms += 1
            return call.with_args(verdict.repaired_args or "{}"), verdict, True
        if kind != _ALLOW:
            if verdict.kind != _DENY:  # held: QUARANTINE, DEFER, INDETERMINATE, unknown kinds
                self.counters.denies += 1
                if self._subscribers:
                    self._emit(EventKind.DENY, call, verdict)
            return call, verdict, False
        return call, verdict, True

    def syscall(self, call: ToolCall) -> tuple[Result, Verdict]:
        """Decide, then run the tool only if allowed, then admit its result."""
        call, verdict, runnable = self.authorize(call)
        if not runnable:
            return self.deny_result(verdict), verdict
        return self.run_authorized(call, verdict)

    def run_authorized(self, call: ToolCall, verdict: Verdict) -> tuple[Result, Verdict]:
        """The post-dispatch half of :meth:`syscall`: run the tool of a call that
        :meth:`authorize` let run (with the call it returned) and admit the result.

        Only for a host that authorized first (e.g. under its own deadline); an unknown tool
        is an UNKNOWN_TOOL refusal.
        """
        fn = self._tools.get(call.tool)
        if fn is None:
            unknown = Verdict.deny(
                Reason.UNKNOWN_TOOL, "kernel", claim=f"no tool named {call.tool!r} is registered"
            )
            return self.deny_result(unknown), unknown
        refusal = self._dispatch_refusal(call, verdict)
        if refusal is not None:
            return self.deny_result(refusal), refusal
        result = self._run(call, fn)
        admitted, _ = self.admit(call, result)
        return admitted, verdict

    def _dispatch_refusal(self, call: ToolCall, verdict: Verdict) -> Verdict | None:
        """The first dispatch gate's refusal (as a DENY), or None: the tool may run."""
        for gate in self._dispatch_gates:
            try:
                refusal = gate(call, verdict)
            except Exception as exc:
                claim = f"a dispatch gate raised {type(exc).__name__}: {exc}"[:512]
                refusal = Verdict.deny(Reason.DEFAULT_DENY, "kernel", claim=claim)
            if refusal is None:
                continue
            if refusal.kind != _DENY:
                refusal = Verdict.deny(
                    refusal.reason or Reason.DEFAULT_DENY, refusal.by, claim=refusal.claim
                )
            self.counters.denies += 1
            if self._subscribers:
                self._emit(EventKind.DENY, call, refusal)
            return refusal
        return None

    def _run(self, call: ToolCall, fn: Tool) -> Result:
        self.counters.dispatches += 1
        if self._subscribers:
            self._emit(EventKind.DISPATCH, call)
        start = time.perf_counter_ns()
        args = self.view(call).args() or {}
        timeout = self.tool_timeout
        own: list[BaseException] = []  # a DeadlineExceeded the tool raised itself
        try:
            if timeout is None:
                out = fn(args)
            else:
                out = self._tool_pool.run(_noting(fn, own), args, timeout=timeout)
        except Exception as exc:
            # the pool's deadline, not a DeadlineExceeded the tool raised itself
            if isinstance(exc, DeadlineExceeded) and timeout is not None and exc not in own:
                self.counters.tool_timeouts += 1
                msg = f"tool {call.tool!r} timed out after {timeout:g}s"
            else:
                self.counters.tool_errors += 1
                msg = f"tool {call.tool!r} raised {type(exc).__name__}: {exc}"[:512]
            result = Result(Status.ERROR, "", frozen_meta({"error": msg}))
        else:
            result = Result(Status.OK, _payload(out), taint=Taint.TRUSTED)
        if self._subscribers:
            self._emit(
                EventKind.COMPLETE, call, result=result, elapsed_ns=time.perf_counter_ns() - start
            )
        return result

    @property
    def stuck_tools(self) -> int:
        """Tools that outlived ``tool_timeout`` and are still running (each holds a worker)."""
        return self._tool_pool.stuck

    def close(self) -> None:
        """Stop the idle tool workers (stuck ones stop when their tool returns)."""
        self._tool_pool.close()

    def screen_text(self, call: ToolCall, result: Result) -> Verdict:
        """The result-side chain's folded verdict on ``result``, with no effect at all (no
        taint raised, nothing held, no event): for text that is screened but is not a
        session's result, such as a tool's listed metadata."""
        chain = self._result_chains.get(call.tool, self._default_result_chain)
        return fold_results(chain, call, result, self.kinds)

    def admit(self, call: ToolCall, result: Result | None) -> tuple[Result, Verdict]:
        """Run the result-side chain, apply its verdict, raise the trace's taint mark."""
        if result is None:
            result = Result(Status.OK, "")
        chain = self._result_chains.get(call.tool, self._default_result_chain)
        v, witnessed = fold_results_witnessed(chain, call, result, self.kinds)
        kind = v.kind
        if kind == _WITNESS:
            v = self.resolve_witness(call, v, witnessed)
            kind = v.kind
        if kind == _DENY:
            self.counters.result_denies += 1
            denied = self.deny_result(v)
            denied = denied._replace(meta=frozen_meta({**denied.meta, "admit": "denied"}))
            self.ledger.raise_to(call.trace_id, Taint.QUARANTINED)
            if self._subscribers:
                self._emit(EventKind.RESULT_DENY, call, v, denied)
            return denied, v
        quarantined = kind != _ALLOW and kind != _TRANSFORM
        if quarantined:
            self.counters.quarantines += 1
            payload = result.payload
            reason = self.reasons.name(v.reason if v.reason else Reason.TRUST_VIOLATION)
            size = len(payload)
            # the store remembers the stub it issues, so only this exact text can pass
            # for the kernel's own output when it is admitted again
            qid = self.held.hold(payload, stub=lambda k: quarantine_stub(k, reason, size))
            meta = {**result.meta, "admit": "quarantined", "quarantine_id": qid, "reason": reason}
            result = Result(
                result.status,
                quarantine_stub(qid, reason, size),
                frozen_meta(meta),
                Taint.QUARANTINED,
            )
            if kind != _QUARANTINE:  # an INDETERMINATE or unknown opinion is held the same way
                v = Verdict.quarantine(v.reason or Reason.TRUST_VIOLATION, v.by, meta=v.meta)
        elif kind == _TRANSFORM:
            new_payload = v.repaired_args or ""
            ref = v.meta.get("paged")
            if ref:
                self.held.hold(result.payload, ref, stub=lambda _ref: new_payload)
            result = result._replace(
                payload=new_payload, meta=frozen_meta({**result.meta, "admit": "transformed"})
            )
            self.counters.admitted += 1
        else:
            self.counters.admitted += 1
        taint = self.sources.result_taint(call, result, quarantined)
        self.ledger.raise_to(call.trace_id, taint)
        for record in self._recorders:  # what the sink gate reads of it, if any
            record(call, result, taint, quarantined)
        if self._subscribers:
            self._emit(EventKind.QUARANTINE if quarantined else EventKind.ADMIT, call, v, result)
        return (result._replace(taint=taint) if result.taint != taint else result), v

    def _recorders_for(self, policy: Policy) -> tuple[Callable[..., None], ...]:
        """What :meth:`admit` keeps of each result for the sink gate: nothing unless a
        declared tool has destinations or content (the only readers of what is kept)."""
        if not _grounds(policy):
            return ()
        return (self._record_words, self._record_identifiers, self._record_confidential)

    def _record_words(
        self, call: ToolCall, result: Result, taint: Taint, quarantined: bool
    ) -> None:
        """An admitted result's text (C4.6): trusted context when its admitted taint is
        TRUSTED, else untrusted content kept only to name its origin; a quarantined result
        is not content the session admitted."""
        if quarantined:
            return
        if taint == Taint.TRUSTED:
            self.grounding.record_trusted(call.trace_id, result.payload, "tool:" + call.tool)
        else:
            self.grounding.record_untrusted(call.trace_id, result.payload, call.tool)

    def _record_identifiers(
        self, call: ToolCall, result: Result, taint: Taint, quarantined: bool
    ) -> None:
        """The values at the tool's declared ``identifiers`` in an admitted OK result (C4.9)."""
        if quarantined or result.status != Status.OK:
            return
        decl = self.policy.tools.get(call.tool)
        if decl is not None and decl.identifiers:
            found = identifier_values(result.payload, decl.identifiers)
            self.grounding.record_identifiers(call.trace_id, found, call.tool)

    def _record_confidential(
        self, call: ToolCall, result: Result, taint: Taint, quarantined: bool
    ) -> None:
        """The values at the tool's declared ``confidential`` pointers in an admitted OK
        result (C4.10), and whether the reading saw all of them."""
        if quarantined or result.status != Status.OK:
            return
        decl = self.policy.tools.get(call.tool)
        if decl is not None and decl.confidential:
            found = identifier_values(result.payload, decl.confidential)
            # a reading stopped at a bound may have missed a value: fail closed
            whole = len(result.payload) <= MAX_RESULT_CHARS and len(found) < MAX_IDENTIFIERS
            self.confidential.record(call.trace_id, found, call.tool, whole)

    # ------------------------------------------------------------------ sessions
    def taint(self, trace_id: str) -> Taint:
        return self.ledger.level(trace_id)

    def reset_trace(self, trace_id: str) -> None:
        self.ledger.reset(trace_id)
        self.grounding.reset(trace_id)
        self.confidential.reset(trace_id)

    @property
    def grounds_destinations(self) -> bool:
        """Whether the running policy declares destinations to ground (policy v2)."""
        return self._grounds_results

    def record_trusted(self, trace_id: str, text: str, origin: str = "user") -> None:
        """Record the user's (or the system's) own words for the session: destinations
        that appear in them are grounded (:mod:`fak_core.grounding`). Only the host may
        call this, with text the model did not write; it never lowers the taint mark."""
        self.grounding.record_trusted(trace_id, text, _host_origin(origin))

    def record_trusted_many(self, trace_id: str, items: list[tuple[str, str]]) -> None:
        """:meth:`record_trusted` for each ``(origin, text)``, in order (one round trip
        with a shared store)."""
        self.grounding.record_trusted_many(trace_id, [(_host_origin(o), t) for o, t in items])


def _host_origin(origin: str) -> str:
    """The store's label of a text the host records: apart from every label the kernel
    gives a trusted tool's result (``tool:<name>``), so no text the host recorded, under
    any label, stands for a tool's result (each is a record of its own, C4.6)."""
    return "host:" + origin


def _grounds(policy: Policy) -> bool:
    """Whether any declared tool has destinations (then results are kept for grounding)."""
    return any(d.destinations or d.content for d in policy.tools.values())


def _payload(out: Any) -> str:
    if isinstance(out, str):
        return out
    if isinstance(out, bytes):
        return out.decode("utf-8", "replace")
    try:
        return dumps(out).decode("utf-8")
    except TypeError:  # not JSON data at all: its text
        return str(out)
