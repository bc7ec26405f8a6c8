"""fak_core: the tool-call adjudication kernel.

An agent proposes a tool call; the kernel decides, before anything runs, whether it may:
a cheapest-first preflight ladder, adjudicators folded most-restrictive-wins, a
default-deny capability floor, and information-flow taint that keeps untrusted data
away from egress. Build a :class:`Kernel`, then ``decide``, ``syscall`` or ``admit``.
"""

from fak_core.adjudicators import (
    Adjudicator,
    Registration,
    ResultAdmitter,
    WitnessOutcome,
    WitnessResolver,
)
from fak_core.admission import HeldStore, ResultScreen, ScreenConfig, ToolScreen
from fak_core.approvals import (
    ApprovalResolver,
    MemoryNonces,
    NonceStore,
    StaleApproval,
    mint_approval,
)
from fak_core.calls import Result, Status, ToolCall
from fak_core.deadline import DeadlineExceeded, DeadlinePool
from fak_core.events import Counters, Event, EventKind
from fak_core.floor import CapabilityFloor
from fak_core.fold import fold, fold_results
from fak_core.grounding import GroundingStore, canonical_value
from fak_core.hosts import Host, HostDenyList, HostError, canonical_host, destination_hosts
from fak_core.journal import Journal, JournalError, request_scope, verify_chains, verify_files
from fak_core.jsonargs import ArgsError, parse_args
from fak_core.kernel import (
    FLOOR_RANK,
    PREFLIGHT_RANK,
    SCREEN_RANK,
    SINK_GATE_RANK,
    DispatchGate,
    Kernel,
)
from fak_core.ledger import MemoryLedger, TaintLedger
from fak_core.nonblocking import is_nonblocking, nonblocking
from fak_core.policy import (
    ArgRule,
    AuthorizeRule,
    Policy,
    PolicyError,
    ToolDecl,
    default_policy,
    dump_policy,
    load_policy,
    parse_policy,
    policy_digest,
)
from fak_core.preflight import Catch, CatchRate, Ladder, NegativeRow, NegativesLedger, Rung
from fak_core.provenance import Source, SourceRegistry
from fak_core.reasons import Disposition, Reason, ReasonRegistry
from fak_core.rules import ArgumentRule, RuleGate
from fak_core.schemas import InvalidSchemaError, SchemaRegistry, compile_schema
from fak_core.sinkclasses import SinkClassRegistry
from fak_core.sinks import Sink, SinkGate, classify, guess_warning, guessed_sinks, sink_class
from fak_core.statedown import STATE_DOWN, StateUnavailable
from fak_core.taint import Taint
from fak_core.verdicts import (
    KindRegistry,
    QuarantinePayload,
    TransformPayload,
    Verdict,
    VerdictKind,
    WitnessPayload,
)
from fak_core.view import CallView

__version__ = "0.1.0"

__all__ = [
    "FLOOR_RANK",
    "PREFLIGHT_RANK",
    "SCREEN_RANK",
    "SINK_GATE_RANK",
    "STATE_DOWN",
    "Adjudicator",
    "ApprovalResolver",
    "ArgRule",
    "ArgumentRule",
    "ArgsError",
    "AuthorizeRule",
    "CallView",
    "CapabilityFloor",
    "Catch",
    "CatchRate",
    "Counters",
    "DeadlineExceeded",
    "DeadlinePool",
    "DispatchGate",
    "Disposition",
    "Event",
    "EventKind",
    "GroundingStore",
    "HeldStore",
    "Host",
    "HostDenyList",
    "HostError",
    "InvalidSchemaError",
    "Journal",
    "JournalError",
    "Kernel",
    "KindRegistry",
    "Ladder",
    "MemoryLedger",
    "MemoryNonces",
    "NegativeRow",
    "NegativesLedger",
    "NonceStore",
    "Policy",
    "PolicyError",
    "QuarantinePayload",
    "Reason",
    "ReasonRegistry",
    "Registration",
    "Result",
    "ResultAdmitter",
    "ResultScreen",
    "RuleGate",
    "Rung",
    "SchemaRegistry",
    "ScreenConfig",
    "Sink",
    "SinkClassRegistry",
    "SinkGate",
    "Source",
    "SourceRegistry",
    "StaleApproval",
    "StateUnavailable",
    "Status",
    "Taint",
    "TaintLedger",
    "ToolCall",
    "ToolDecl",
    "ToolScreen",
    "TransformPayload",
    "Verdict",
    "VerdictKind",
    "WitnessOutcome",
    "WitnessPayload",
    "WitnessResolver",
    "__version__",
    "canonical_host",
    "canonical_value",
    "classify",
    "compile_schema",
    "default_policy",
    "destination_hosts",
    "dump_policy",
    "fold",
    "fold_results",
    "guess_warning",
    "guessed_sinks",
    "is_nonblocking",
    "load_policy",
    "mint_approval",
    "nonblocking",
    "parse_args",
    "parse_policy",
    "policy_digest",
    "request_scope",
    "sink_class",
    "verify_chains",
    "verify_files",
]
