"""D1.2: each verdict constructor, answered by an adjudicator, reaches the call's outcome.

An adjudicator answers a verdict built by each constructor (a deny with and without a
claim, a claim past 256 characters, quarantine, require-witness, transform, with and
without metadata), and ``syscall`` is checked against the refusal D1.2 describes, written
out here: the kind and reason names, the disposition, ``by``, a claim only when the
verdict had one, and the tool run (with the repaired arguments) only on TRANSFORM.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from fak_core import Kernel, Policy, Reason, ToolCall, VerdictKind
from fak_core.calls import Status
from fak_core.verdicts import Verdict
from fak_core.view import CallView

LONG = "c" * 300

# each verdict is built inside the test (a constructor must be called while under test)
CASES: list[tuple[str, Callable[[], Verdict], dict[str, str] | None]] = [
    ("deny-claim", lambda: Verdict.deny(Reason.POLICY_BLOCK, "t", "no way", {"k": "v"}),
     {"kind": "DENY", "reason": "POLICY_BLOCK", "claim": "no way"}),
    ("deny-bare", lambda: Verdict.deny(Reason.POLICY_BLOCK, "t"),
     {"kind": "DENY", "reason": "POLICY_BLOCK"}),
    ("deny-long", lambda: Verdict.deny(Reason.EGRESS_BLOCK, "t", LONG),
     {"kind": "DENY", "reason": "EGRESS_BLOCK", "claim": LONG[:256]}),
    ("quarantine", lambda: Verdict.quarantine(Reason.TRUST_VIOLATION, "t", meta={"m": "1"}),
     {"kind": "QUARANTINE", "reason": "TRUST_VIOLATION"}),
    ("quarantine-bare", lambda: Verdict.quarantine(Reason.NONE, "t", page_out=False),
     {"kind": "QUARANTINE", "reason": "DEFAULT_DENY"}),
    ("witness", lambda: Verdict.require_witness("prove it", "t"),
     {"kind": "DENY", "reason": "UNWITNESSED"}),  # no resolver: D8's refusal, by witness
    ("transform", lambda: Verdict.transform('{"x": 2}', "t", {"why": "fix"}), None),
    ("transform-bare", lambda: Verdict.transform("{}", "t"), None),
]  # fmt: skip


class _Says:
    def __init__(self, verdict: Verdict) -> None:
        self.verdict = verdict

    def adjudicate(self, view: CallView) -> Verdict:
        return self.verdict


@pytest.mark.fak_theorem("D1.2")
@pytest.mark.parametrize(("name", "build", "want"), CASES, ids=[c[0] for c in CASES])
def test_each_constructor_reaches_the_outcome(
    name: str, build: Callable[[], Verdict], want: dict[str, str] | None
) -> None:
    verdict = build()
    k = Kernel(Policy(allow=("t",)), builtin_chain=False)
    got: list[dict[str, Any]] = []
    k.register_tool("t", lambda a: got.append(a) or "ran")
    k.add_adjudicator(_Says(verdict), 1)
    res, v = k.syscall(ToolCall("t", '{"x": 1}', "s"))
    if want is None:
        assert (res.status, res.payload, v.kind) == (Status.OK, "ran", VerdictKind.TRANSFORM)
        assert got == [json.loads(verdict.payload.new_args)]  # type: ignore[union-attr]
        assert v.repaired_args == verdict.payload.new_args  # type: ignore[union-attr]
        return
    assert got == [] and res.status == Status.ERROR
    assert v.repaired_args is None
    meta = dict(res.meta)
    expected = {"verdict": "deny", "disposition": meta["disposition"], "by": meta["by"], **want}
    assert meta == expected, name
    assert meta["by"] in ("t", "witness")
    if name.startswith(("deny", "quarantine")):
        assert v.claim == want.get("claim", "")
        assert dict(v.meta) == {str(a): str(b) for a, b in dict(verdict.meta).items()}
