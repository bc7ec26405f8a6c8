"""D1.2: the constructors of the verdicts that carry no payload (ALLOW, DEFER, INDETERMINATE).

Each is built with and without metadata and read back field by field against the values
written out here (its kind, reason NONE, ``by``, no claim, no repaired arguments, the
metadata as given and frozen: a change to the caller's dict afterwards does not reach it);
an INDETERMINATE an adjudicator answers is a refusal (no dispatch, an ERROR result), and an
ALLOW runs the tool.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from fak_core import Kernel, Policy, Reason, ToolCall, VerdictKind
from fak_core.calls import Status
from fak_core.verdicts import Verdict
from tests.kernel.test_verdict_values import _Says

Build = Callable[[str, dict[str, str] | None], Verdict]

# (name, constructor taking by and meta, kind); defer takes no metadata
KINDS: list[tuple[str, Build, VerdictKind]] = [
    ("allow", lambda by, meta: Verdict.allow(by, meta), VerdictKind.ALLOW),
    ("defer", lambda by, meta: Verdict.defer(by), VerdictKind.DEFER),
    ("indeterminate", lambda by, meta: Verdict.indeterminate(by, meta), VerdictKind.INDETERMINATE),
]


@pytest.mark.fak_theorem("D1.2")
@pytest.mark.parametrize(("name", "build", "kind"), KINDS, ids=[k[0] for k in KINDS])
@pytest.mark.parametrize("meta", [None, {"k": "v", "n": "2"}], ids=["bare", "meta"])
def test_a_plain_verdict_carries_its_kind_by_and_frozen_metadata(
    name: str, build: Build, kind: VerdictKind, meta: dict[str, str] | None
) -> None:
    given = None if meta is None else dict(meta)
    v = build("adj", given)
    if given is not None:
        given["k"] = "changed"
    want_meta = {} if meta is None or name == "defer" else meta
    assert (v.kind, v.reason, v.by, v.claim, v.repaired_args) == (
        kind,
        Reason.NONE,
        "adj",
        "",
        None,
    )
    assert dict(v.meta) == want_meta
    with pytest.raises(TypeError):
        v.meta["k"] = "x"  # type: ignore[index]


def _syscall(verdict: Verdict) -> tuple[list[dict[str, Any]], Any, Verdict]:
    k = Kernel(Policy(allow=("t",)), builtin_chain=False)
    ran: list[dict[str, Any]] = []
    k.register_tool("t", lambda a: ran.append(a) or "ran")
    k.add_adjudicator(_Says(verdict), 1)
    res, v = k.syscall(ToolCall("t", '{"x": 1}', "s"))
    return ran, res, v


@pytest.mark.fak_theorem("D1.2")
def test_an_allow_runs_the_tool_and_an_indeterminate_is_a_refusal() -> None:
    ran, res, v = _syscall(Verdict.allow("adj"))
    assert (ran, res.status, res.payload, v.kind) == (
        [{"x": 1}],
        Status.OK,
        "ran",
        VerdictKind.ALLOW,
    )
    # held: never dispatched, a refusal value (how the fold reads it is D1's)
    ran, res, v = _syscall(Verdict.indeterminate("adj", {"m": "1"}))
    assert (ran, res.status, res.payload) == ([], Status.ERROR, "")
    assert v.kind not in (VerdictKind.ALLOW, VerdictKind.TRANSFORM)
