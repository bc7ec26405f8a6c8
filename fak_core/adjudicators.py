"""The adjudicator, result-admitter and witness-resolver interfaces, and their registration."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from enum import IntEnum
from typing import Protocol, runtime_checkable

from fak_core.calls import Result, ToolCall
from fak_core.verdicts import Verdict
from fak_core.view import CallView

__all__ = [
    "Adjudicator",
    "FunctionAdjudicator",
    "FunctionAdmitter",
    "Registration",
    "ResultAdmitter",
    "WitnessOutcome",
    "WitnessResolver",
    "as_adjudicator",
    "as_admitter",
]


@runtime_checkable
class Adjudicator(Protocol):
    """Decides one call before it runs. DEFER means "no opinion"."""

    def adjudicate(self, view: CallView) -> Verdict: ...


@runtime_checkable
class ResultAdmitter(Protocol):
    """Decides whether a tool result may enter the agent's context, and in what form."""

    def admit(self, call: ToolCall, result: Result) -> Verdict: ...


class WitnessOutcome(IntEnum):
    ABSTAIN = 0
    CONFIRMED = 1
    REFUTED = 2


@runtime_checkable
class WitnessResolver(Protocol):
    """Corroborates (or refutes) the claim of a REQUIRE_WITNESS verdict."""

    def resolve(self, call: ToolCall, claim: str) -> WitnessOutcome: ...


@dataclass(frozen=True, slots=True)
class FunctionAdjudicator:
    """Wraps a plain function ``view -> Verdict`` as an adjudicator."""

    fn: Callable[[CallView], Verdict]

    def adjudicate(self, view: CallView) -> Verdict:
        return self.fn(view)


@dataclass(frozen=True, slots=True)
class FunctionAdmitter:
    """Wraps a plain function ``(call, result) -> Verdict`` as a result admitter."""

    fn: Callable[[ToolCall, Result], Verdict]

    def admit(self, call: ToolCall, result: Result) -> Verdict:
        return self.fn(call, result)


def as_adjudicator(obj: Adjudicator | Callable[[CallView], Verdict]) -> Adjudicator:
    if isinstance(obj, Adjudicator):
        return obj
    if callable(obj):
        return FunctionAdjudicator(obj)
    raise TypeError(f"{obj!r} is neither an adjudicator nor a function view -> Verdict")


def as_admitter(obj: ResultAdmitter | Callable[[ToolCall, Result], Verdict]) -> ResultAdmitter:
    if isinstance(obj, ResultAdmitter):
        return obj
    if callable(obj):
        return FunctionAdmitter(obj)
    raise TypeError(
        f"{obj!r} is neither a result admitter nor a function (call, result) -> Verdict"
    )


@dataclass(frozen=True, slots=True)
class Registration:
    """An adjudicator or admitter with its rank (lower runs first) and optional tool scope.

    A scoped registration is consulted only for the tools it names.
    """

    rank: int
    impl: object
    tools: frozenset[str] | None = None
    name: str = ""

    @staticmethod
    def scope(tools: Iterable[str] | None) -> frozenset[str] | None:
        return None if tools is None else frozenset(tools)
