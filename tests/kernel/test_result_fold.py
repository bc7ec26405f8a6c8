"""The result-side fold and a crashing adjudicator (D1), against a model written here.

The model reads only the opinions the test hands in and a rank table written out from D1
(ALLOW 0 < DEFER 10 < INDETERMINATE 15 < TRANSFORM 20 < QUARANTINE 30 < REQUIRE_WITNESS 40
< DENY 100, unknown kinds as DENY, extension kinds at their declared ranks 1 and 25); it never calls
the fold or the kind registry.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from fak_core import CallView, KindRegistry, Reason, Result, Status, ToolCall, Verdict, fold
from fak_core.fold import Witnessed, fold_results, fold_results_witnessed
from fak_core.verdicts import VerdictKind as K

EXT_CODE, EXT_RANK = 1500, 25
LOW_CODE, LOW_RANK = 1501, 1  # an extension kind just above ALLOW
RANKS: dict[int, int] = {K.ALLOW: 0, K.DEFER: 10, K.INDETERMINATE: 15, K.TRANSFORM: 20}
RANKS |= {K.QUARANTINE: 30, K.REQUIRE_WITNESS: 40, K.DENY: 100, EXT_CODE: EXT_RANK}
RANKS |= {LOW_CODE: LOW_RANK}
CALL = ToolCall("fetch", "{}", "s")
RESULT = Result(Status.OK, "payload")


def registry() -> KindRegistry:
    kinds = KindRegistry()
    kinds.register(EXT_CODE, "EXT", EXT_RANK)
    kinds.register(LOW_CODE, "LOW", LOW_RANK)
    return kinds


class Crash(Exception):
    """An admitter's failure, with a message of a chosen length."""


@dataclass
class Opinion:
    """An admitter answering one fixed thing (a verdict, a non-verdict, or a raise)."""

    answer: Any
    raises: str | None = None
    calls: list[str] = field(default_factory=list)

    def admit(self, call: ToolCall, result: Result) -> Verdict:
        self.calls.append(result.payload)
        if self.raises is not None:
            raise Crash(self.raises)
        return self.answer  # type: ignore[no-any-return]


def _verdict(kind: int, i: int) -> Verdict:
    by = f"a{i}"
    if kind == K.TRANSFORM:
        return Verdict.transform(f"[{i}]", by)
    if kind == K.QUARANTINE:
        return Verdict.quarantine(Reason.RESULT_SECRET_DISCOVERED, by)
    if kind == K.REQUIRE_WITNESS:
        return Verdict.require_witness(f"claim-{i % 2}", by)
    if kind == K.DENY:
        return Verdict.deny(Reason.POLICY_BLOCK, by)
    return Verdict(kind, Reason.NONE, by)


KINDS = [*K, EXT_CODE, LOW_CODE, 4242]
#: An admitter's answer: ("verdict", kind), ("raise", message length) or ("odd", a non-verdict).
Spec = tuple[str, Any]

specs = st.lists(
    st.one_of(
        st.tuples(st.just("verdict"), st.sampled_from(KINDS)),
        st.tuples(st.just("raise"), st.integers(0, 300)),
        st.tuples(st.just("odd"), st.sampled_from([None, "ALLOW", 0])),
    ),
    max_size=6,
)


def build(chain: list[Spec]) -> list[Opinion]:
    """Fresh admitters for a chain (each run records its own calls)."""
    out = []
    for i, (what, arg) in enumerate(chain):
        if what == "raise":
            out.append(Opinion(None, raises="x" * arg))
        elif what == "odd" or isinstance(arg, Verdict):
            out.append(Opinion(arg))
        else:
            out.append(Opinion(_verdict(arg, i)))
    return out


def _as_verdict(op: Opinion) -> tuple[int, int, str, dict[str, str]]:
    """(kind, reason, by, meta) of what an admitter's answer counts as in the model."""
    if op.raises is not None:
        error = f"admitter raised Crash: {op.raises}"[:256]
        return K.QUARANTINE, Reason.TRUST_VIOLATION, "Opinion", {"error": error}
    if not isinstance(op.answer, Verdict):
        return K.QUARANTINE, Reason.TRUST_VIOLATION, "Opinion", {"error": "not a Verdict"}
    v = op.answer
    return int(v.kind), int(v.reason), v.by, dict(v.meta)


def model(chain: list[Opinion]) -> tuple[tuple[Any, ...], Any]:
    """The winner (kind, reason, by, meta) and, on a REQUIRE_WITNESS, (witness bys,
    the most restrictive other opinion's by or None)."""
    best: tuple[int, int, str, dict[str, str]] = (K.ALLOW, Reason.NONE, "default-admit", {})
    best_rank = 0
    witnesses: list[str] = []
    rest, rest_rank = None, 0
    for op in chain:
        kind, reason, by, meta = _as_verdict(op)
        if kind == K.DEFER:
            continue
        rank = RANKS.get(kind, 100)
        if kind == K.REQUIRE_WITNESS:
            witnesses.append(by)
        elif rank > rest_rank:
            rest, rest_rank = by, rank
        if rank > best_rank:
            best, best_rank = (kind, reason, by, meta), rank
    return best, ((tuple(witnesses), rest) if best[0] == K.REQUIRE_WITNESS else None)


@pytest.mark.fak_theorem("D1")
@given(specs)
@example([("verdict", Verdict.allow("first")), ("verdict", Verdict.allow("second"))])
@example([("raise", 300), ("verdict", Verdict.quarantine(Reason.NONE, "later"))])
@example([("verdict", K.DEFER), ("verdict", K.TRANSFORM), ("verdict", K.DEFER)])
@example([("verdict", K.ALLOW), ("verdict", K.REQUIRE_WITNESS)])
@example([("verdict", LOW_CODE), ("verdict", K.REQUIRE_WITNESS)])
@example([("verdict", LOW_CODE)])
@example(
    [
        ("verdict", Verdict.transform("[t]", "t")),
        ("verdict", Verdict.require_witness("c", "w1")),
        ("verdict", Verdict.transform("[u]", "u")),
        ("verdict", Verdict.require_witness("d", "w2")),
    ]
)
def test_the_result_fold_equals_its_model(spec: list[Spec]) -> None:
    kinds = registry()
    chain = build(spec)
    v, witnessed = fold_results_witnessed(chain, CALL, RESULT, kinds)
    (kind, reason, by, meta), wanted = model(chain)
    assert (int(v.kind), int(v.reason), v.by, dict(v.meta)) == (kind, reason, by, meta)
    assert all(op.calls == [RESULT.payload] for op in chain), "every admitter is asked once"
    if wanted is None:
        assert witnessed is None
    else:
        assert isinstance(witnessed, Witnessed)
        assert tuple(o.by for o in witnessed.opinions) == wanted[0]
        assert (None if witnessed.after is None else witnessed.after.by) == wanted[1]
    plain = fold_results(build(spec), CALL, RESULT, kinds)
    assert (plain.kind, plain.by, plain.reason, dict(plain.meta)) == (
        v.kind,
        v.by,
        v.reason,
        dict(v.meta),
    )


class _Down(Exception):
    """A failure naming the refusal it stands for (a shared store that is down)."""

    def __init__(self, reason: object) -> None:
        super().__init__("state is down")
        self.deny_reason = reason


@dataclass
class _Raising:
    exc: Exception

    def adjudicate(self, view: CallView) -> Verdict:
        raise self.exc


@pytest.mark.fak_theorem("D1")
@pytest.mark.parametrize(
    ("named", "wanted"),
    [
        (None, Reason.DEFAULT_DENY),
        ("STATE_DOWN", Reason.DEFAULT_DENY),
        (True, Reason.DEFAULT_DENY),
        (int(Reason.POLICY_BLOCK), Reason.DEFAULT_DENY),  # a core reason is not kept
        (1023, Reason.DEFAULT_DENY),
        (1024, 1024),
        (1910, 1910),
    ],
)
def test_a_crashing_adjudicator_keeps_only_an_extension_reason(named: object, wanted: int) -> None:
    exc: Exception = RuntimeError("kaput") if named is None else _Down(named)
    v = fold([_Raising(exc)], CallView(CALL), registry())
    text = "RuntimeError: kaput" if named is None else "_Down: state is down"
    assert (v.kind, int(v.reason), v.by, v.claim) == (K.DENY, wanted, "_Raising", text)
    assert dict(v.meta) == {"error": "adjudicator raised", "fold": "error"}
