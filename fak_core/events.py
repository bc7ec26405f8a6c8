"""Kernel events and counters: what happened to each call, and how long deciding took."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass
from enum import StrEnum

from fak_core.calls import Result, ToolCall
from fak_core.verdicts import Verdict

__all__ = ["Counters", "Event", "EventKind", "Subscriber"]


class EventKind(StrEnum):
    SUBMIT = "submit"
    DECIDE = "decide"
    DENY = "deny"
    DISPATCH = "dispatch"
    COMPLETE = "complete"
    QUARANTINE = "quarantine"
    RESULT_DENY = "result_deny"
    ADMIT = "admit"
    #: A REQUIRE_WITNESS settled by the resolvers: the verdict the call is answered with.
    WITNESS = "witness"


@dataclass(frozen=True, slots=True)
class Event:
    """One kernel event. ``elapsed_ns`` is the decision (or tool run) time, else 0."""

    kind: EventKind
    call: ToolCall
    verdict: Verdict | None = None
    result: Result | None = None
    elapsed_ns: int = 0


Subscriber = Callable[[Event], None]


@dataclass(slots=True)
class Counters:
    """Lifetime counts for one kernel (approximate only under free-threaded Python)."""

    submits: int = 0
    decisions: int = 0
    denies: int = 0
    transforms: int = 0
    dispatches: int = 0
    tool_errors: int = 0
    tool_timeouts: int = 0
    admitted: int = 0
    quarantines: int = 0
    result_denies: int = 0
    subscriber_errors: int = 0
    decide_ns: int = 0

    def as_dict(self) -> dict[str, int]:
        return asdict(self)
