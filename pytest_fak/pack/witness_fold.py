"""Witnesses of FAK-F1 and FAK-F2 (the fold), run against ``fak_kernel_factory``."""

from __future__ import annotations

import importlib
import json
from typing import Any, cast

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from fak_core import Reason, ToolCall, Verdict, VerdictKind
from pytest_fak.strategies import Chain, adjudicator_chains, const_adjudicator

# `fak_core.fold` the attribute is the function (re-exported); these are the modules.
_fold_module = importlib.import_module("fak_core.fold")

_INCONCLUSIVE = (VerdictKind.DEFER, VerdictKind.INDETERMINATE)
_K = VerdictKind


def _fold(chain: Chain, kernel: Any) -> Verdict:
    view = kernel.view(ToolCall("fak_pack_fold", "{}", "fak-f"))
    return cast(Verdict, _fold_module.fold(chain.adjudicators, view, kernel.kinds))


def _fixed(kinds: tuple[int, ...]) -> Chain:
    vs = tuple(
        Verdict.deny(Reason.POLICY_BLOCK, f"link{i}")
        if k == _K.DENY
        else Verdict(k, Reason.NONE, f"link{i}")
        for i, k in enumerate(kinds)
    )
    return Chain(vs, tuple(const_adjudicator(v) for v in vs))


@pytest.mark.fak_theorem("FAK-F1")
@given(chain=adjudicator_chains(min_size=1))
@example(chain=_fixed((_K.ALLOW, _K.DENY)))
@example(chain=_fixed((_K.ALLOW, _K.QUARANTINE, _K.TRANSFORM)))
def test_fold_picks_most_restrictive(fak_kernel_factory: Any, chain: Chain) -> None:
    kernel = fak_kernel_factory()
    got = _fold(chain, kernel)
    conclusive = [v for v in chain.verdicts if v.kind not in _INCONCLUSIVE]
    if not conclusive:
        assert (got.kind, got.reason) == (VerdictKind.DENY, Reason.DEFAULT_DENY)
        return
    top = max(kernel.kinds.rank(v.kind) for v in conclusive)
    expected = next(v for v in conclusive if kernel.kinds.rank(v.kind) == top)
    assert kernel.kinds.rank(got.kind) == top
    assert (got.kind, got.by) == (expected.kind, expected.by)


_ARGS = st.one_of(
    st.sampled_from(["{}", '{"q": "x"}', '{"to": "a@example.com"}', "[1]", "{"]),
    st.dictionaries(st.sampled_from(["q", "path", "url", "password"]), st.text(max_size=12)).map(
        json.dumps
    ),
)


@pytest.mark.fak_theorem("FAK-F1")
@given(data=st.data(), args=_ARGS)
def test_decide_equals_fold_of_own_chain(fak_kernel_factory: Any, data: Any, args: str) -> None:
    kernel = fak_kernel_factory()
    names = sorted(set(kernel.policy.allow) | {"send_email", "fak_pack_unlisted", "read_x"})
    tool = data.draw(st.sampled_from(names), label="tool")
    call = ToolCall(tool, args, "fak-f1")
    raw = [adj.adjudicate(kernel.view(call)) for adj in kernel.chain_for(tool)]
    got = kernel.decide(call)
    conclusive = [v for v in raw if v.kind not in _INCONCLUSIVE]
    if not conclusive:
        assert (got.kind, got.reason) == (VerdictKind.DENY, Reason.DEFAULT_DENY)
        return
    top = max(kernel.kinds.rank(v.kind) for v in conclusive)
    expected = next(v for v in conclusive if kernel.kinds.rank(v.kind) == top)
    assert (got.kind, got.reason, got.by) == (expected.kind, expected.reason, expected.by)


@pytest.mark.fak_theorem("FAK-F2")
@given(chain=adjudicator_chains(kinds=[_K.DEFER, _K.INDETERMINATE], unknown_kinds=False))
@example(chain=_fixed(()))
@example(chain=_fixed((_K.DEFER, _K.DEFER)))
@example(chain=_fixed((_K.INDETERMINATE,)))
def test_inconclusive_chains_deny(fak_kernel_factory: Any, chain: Chain) -> None:
    got = _fold(chain, fak_kernel_factory())
    assert (got.kind, got.reason) == (VerdictKind.DENY, Reason.DEFAULT_DENY)


@pytest.mark.fak_theorem("FAK-F2")
@given(kind=st.integers(7, 1023), before=st.booleans())
@example(kind=77, before=False)
def test_unknown_kind_outranks_allow(fak_kernel_factory: Any, kind: int, before: bool) -> None:
    kernel = fak_kernel_factory()
    unknown = Verdict(kind, Reason.NONE, "unknown")
    allow = Verdict.allow("allow")
    links = (unknown, allow) if before else (allow, unknown)
    chain = Chain(links, tuple(const_adjudicator(v) for v in links))
    got = _fold(chain, kernel)
    assert kernel.kinds.rank(kind) == kernel.kinds.rank(VerdictKind.DENY)
    assert got.kind == kind, "an unknown kind was outranked by ALLOW"


@pytest.mark.fak_theorem("FAK-F2")
@given(suffix=st.text("abcdefghijklmnopqrstuvwxyz_", min_size=4, max_size=12))
def test_unlisted_tool_is_denied(fak_kernel_factory: Any, suffix: str) -> None:
    kernel = fak_kernel_factory()
    tool = f"zz_fak_unlisted_{suffix}"
    got = kernel.decide(ToolCall(tool, "{}", "fak-f2"))
    assert got.kind == VerdictKind.DENY
