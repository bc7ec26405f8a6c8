"""The fold: most restrictive wins, DENY absorbs, the default is deny, order does not matter."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fak_core import CallView, KindRegistry, Reason, ToolCall, Verdict, VerdictKind, fold

from .strategies import Fixed, chains, kinds, verdict_of

REG = KindRegistry()
VIEW = CallView(ToolCall("t", "{}"))


def reference(chain: list[Fixed]) -> tuple[int, int, str]:
    """An independent model of the fold: (kind, reason, by) from the verdicts alone."""
    conclusive = [
        a.verdict
        for a in chain
        if a.verdict.kind not in (VerdictKind.DEFER, VerdictKind.INDETERMINATE)
    ]
    if not chain:
        return VerdictKind.DENY, Reason.DEFAULT_DENY, "empty-policy"
    if not conclusive:
        indeterminate = [a.verdict.by for a in chain if a.verdict.kind == VerdictKind.INDETERMINATE]
        return VerdictKind.DENY, Reason.DEFAULT_DENY, (indeterminate or ["all-defer"])[0]
    top = max(REG.rank(v.kind) for v in conclusive)
    first = next(v for v in conclusive if REG.rank(v.kind) == top)  # the earliest of equals
    return first.kind, first.reason, first.by


@pytest.mark.fak_theorem("D1")
@given(chains)
def test_fold_equals_the_reference_model(chain: list[Fixed]) -> None:
    v = fold(chain, VIEW, REG)
    assert (v.kind, v.reason, v.by) == reference(chain)
    assert v.kind != VerdictKind.DEFER


@pytest.mark.fak_theorem("D1")
@given(chains, st.randoms(use_true_random=False))
def test_verdict_kind_does_not_depend_on_chain_order(chain: list[Fixed], rnd: object) -> None:
    shuffled = list(chain)
    rnd.shuffle(shuffled)  # type: ignore[attr-defined]
    assert fold(chain, VIEW, REG).kind == fold(shuffled, VIEW, REG).kind


@pytest.mark.fak_theorem("D1")
@given(chains, kinds, st.integers(min_value=0, max_value=8))
def test_adding_an_adjudicator_never_loosens_a_conclusive_verdict(
    chain: list[Fixed], extra: int, where: int
) -> None:
    before = fold(chain, VIEW, REG)
    grown = list(chain)
    grown.insert(min(where, len(grown)), Fixed(verdict_of(extra, 99)))
    after = fold(grown, VIEW, REG)
    had_opinion = any(
        a.verdict.kind not in (VerdictKind.DEFER, VerdictKind.INDETERMINATE) for a in chain
    )
    if had_opinion:
        assert REG.rank(after.kind) >= REG.rank(before.kind)
    else:  # no one had said yes: the default deny stands unless the newcomer concludes
        assert before.kind == VerdictKind.DENY and before.reason == Reason.DEFAULT_DENY


@pytest.mark.fak_theorem("D1")
@given(chains, st.integers(min_value=0, max_value=8))
def test_deny_absorbs_and_short_circuits(chain: list[Fixed], where: int) -> None:
    deny = Fixed(Verdict.deny(Reason.POLICY_BLOCK, "denier"))
    grown = list(chain)
    pos = min(where, len(grown))
    grown.insert(pos, deny)
    v = fold(grown, VIEW, REG)
    assert v.kind == VerdictKind.DENY
    first_deny = next(i for i, a in enumerate(grown) if a.verdict.kind == VerdictKind.DENY)
    for later in grown[first_deny + 1 :]:
        assert later.calls == [], "an adjudicator after a DENY was consulted"


@pytest.mark.fak_theorem("D1")
def test_default_deny_cases() -> None:
    empty = fold([], VIEW, REG)
    assert (empty.kind, empty.reason, empty.by) == (
        VerdictKind.DENY,
        Reason.DEFAULT_DENY,
        "empty-policy",
    )
    all_defer = fold([Fixed(Verdict.defer("x")), Fixed(Verdict.defer("y"))], VIEW, REG)
    assert (all_defer.kind, all_defer.reason, all_defer.by) == (
        VerdictKind.DENY,
        Reason.DEFAULT_DENY,
        "all-defer",
    )
    residual = fold([Fixed(Verdict.defer("x")), Fixed(Verdict.indeterminate("ind"))], VIEW, REG)
    assert (residual.kind, residual.reason, residual.by) == (
        VerdictKind.DENY,
        Reason.DEFAULT_DENY,
        "ind",
    )
    assert residual.meta["fold"] == "indeterminate"
    # a conclusive verdict beats a residual indeterminate
    v = fold([Fixed(Verdict.indeterminate("ind")), Fixed(Verdict.allow("yes"))], VIEW, REG)
    assert v.kind == VerdictKind.ALLOW


@pytest.mark.fak_theorem("D1")
def test_unknown_kind_ranks_as_deny_and_absorbs() -> None:
    odd = Fixed(Verdict(4242, Reason.NONE, "odd"))
    tail = Fixed(Verdict.allow("after"))
    v = fold([Fixed(Verdict.allow("a")), odd, tail], VIEW, REG)
    assert v.kind == 4242
    assert tail.calls == []


@pytest.mark.fak_theorem("D1")
def test_equal_ranks_keep_the_earliest() -> None:
    v = fold([Fixed(Verdict.allow("first")), Fixed(Verdict.allow("second"))], VIEW, REG)
    assert v.by == "first"


@pytest.mark.fak_theorem("D1")
def test_a_raising_adjudicator_is_a_deny() -> None:
    class Boom:
        def adjudicate(self, view: CallView) -> Verdict:
            raise RuntimeError("kaput")

    v = fold([Fixed(Verdict.allow("a")), Boom()], VIEW, REG)
    assert (v.kind, v.reason) == (VerdictKind.DENY, Reason.DEFAULT_DENY)
    assert "kaput" in v.claim
    assert v.meta["fold"] == "error"


@pytest.mark.fak_theorem("D1")
def test_a_non_verdict_answer_is_a_deny() -> None:
    class Wrong:
        def adjudicate(self, view: CallView) -> Verdict:
            return "ALLOW"  # type: ignore[return-value]

    for chain in ([Wrong()], [Fixed(Verdict.allow("a")), Wrong()]):
        v = fold(chain, VIEW, REG)
        assert (v.kind, v.reason) == (VerdictKind.DENY, Reason.DEFAULT_DENY)
        assert "not a Verdict" in v.claim
        assert dict(v.meta) == {"fold": "error"}
