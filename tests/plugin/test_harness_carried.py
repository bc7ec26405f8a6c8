"""H1.8: a verdict a partial run carries over while its inputs changed is STALE in that
run's report and fails it under ``--fak-fail-on``; with its inputs back it is carried with
its own verdict again (the report's records, as the run writes them)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_fak import ci, report
from pytest_fak.verdicts import STALE, VERDICTS

DECIDED = [v for v in VERDICTS if v != STALE]


def _record(tid: str, verdict: str, date: str) -> dict[str, object]:
    return {
        "id": tid,
        "title": "t",
        "regime": "A",
        "source": "theorems/t.md:1",
        "verdict": verdict,
        "date": date,
        "ran": True,
        "carried_over": None,
        "reasons": [f"why {verdict}"],
        "statement": "s",
        "proof": "p",
        "caveats": ["c"],
        "scoped_out": None,
        "theorem_sha256": "0" * 64,
        "witness_command": None,
        "witnesses": [],
        "idle_witnesses": [],
        "mutants": [],
        "anchors": [],
        "generated": None,
        "inputs": None,
    }


@pytest.mark.fak_theorem("H1.8")
@settings(max_examples=60, deadline=None)
@given(
    verdict=st.sampled_from(DECIDED),
    changes=st.lists(st.one_of(st.none(), st.text(min_size=1, max_size=20)), max_size=4),
    fail_on=st.sets(st.sampled_from(VERDICTS)),
    date=st.dates().map(str),
)
def test_a_carried_verdict_whose_inputs_changed_is_stale_and_fails_the_run(
    verdict: str, changes: list[str | None], fail_on: set[str], date: str
) -> None:
    rec: dict[str, object] | None = _record("S1.1", verdict, date)
    for why in changes:  # one partial run after another, each finding it changed or not
        assert rec is not None
        carried = report._carried(rec, {"git": {"commit": None}}, "not selected")
        assert carried is not None
        rec = report._staleness(carried, why)
        doc = {"theorems": [rec], "run": {"summary": {}, "not_run": 1}}
        bad = ci.failing(doc, fail_on)
        if why is not None:
            assert rec["verdict"] == STALE
            assert rec["carried_over"]["verdict"] == verdict  # type: ignore[index]
            assert why in rec["reasons"][0]  # type: ignore[index]
            assert bad == ([rec] if STALE in fail_on else [])
        else:
            assert rec["verdict"] == verdict and rec["reasons"] == [f"why {verdict}"]
            assert bad == []  # a verdict carried unchanged never fails the run
        assert rec["carried_over"]["date"] == date  # type: ignore[index]
        assert report.schema_errors(rec, "theorem") == []
