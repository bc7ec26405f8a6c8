"""Keeps the counterexamples Hypothesis found under mutants out of its patch file.

A witness's mutant re-runs happen inside its own test call, so every counterexample
Hypothesis finds while a mutant is killed is noted on the witness's item, and
Hypothesis's pytest plugin then offers them at the end of the session as a patch "to add
failing test cases to your code", though every witness passed. Those examples fail
mutated code only: when the witness itself passed, they are dropped from its item before
its report is made. A witness that fails on the real code keeps them.

Registered in proof mode only. Nothing here changes a re-run's outcome, so this module is
not part of the plugin build that cached outcomes are keyed by.
"""

from __future__ import annotations

import pytest

__all__ = ["FAILING_EXAMPLES_KEY"]

#: Where Hypothesis notes a test's failing examples on its pytest item
#: (``_hypothesis_pytestplugin.FAILING_EXAMPLES_KEY``; a test checks the two agree).
FAILING_EXAMPLES_KEY = "_hypothesis_failing_examples"


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> None:
    """Before Hypothesis's own report hook reads them: a passing call's examples go."""
    if call.when == "call" and call.excinfo is None:
        item.__dict__.pop(FAILING_EXAMPLES_KEY, None)
