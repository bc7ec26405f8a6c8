"""A generated mutant's re-run runs in its own copy of the context.

The real case: a mutant of ``journal.request_scope`` that drops the ``reset`` of its
context variable left a refused scope set in the worker's context, so the control run
(the witness re-run on real code) failed and every kill of that witness read as
inconclusive. Each mutant re-run now gets ``contextvars.copy_context()``: what it leaves
set is gone when it returns.
"""

from __future__ import annotations

import pytest

from pytest_fak.generated import generate

from .plugin_project import make_small_project, verdicts

SCOPE_LIB = """
import contextlib
import contextvars

_SCOPE = contextvars.ContextVar("scope", default=None)


@contextlib.contextmanager
def scope(name):
    token = _SCOPE.set(name)
    try:
        yield
    finally:
        _SCOPE.reset(token)


def current():
    return _SCOPE.get()
"""

SCOPE_DOC = """# Scope

## SC1 — a scope is undone on the way out

**THEOREM.** Inside `scope(name)` the current scope is `name`; after it, what it was.

**REGIME.** A

**PROOF.** `scopelib:scope` resets its context variable in a `finally`.

**ANCHORS.**
- `scopelib:scope`

**MUTANTS.**
- `kept` — the scope is never undone

**CAVEATS.**
- One thread.
"""

SCOPE_TEST = """
import contextlib
from unittest import mock
import pytest
import scopelib
from pytest_fak import mutant

@mutant("SC1/kept")
def kept():
    @contextlib.contextmanager
    def scope(name):
        scopelib._SCOPE.set(name)
        yield
    return mock.patch.object(scopelib, "scope", scope)

@pytest.mark.fak_theorem("SC1")
def test_scope():
    assert scopelib.current() is None
    with scopelib.scope("a"):
        assert scopelib.current() == "a"
    assert scopelib.current() is None
"""


def test_a_context_variable_a_mutant_leaves_set_does_not_reach_the_control_run(
    pytester: pytest.Pytester,
) -> None:
    make_small_project(pytester, SCOPE_DOC, scopelib=SCOPE_LIB, test_scope=SCOPE_TEST)
    result = pytester.runpytest_subprocess(
        "--fak-theorems", "--fak-mutate=full", "--fak-fail-on=none", "-p", "no:cacheprovider"
    )
    assert result.ret == 0, result.stdout.str()
    v = verdicts(pytester)["SC1"]
    kept = next(m for m in generate("scopelib:scope").mutants if "-        _SCOPE.reset" in m.diff)
    g = v["generated"]
    # the mutant that never resets is killed, and its leftover did not make the control
    # run fail (which would turn every kill of the witness inconclusive)
    assert kept.id not in {s["id"] for s in g["survivors"] + g["unmeasured"]}
    assert g["survivors"] == [] and g["unmeasured"] == []
    assert v["verdict"] == "PROVEN", v
