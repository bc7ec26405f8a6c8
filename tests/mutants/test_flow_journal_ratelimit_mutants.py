"""Every mutant of theorems/flow.md, journal.md and ratelimit.md applies and is undone.

A mutant whose source edit no longer matches the code raises when it is entered, and
proof mode would count that as a kill; this check catches such a stale mutant first.
"""

from __future__ import annotations

import pytest

import tests.mutants.flow
import tests.mutants.journal
import tests.mutants.ratelimit
from fak_core.flow.compiler import _topological, compile_flow
from fak_core.flow.manifest import node_entries
from fak_core.flow.model import _node, load_document
from fak_core.flow.preflight import _source_digest
from fak_core.flow.resolver import FileWorkspace
from fak_core.flow.runner import Runner, _content_findings
from fak_core.flow.task import launch_task
from fak_core.journal import Journal, _read_only
from fak_core.kernel import Kernel
from fak_core.ratelimit import RateLimiter
from pytest_fak.mutants import registry

MODULES = (tests.mutants.flow, tests.mutants.journal, tests.mutants.ratelimit)
IDS = sorted(
    mid
    for mid in registry._by_id
    if registry._by_id[mid].where.startswith(tuple(m.__name__ + "." for m in MODULES))
)
FUNCTIONS = (
    compile_flow,
    _topological,
    launch_task,
    node_entries,
    _content_findings,
    _source_digest,
    Runner.start,
    _node,
    load_document,
    FileWorkspace._capability,
    _read_only,
    Journal.__init__,
    Journal.rotate_bytes.fset,  # type: ignore[attr-defined]
    Journal._rotate,
    Journal._cut,
    Journal._over,
    Kernel._dispatch_refusal,
    RateLimiter.adjudicate,
    RateLimiter.reset,
)


def test_the_three_modules_register_their_mutants() -> None:
    assert len(IDS) == 59
    assert {i.split("/")[0] for i in IDS} == {
        "F1.1", "F1.2", "F1.3", "F1.4", "F1.5", "F1.6", "F1.7", "F1.8",
        "C1.1", "C1.2", "C1.3", "C1.4", "C1.5", "D9", "D9.1",
    }  # fmt: skip


@pytest.mark.parametrize("mutant_id", IDS)
def test_each_mutant_applies_and_is_undone(mutant_id: str) -> None:
    before = [f.__code__ for f in FUNCTIONS]
    m = registry.get(mutant_id)
    assert m is not None
    with m.applied():
        pass
    assert [f.__code__ for f in FUNCTIONS] == before
