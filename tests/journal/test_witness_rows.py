"""C1.5: a decision a witness resolver settles is a journal row of its own.

For every resolver answer (confirm, refute, abstain, no resolver) and every other opinion
beside the REQUIRE_WITNESS (none, ALLOW, TRANSFORM, QUARANTINE, DENY), through
``Kernel.syscall`` and through ``Kernel.authorize`` with ``run_authorized``: the journal
holds the call's ``decide`` row and, when the fold concluded REQUIRE_WITNESS, a ``witness``
row with the verdict the call was answered with; a tool that runs finds that row already
committed (read through the test's own SQLite connection).
"""

from __future__ import annotations

import sqlite3
import tempfile
from pathlib import Path
from typing import Any

import pytest

from fak_core import Kernel, Policy, ToolCall, Verdict
from fak_core.adjudicators import WitnessOutcome
from fak_core.journal import Journal, args_digest, read_rows, verify_files
from fak_core.reasons import Reason

OTHERS: dict[str, Any] = {
    "none": None,
    "allow": lambda: Verdict.allow("host"),
    "transform": lambda: Verdict.transform('{"fixed": 1}', "host-repair"),
    "quarantine": lambda: Verdict.quarantine(Reason.TRUST_VIOLATION, "host-hold"),
    "deny": lambda: Verdict.deny(Reason.POLICY_BLOCK, "host-deny"),
}
ANSWERS = (WitnessOutcome.CONFIRMED, WitnessOutcome.REFUTED, WitnessOutcome.ABSTAIN, None)
# what the call is answered with: (verdict, reason, by), from theorems/kernel.md D8/D8.1
SETTLED = {
    WitnessOutcome.REFUTED: ("DENY", "TRUST_VIOLATION", "witness"),
    WitnessOutcome.ABSTAIN: ("DENY", "UNWITNESSED", "witness"),
    None: ("DENY", "UNWITNESSED", "witness"),
}
CONFIRMED = {
    "none": ("ALLOW", "NONE", "witness"),
    "allow": ("ALLOW", "NONE", "witness"),
    "transform": ("TRANSFORM", "NONE", "host-repair"),
    "quarantine": ("QUARANTINE", "TRUST_VIOLATION", "host-hold"),
}


class _Answer:
    def __init__(self, outcome: WitnessOutcome) -> None:
        self.outcome = outcome

    def resolve(self, call: ToolCall, claim: str) -> WitnessOutcome:
        return self.outcome


def _rows_on_disk(path: Path) -> list[tuple[str, str, str, str, str]]:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return list(conn.execute("SELECT event, trace, verdict, reason, by FROM decisions"))
    finally:
        conn.close()


@pytest.mark.fak_theorem("C1.5")
@pytest.mark.parametrize("split", [False, True], ids=["syscall", "authorize"])
def test_every_settled_witness_is_a_row(tmp_path: Path, split: bool) -> None:
    root = Path(tempfile.mkdtemp(dir=tmp_path))  # proof mode re-runs with the same tmp_path
    for n, (other, answer) in enumerate((o, a) for o in OTHERS for a in ANSWERS):
        path = root / f"j{n}.db"
        k = Kernel(Policy(allow=("wire",)))
        seen_at_run: list[list[tuple[str, str, str, str, str]]] = []
        k.register_tool(
            "wire", lambda a, s=seen_at_run, p=path: s.append(_rows_on_disk(p)) or "sent"
        )
        k.add_adjudicator(lambda v: Verdict.require_witness("ok?", "needs"), 40, name="w")
        make = OTHERS[other]
        if make is not None:
            k.add_adjudicator(lambda v, make=make: make(), 41, name="other")
        if answer is not None:
            k.add_witness_resolver("r", _Answer(answer))
        j = Journal(path)
        j.attach(k)
        call = ToolCall("wire", '{"x": 1}', f"trace-{n}")
        if split:
            call, verdict, runnable = k.authorize(call)
            if runnable:
                k.run_authorized(call, verdict)
        else:
            k.syscall(call)
        j.sync()
        j.close()
        case = (other, answer)
        rows = list(read_rows(path))
        assert verify_files([path]).ok, case
        if other == "deny":  # the fold is DENY: no witness is asked, one decision row
            expected = [("decide", "DENY", "POLICY_BLOCK", "host-deny")]
        else:
            settled = CONFIRMED[other] if answer is WitnessOutcome.CONFIRMED else SETTLED[answer]
            decided = ("decide", "REQUIRE_WITNESS", "UNWITNESSED", "needs")
            expected = [decided, ("witness", *settled)]
        runs = expected[-1][1] in ("ALLOW", "TRANSFORM")
        if runs:
            expected.append(("admit", "ALLOW", "NONE", "default-admit"))
        got = [(r["event"], r["verdict"], r["reason"], r["by"]) for r in rows]
        assert got == expected, case
        for r in rows:
            assert (r["trace"], r["tool"]) == (f"trace-{n}", "wire"), case
            args = '{"fixed": 1}' if r["event"] == "admit" and other == "transform" else '{"x": 1}'
            assert r["args_digest"] == args_digest(ToolCall("wire", args, "t")), case
        # the tool runs only after the settled ALLOW (or TRANSFORM) row is committed
        assert len(seen_at_run) == (1 if runs else 0), case
        if runs:
            assert [(e, v) for e, _, v, _, _ in seen_at_run[0]] == [
                (e, v) for e, v, _, _ in expected[:2]
            ], case
