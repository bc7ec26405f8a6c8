"""The preflight ladder: cheapest-first well-formedness rungs, and the hard-negative ledger.

Rungs run in ascending declared cost (ties in registration order). Rung 0 checks the
arguments parse as a JSON object; rung 1 validates them against the tool's JSON Schema.
The first catch is DENY by ``preflight`` plus exactly one hard-negative row
``(call_hash, rung_passed, rung_failed, verdict, reason, detail)``; no costlier rung runs.
A call every rung passes gets DEFER: the ladder never allows.

Rung numbers are positions in cost order, so ``rung_passed`` is the number of the last
rung that passed (-1 when none did) and ``rung_failed`` the number of the catching rung.
"""

from __future__ import annotations

import hashlib
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from fak_core.nonblocking import nonblocking
from fak_core.reasons import Reason, ReasonRegistry
from fak_core.schemas import SchemaRegistry
from fak_core.verdicts import Verdict
from fak_core.view import CallView

__all__ = [
    "DEFAULT_MAX_NEGATIVES",
    "Catch",
    "CatchRate",
    "Ladder",
    "NegativeRow",
    "NegativesLedger",
    "ParseRung",
    "Rung",
    "SchemaRung",
]

DEFAULT_MAX_NEGATIVES = 8192
BY = "preflight"
_PASSED = Verdict.defer(BY)


@dataclass(frozen=True, slots=True)
class Catch:
    """A rung's refusal: the reason code and a short detail saying what to fix."""

    reason: int
    detail: str


@runtime_checkable
class Rung(Protocol):
    """One well-formedness check. ``cost`` orders the ladder; ``check`` returns a catch or None."""

    name: str
    cost: float

    def check(self, view: CallView) -> Catch | None: ...


@nonblocking
class ParseRung:
    """Rung 0: the arguments parse as one JSON object (see :mod:`fak_core.jsonargs`)."""

    name = "parse"
    cost = 0.0

    def check(self, view: CallView) -> Catch | None:
        if view.args() is None:
            err = view.error
            assert err is not None
            return Catch(err.reason, err.detail)
        return None


@nonblocking
class SchemaRung:
    """Rung 1: the arguments satisfy the tool's registered JSON Schema (full Draft 2020-12).

    With ``require_schema`` a tool without a schema is refused as UNKNOWN_TOOL.
    """

    name = "schema"
    cost = 1.0

    def __init__(self, schemas: SchemaRegistry, require_schema: bool = False) -> None:
        self.schemas = schemas
        self.require_schema = require_schema

    def check(self, view: CallView) -> Catch | None:
        compiled = self.schemas.get(view.call.tool)
        if compiled is None:
            if self.require_schema:
                return Catch(
                    Reason.UNKNOWN_TOOL,
                    f"no schema is registered for tool {view.call.tool!r}: register one or "
                    "use a known tool",
                )
            return None
        args = view.args()
        if args is None:  # only when a cheaper user rung sits below the parse rung
            err = view.error
            return Catch(Reason.MALFORMED, err.detail if err else "arguments did not parse")
        if compiled.is_valid(args):
            return None
        return Catch(Reason.MALFORMED, compiled.first_error(args))


@dataclass(frozen=True, slots=True)
class NegativeRow:
    """A hard-negative label: which call was caught, after which rung, by which rung, why."""

    call_hash: str
    rung_passed: int
    rung_failed: int
    verdict: str
    reason: str
    detail: str

    def as_dict(self) -> dict[str, object]:
        return {
            "call_hash": self.call_hash,
            "rung_passed": self.rung_passed,
            "rung_failed": self.rung_failed,
            "verdict": self.verdict,
            "reason": self.reason,
            "detail": self.detail,
        }


class NegativesLedger:
    """A FIFO-bounded list of hard-negative rows with an eviction counter."""

    __slots__ = ("_lock", "_rows", "evicted", "limit")

    def __init__(self, limit: int = DEFAULT_MAX_NEGATIVES) -> None:
        self.limit = limit if limit >= 1 else DEFAULT_MAX_NEGATIVES
        self._rows: deque[NegativeRow] = deque(maxlen=self.limit)
        self._lock = threading.Lock()
        self.evicted = 0

    def append(self, row: NegativeRow) -> None:
        with self._lock:
            if len(self._rows) == self.limit:
                self.evicted += 1
            self._rows.append(row)

    def rows(self) -> list[NegativeRow]:
        with self._lock:
            return list(self._rows)

    def __len__(self) -> int:
        return len(self._rows)


@dataclass(frozen=True, slots=True)
class CatchRate:
    caught: int
    total: int

    @property
    def rate(self) -> float:
        return self.caught / self.total if self.total else 0.0


def call_hash(view: CallView) -> str:
    """``<tool>:<sha256 of the argument bytes>``, identifying a call without keeping it."""
    raw = view.call.args
    data = raw if isinstance(raw, bytes) else raw.encode("utf-8", "surrogatepass")
    return f"{view.call.tool}:{hashlib.sha256(data).hexdigest()}"


@nonblocking
class Ladder:
    """The preflight adjudicator: runs its rungs cheapest-first and stops at the first catch."""

    __slots__ = ("_lock", "_probe", "_rungs", "_seq", "caught", "negatives", "reasons", "total")

    def __init__(
        self,
        schemas: SchemaRegistry | None = None,
        *,
        require_schema: bool = False,
        max_negatives: int = DEFAULT_MAX_NEGATIVES,
        reasons: ReasonRegistry | None = None,
    ) -> None:
        self._rungs: list[Rung] = []
        self._seq: list[tuple[float, int, Rung]] = []
        self._lock = threading.Lock()
        self.negatives = NegativesLedger(max_negatives)
        self.reasons = reasons if reasons is not None else ReasonRegistry()
        self.caught = 0
        self.total = 0
        self._probe: Callable[[int, Rung], None] | None = None
        self.add_rung(ParseRung())
        self.add_rung(
            SchemaRung(schemas if schemas is not None else SchemaRegistry(), require_schema)
        )

    def add_rung(self, rung: Rung) -> None:
        """Add a rung; it runs in ascending ``cost`` order (ties: first added runs first)."""
        if not isinstance(rung, Rung):
            raise TypeError(f"{rung!r} is not a rung (needs name, cost and check(view))")
        cost = float(rung.cost)
        if cost != cost:
            raise ValueError(f"rung {rung.name!r} has a NaN cost")
        with self._lock:
            self._seq.append((cost, len(self._seq), rung))
            self._seq.sort(key=lambda t: (t[0], t[1]))
            self._rungs = [r for _, _, r in self._seq]

    @property
    def rungs(self) -> list[Rung]:
        """The rungs in evaluation order; rung number = index in this list."""
        return list(self._rungs)

    @property
    def probe(self) -> Callable[[int, Rung], None] | None:
        """The observer set with :meth:`set_probe`, if any."""
        return self._probe

    def set_probe(self, probe: Callable[[int, Rung], None] | None) -> None:
        """Observe every rung evaluation as ``probe(number, rung)`` (for witnesses)."""
        self._probe = probe

    def adjudicate(self, view: CallView) -> Verdict:
        self.total += 1
        probe = self._probe
        for number, rung in enumerate(self._rungs):
            if probe is not None:
                probe(number, rung)
            catch = rung.check(view)
            if catch is not None:
                return self._caught(view, number - 1, number, catch)
        return _PASSED

    check = adjudicate

    def _caught(self, view: CallView, passed: int, failed: int, catch: Catch) -> Verdict:
        self.caught += 1
        reason_name = self.reasons.name(catch.reason)
        detail = catch.detail[:512]
        self.negatives.append(
            NegativeRow(call_hash(view), passed, failed, "DENY", reason_name, detail)
        )
        return Verdict.deny(
            catch.reason,
            BY,
            claim=detail,
            meta={"rung_passed": str(passed), "rung_failed": str(failed)},
        )

    def catch_rate(self) -> CatchRate:
        return CatchRate(self.caught, self.total)
