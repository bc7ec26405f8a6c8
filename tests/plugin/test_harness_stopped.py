"""H1.6: a run stopped before some collected witness ran (``-x``, ``--maxfail``) is
partial, and no theorem with a witness that did not run is reported as decided by it,
unless what did run refuted it (the :class:`pytest_fak.selection.Selection` of a real
pytest configuration, fed the way the controller feeds it)."""

from __future__ import annotations

import os
import tempfile
from functools import cache

import pytest
from _pytest.config import get_config
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_fak.selection import Selection
from pytest_fak.theorems import Theorem, TheoremIndex
from pytest_fak.verdicts import ERROR, REFUTED, VERDICTS


@cache
def _config() -> pytest.Config:
    """A parsed configuration of an empty project, with no test arguments."""
    old = os.getcwd()
    os.chdir(tempfile.mkdtemp(prefix="fak-stopped-"))
    try:
        args = ["--assert=plain", "--capture=no", "-p", "no:faulthandler", "-p", "no:randomly"]
        config = get_config(args)
        config.parse(args)
        return config
    finally:
        os.chdir(old)


def theorem(tid: str) -> Theorem:
    return Theorem(tid, "", "t.md", 1, "", "A", "", (), (), (), None, "")


ids = st.from_regex(r"[A-Z][0-9]\.[0-9]", fullmatch=True)


@pytest.mark.fak_theorem("H1.6")
@settings(max_examples=60, deadline=None)
@given(tids=st.lists(ids, min_size=1, max_size=5, unique=True), data=st.data())
def test_no_theorem_is_decided_by_a_run_that_stopped_before_its_witness(
    tids: list[str], data: st.DataObject
) -> None:
    index = TheoremIndex(theorem(t) for t in tids)
    binds = st.lists(st.sampled_from(tids), min_size=1, max_size=2, unique=True)
    witnesses = data.draw(
        st.dictionaries(st.from_regex(r"t\.py::test_[a-z]{1,4}", fullmatch=True), binds, max_size=8)
    )
    order = data.draw(st.permutations(sorted(witnesses)))
    stop = data.draw(st.integers(0, len(order)))
    ran = order[:stop]
    why = data.draw(st.sampled_from([None, "stopping after 1 failures", "Interrupted"]))
    sel = Selection(_config(), index)
    sel.merge_worker({"fak_collected": witnesses})  # what the workers collected
    sel.stopped_early(ran, why)
    assert sel.partial == (stop < len(order))
    said = f"{len(order) - stop} collected witnesses did not run ({why or 'the run stopped'})"
    assert sel.describe() == ([said] if stop < len(order) else [])
    for t in index:
        verdict = data.draw(st.sampled_from(VERDICTS))
        mine = {n for n, bound in witnesses.items() if t.id in bound}
        got = sel.why_not_run(t, verdict, [n for n in ran if n in mine], None)
        if not mine:
            # a real orphan: OPEN, counted only by a run that is not partial
            assert got is None if not sel.partial else got is not None and got[1] is False
        elif mine <= set(ran):
            assert got is None  # every witness ran: the run decided it
        elif not mine & set(ran):
            assert got is not None and got[1] is True  # carried over, never an orphan
            assert "stopped" in got[0]
        elif verdict in (REFUTED, ERROR):
            assert got is None  # what ran failed: that stands
        else:
            assert got is not None and got[1] is True
