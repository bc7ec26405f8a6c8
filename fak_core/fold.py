"""Most-restrictive-wins folds: the pre-call chain and the result-side chain.

Pre-call (``fold``): an empty chain, an all-DEFER chain, or a residual INDETERMINATE is
DENY/DEFAULT_DENY; among conclusive verdicts the highest rank wins, the earliest of
equal ranks; the walk stops at the first verdict of DENY rank (later adjudicators are
never called); the result is never DEFER. An adjudicator that raises is a DENY.

A REQUIRE_WITNESS that wins either fold is not the whole story: a witness answers its own
opinion's question and nothing else. So both folds also keep every REQUIRE_WITNESS opinion
and the fold of the other opinions (:class:`Witnessed`); once every claim is confirmed,
the kernel answers that fold (a QUARANTINE still holds, a TRANSFORM still transforms), not
ALLOW (D8.1).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from fak_core.adjudicators import Adjudicator, ResultAdmitter
from fak_core.calls import Result, ToolCall
from fak_core.reasons import EXTENSION_REASON_MIN, Reason
from fak_core.verdicts import DENY_RANK, KindRegistry, Verdict, VerdictKind
from fak_core.view import CallView

__all__ = ["Witnessed", "fold", "fold_results", "fold_results_witnessed"]

_DEFER = VerdictKind.DEFER
_INDETERMINATE = VerdictKind.INDETERMINATE
_WITNESS = VerdictKind.REQUIRE_WITNESS


class Witnessed(NamedTuple):
    """The other half of a fold that concluded REQUIRE_WITNESS.

    ``opinions``: every REQUIRE_WITNESS opinion, in chain order (each claim must be
    confirmed); ``after``: the most restrictive of the other conclusive opinions, the
    verdict that stands once they are, or None when none is above ALLOW.
    """

    opinions: tuple[Verdict, ...]
    after: Verdict | None


def _crashed(by: str, exc: BaseException) -> Verdict:
    # An exception may name the refusal it stands for (a shared store that is down raises
    # fak_core.redis_state.StateUnavailable: STATE_DOWN); only an extension reason is kept.
    reason = getattr(exc, "deny_reason", None)
    if not isinstance(reason, int) or reason < EXTENSION_REASON_MIN:
        reason = Reason.DEFAULT_DENY
    return Verdict.deny(
        reason,
        by,
        claim=f"{type(exc).__name__}: {exc}",
        meta={"error": "adjudicator raised", "fold": "error"},
    )


def fold(chain: Sequence[Adjudicator], view: CallView, kinds: KindRegistry) -> Verdict:
    """Fold ``chain`` (in rank order) over one call; see the module docstring."""
    if not chain:
        return Verdict.deny(Reason.DEFAULT_DENY, "empty-policy")
    best: Verdict | None = None
    best_rank = -1
    first_indeterminate: Verdict | None = None
    witnesses: list[Verdict] | None = None  # made on the first REQUIRE_WITNESS
    rest: Verdict | None = None  # the most restrictive opinion that is not REQUIRE_WITNESS
    rest_rank = 0
    ranks = kinds.ranks  # a read-only view: one dict lookup per verdict, unknown kinds as DENY
    for adj in chain:
        try:
            v = adj.adjudicate(view)
        except Exception as exc:  # nothing escapes the kernel; a crash is a refusal
            return _crashed(type(adj).__name__, exc)
        if not isinstance(v, Verdict):
            return Verdict.deny(
                Reason.DEFAULT_DENY,
                type(adj).__name__,
                claim=f"adjudicator returned {type(v).__name__}, not a Verdict",
                meta={"fold": "error"},
            )
        k = v.kind
        if k == _DEFER:
            continue
        if k == _INDETERMINATE:
            if first_indeterminate is None:
                first_indeterminate = v
            continue
        r = ranks.get(k, DENY_RANK)
        if k == _WITNESS:
            if witnesses is None:
                witnesses = [v]
            else:
                witnesses.append(v)
        elif r > rest_rank:
            rest, rest_rank = v, r
        if r > best_rank:
            best, best_rank = v, r
            if r >= DENY_RANK:
                break
    if best is not None:
        if witnesses is not None:  # read by the kernel only when ``best`` is REQUIRE_WITNESS
            view.witnessed = Witnessed(tuple(witnesses), rest)
        return best
    if first_indeterminate is not None:
        return Verdict.deny(
            Reason.DEFAULT_DENY, first_indeterminate.by, meta={"fold": "indeterminate"}
        )
    return Verdict.deny(Reason.DEFAULT_DENY, "all-defer")


def fold_results(
    chain: Sequence[ResultAdmitter], call: ToolCall, result: Result, kinds: KindRegistry
) -> Verdict:
    """Fold the result-side chain: every admitter runs, the most restrictive opinion wins.

    It starts from ALLOW ("default-admit"); DEFER is no opinion here as everywhere.
    An admitter that raises quarantines the result (it cannot be shown safe).
    """
    return fold_results_witnessed(chain, call, result, kinds)[0]


def fold_results_witnessed(
    chain: Sequence[ResultAdmitter], call: ToolCall, result: Result, kinds: KindRegistry
) -> tuple[Verdict, Witnessed | None]:
    """:func:`fold_results`, and its :class:`Witnessed` when it concludes REQUIRE_WITNESS."""
    best = Verdict.allow("default-admit")
    best_rank = 0
    witnesses: list[Verdict] = []
    rest: Verdict | None = None
    rest_rank = 0
    rank = kinds.rank
    for adm in chain:
        try:
            v = adm.admit(call, result)
        except Exception as exc:
            v = Verdict.quarantine(
                Reason.TRUST_VIOLATION,
                type(adm).__name__,
                meta={"error": f"admitter raised {type(exc).__name__}: {exc}"[:256]},
            )
        if not isinstance(v, Verdict):
            v = Verdict.quarantine(
                Reason.TRUST_VIOLATION, type(adm).__name__, meta={"error": "not a Verdict"}
            )
        if v.kind == _DEFER:
            continue
        r = rank(v.kind)
        if v.kind == _WITNESS:
            witnesses.append(v)
        elif r > rest_rank:
            rest, rest_rank = v, r
        if r > best_rank:
            best, best_rank = v, r
    if best.kind == _WITNESS:
        return best, Witnessed(tuple(witnesses), rest)
    return best, None
