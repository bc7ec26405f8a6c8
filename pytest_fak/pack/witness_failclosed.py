"""Witnesses of FAK-C1 (fail closed), run against ``fak_kernel_factory``."""

from __future__ import annotations

import importlib
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from fak_core import Reason, ToolCall, Verdict, VerdictKind
from fak_core.adjudicators import FunctionAdjudicator
from pytest_fak.strategies import Chain, adjudicator_chains, malformed_args

# `fak_core.fold` the attribute is the function (re-exported); these are the modules.
_fold_module = importlib.import_module("fak_core.fold")

_ALLOWING = (VerdictKind.ALLOW, VerdictKind.TRANSFORM)


def _raise(_view: Any) -> Verdict:
    raise RuntimeError("adjudicator crashed")


def _garbage(_view: Any) -> Any:
    return "ALLOW"


@pytest.mark.fak_theorem("FAK-C1")
@given(chain=adjudicator_chains(raising=True, min_size=1), garbage=st.booleans())
@example(
    chain=Chain((Verdict.allow("a"),), (FunctionAdjudicator(lambda v: Verdict.allow("a")),)),
    garbage=False,
)
@example(
    chain=Chain((Verdict.allow("a"),), (FunctionAdjudicator(lambda v: Verdict.allow("a")),)),
    garbage=True,
)
def test_crashing_adjudicator_denies(fak_kernel_factory: Any, chain: Chain, garbage: bool) -> None:
    kernel = fak_kernel_factory()
    bad = FunctionAdjudicator(_garbage if garbage else _raise)
    links = [*chain.adjudicators, bad]
    view = kernel.view(ToolCall("fak_pack_c1", "{}", "fak-c1"))
    got = _fold_module.fold(links, view, kernel.kinds)
    deny_rank = kernel.kinds.rank(VerdictKind.DENY)
    assert kernel.kinds.rank(got.kind) == deny_rank, f"fold returned {got} with a broken link"
    if (got.kind, got.reason) == (VerdictKind.DENY, Reason.DEFAULT_DENY):
        return
    # Otherwise a verdict of DENY rank earlier in the chain ended the fold first.
    assert any(kernel.kinds.rank(v.kind) == deny_rank for v in chain.verdicts)


@pytest.mark.fak_theorem("FAK-C1")
@given(data=st.data(), args=malformed_args())
def test_malformed_arguments_never_allow(fak_kernel_factory: Any, data: Any, args: Any) -> None:
    kernel = fak_kernel_factory()
    names = sorted(set(kernel.policy.allow) | {"read_file", "fak_pack_unlisted"})
    tool = data.draw(st.sampled_from(names), label="tool")
    got = kernel.decide(ToolCall(tool, args, "fak-c1"))
    assert got.kind not in _ALLOWING, f"{tool} with malformed arguments was {got}"
