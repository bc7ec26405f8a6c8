"""Mutants of the bundled pack: deliberate, reversible breakages of the kernel.

Each patches a ``fak_core`` class or module attribute, so it breaks every kernel in the
process, including a downstream one built by ``pytest_fak_make_kernel``.
"""

from __future__ import annotations

import contextlib
import importlib
from collections.abc import Iterator, Sequence
from typing import Any
from unittest import mock

from fak_core.adjudicators import Adjudicator, FunctionAdjudicator
from fak_core.preflight import Ladder
from fak_core.reasons import Reason
from fak_core.verdicts import KindRegistry, Verdict, VerdictKind
from fak_core.view import CallView
from pytest_fak.mutants import mutant

# `fak_core.fold` the attribute is the function (re-exported); these are the modules.
_fold_module = importlib.import_module("fak_core.fold")
_kernel_module = importlib.import_module("fak_core.kernel")

__all__: list[str] = []

_real_fold: Any = _fold_module.fold
_real_adjudicate = Ladder.adjudicate


@contextlib.contextmanager
def _patch_fold(fn: Any) -> Iterator[None]:
    with mock.patch.object(_fold_module, "fold", fn), mock.patch.object(_kernel_module, "fold", fn):
        yield


@mutant("FAK-L1/reversed-rungs")
def reversed_rungs() -> Any:
    """Evaluate the rungs most expensive first."""

    def adjudicate(self: Ladder, view: CallView) -> Verdict:
        self._rungs.reverse()
        try:
            return _real_adjudicate(self, view)
        finally:
            self._rungs.reverse()

    return mock.patch.object(Ladder, "adjudicate", adjudicate)


@mutant("FAK-L2/keeps-going")
def keeps_going() -> Any:
    """Run every rung even after a catch, then report the first catch."""

    def adjudicate(self: Ladder, view: CallView) -> Verdict:
        self.total += 1
        first = None
        for number, rung in enumerate(self._rungs):
            if self._probe is not None:
                self._probe(number, rung)
            catch = rung.check(view)
            if catch is not None and first is None:
                first = (number, catch)
        if first is not None:
            return self._caught(view, first[0] - 1, first[0], first[1])
        return Verdict.defer("preflight")

    return mock.patch.object(Ladder, "adjudicate", adjudicate)


def _first_match(chain: Sequence[Adjudicator], view: CallView, kinds: KindRegistry) -> Verdict:
    for adj in chain:
        try:
            v = adj.adjudicate(view)
        except Exception:
            return Verdict.deny(Reason.DEFAULT_DENY, "mutant")
        if v.kind not in (VerdictKind.DEFER, VerdictKind.INDETERMINATE):
            return v
    return Verdict.deny(Reason.DEFAULT_DENY, "all-defer")


@mutant("FAK-F1/first-match")
def first_match() -> Any:
    """The first conclusive verdict wins instead of the most restrictive."""
    return _patch_fold(_first_match)


def _empty_allows(chain: Sequence[Adjudicator], view: CallView, kinds: KindRegistry) -> Verdict:
    v: Verdict = _real_fold(chain, view, kinds)
    if v.by in ("empty-policy", "all-defer") or v.meta.get("fold") == "indeterminate":
        return Verdict.allow("mutant")
    return v


@mutant("FAK-F2/empty-allows")
def empty_allows() -> Any:
    """An empty, all-DEFER or INDETERMINATE chain allows."""
    return _patch_fold(_empty_allows)


@mutant("FAK-F2/unknown-ranks-low")
def unknown_ranks_low() -> Any:
    """An unknown verdict kind ranks like ALLOW instead of DENY."""

    def rank(self: KindRegistry, kind: int) -> int:
        return self._ranks.get(kind, 0)

    return mock.patch.object(KindRegistry, "rank", rank)


def _crash_skips(chain: Sequence[Adjudicator], view: CallView, kinds: KindRegistry) -> Verdict:
    def guarded(adj: Adjudicator) -> Adjudicator:
        def run(v: CallView) -> Verdict:
            try:
                out = adj.adjudicate(v)
            except Exception:
                return Verdict.defer("mutant")
            return out if isinstance(out, Verdict) else Verdict.defer("mutant")

        return FunctionAdjudicator(run)

    out: Verdict = _real_fold([guarded(a) for a in chain], view, kinds)
    return out


@mutant("FAK-C1/crash-skips")
def crash_skips() -> Any:
    """An adjudicator that raises or returns garbage is skipped (fails open)."""
    return _patch_fold(_crash_skips)
