"""pytester tests: a declared mutant is in force while the witness's fixtures are built
(issue 15): a kernel a fixture built from the user's adjudicator carries the mutant."""

from __future__ import annotations

import pytest

from .plugin_project import verdicts

RULES = '''
from fak_core import Reason, Verdict


def refund_limit(view):
    """Deny a booking whose refund amount is over 100 (the floor policy allows the tool)."""
    if view.call.tool != "book_reservation":
        return Verdict.defer("refund-limit")
    args = view.args()
    amount = args.get("amount") if isinstance(args, dict) else None
    if isinstance(amount, int) and not isinstance(amount, bool) and amount > 100:
        return Verdict.deny(Reason.POLICY_BLOCK, "refund-limit", claim="over 100")
    return Verdict.defer("refund-limit")
'''

CONFTEST = '''
import pytest
from unittest import mock

import refundrules
from fak_core import Kernel, Verdict
from pytest_fak import mutant

BUILT = []


@pytest.hookimpl(optionalhook=True)
def pytest_fak_make_kernel(config):
    kernel = Kernel()
    # the function object is captured now: patching the module later does not reach it
    kernel.add_adjudicator(refundrules.refund_limit, 50, name="refund-limit")
    BUILT.append(kernel)
    return kernel


@mutant("RF1.1/no-limit")
def no_limit():
    """The refund rule lets every amount through."""
    return mock.patch.object(refundrules, "refund_limit", lambda view: Verdict.defer("x"))


@pytest.fixture
def refund_kernel(fak_kernel):
    """A fixture of the user's own, over the plugin's fixture."""
    return fak_kernel
'''

DOC = """# Refunds

## RF1.1 — no refund over 100

**THEOREM.** A booking with a refund amount over 100 is denied.

**REGIME.** A

**PROOF.** `refundrules:refund_limit` denies it.

**ANCHORS.**
- `refundrules:refund_limit`

**MUTANTS.**
- `no-limit` — the rule lets every amount through

**CAVEATS.**
- Integer amounts only.
"""

WITNESS = """
import json
import pytest
from hypothesis import given, settings, HealthCheck, strategies as st
from fak_core import ToolCall, VerdictKind

@pytest.mark.fak_theorem("RF1.1")
def test_refund_over_limit_denied(refund_kernel):
    v = refund_kernel.decide(ToolCall("book_reservation", json.dumps({"amount": 101}), "s1"))
    assert v.kind == VerdictKind.DENY, v

@pytest.mark.fak_theorem("RF1.1")
def test_refund_pair(fak_session_pair):
    clean, tainted = fak_session_pair.decide_both("book_reservation", json.dumps({"amount": 500}))
    assert clean.kind == VerdictKind.DENY and tainted.kind == VerdictKind.DENY
"""


def _project(pytester: pytest.Pytester) -> None:
    pytester.syspathinsert()
    pytester.makeini("[pytest]\naddopts = -p no:schemathesis\n")
    pytester.makepyfile(refundrules=RULES)
    pytester.makeconftest(CONFTEST)
    (pytester.path / "theorems").mkdir()
    (pytester.path / "theorems" / "refunds.md").write_text(DOC, encoding="utf-8")
    pytester.makepyfile(test_refunds=WITNESS)


def test_a_mutant_of_the_users_adjudicator_reaches_fixture_built_kernels(
    pytester: pytest.Pytester,
) -> None:
    _project(pytester)
    result = pytester.runpytest("--fak-theorems")
    result.assert_outcomes(passed=2)
    t = verdicts(pytester)["RF1.1"]
    assert t["verdict"] == "PROVEN", t["reasons"]
    for w in t["witnesses"]:
        assert w["mutants"] == {"RF1.1/no-limit": "killed"}, w


def test_the_mutant_is_undone_before_the_fixtures_are_built_again(
    pytester: pytest.Pytester,
) -> None:
    """Teardown and the control run see the real rule: a kill needs the witness to pass
    again unmutated, on fixtures built unmutated."""
    _project(pytester)
    pytester.makepyfile(
        test_order="""
import json
import pytest
import refundrules
from fak_core import ToolCall, VerdictKind

REAL = refundrules.refund_limit
SEEN = []

@pytest.fixture
def rule_at_build(fak_kernel):
    SEEN.append(refundrules.refund_limit is REAL)
    yield fak_kernel
    SEEN.append(("teardown", refundrules.refund_limit is REAL))

@pytest.mark.fak_theorem("RF1.1")
def test_order(rule_at_build):
    v = rule_at_build.decide(ToolCall("book_reservation", json.dumps({"amount": 101}), "s1"))
    assert v.kind == VerdictKind.DENY, v

def test_zz_seen():
    # built real, torn down real; built mutated, torn down mutated; built real (control)
    # and torn down real by pytest
    assert SEEN == [True, ("teardown", True), False, ("teardown", False), True,
                    ("teardown", True)], SEEN
"""
    )
    result = pytester.runpytest("--fak-theorems")
    result.assert_outcomes(passed=4)
    assert verdicts(pytester)["RF1.1"]["verdict"] == "PROVEN"
