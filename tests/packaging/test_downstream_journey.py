"""A downstream project's first afternoon with pytest-fak, driven as a user drives it (issue 31).

One wheel of this tree is installed with the ``mutate`` extra and pytest-xdist (at this
environment's versions) into a fresh venv shared by the module
(:mod:`tests.packaging.wheelenv`). The project (:data:`PROJECT`: a shop with its own
adjudicator, its kernel hook, its declared mutants and two theorems, SH1.1 with a strong
witness and SH1.2 with a weak one that leaves one generated survivor in the shop's code)
is written into a temporary git repository and proved once; each test copies it and runs
``pytest`` and ``fak`` there by subprocess, at ``-n 0`` and, for the runs whose outcome
xdist changes, ``-n 2``. Selected with ``-m install``.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.packaging.wheelenv import Venv, build_wheel, install

pytestmark = [
    pytest.mark.skipif(sys.platform == "win32", reason="a POSIX venv layout (bin/)"),
    pytest.mark.install,
]

PROJECT = {
    ".gitignore": "__pycache__/\n.hypothesis/\n.fak-cache/\n",
    "pytest.ini": """\
[pytest]
testpaths = tests
fak_max_examples = 10
fak_mutant_examples = 5
""",
    "shop-policy.json": """\
{"version": "fak-policy/v2", "allow": ["refund"], "tools": {"refund": {"sink": "SPEND"}}}
""",
    "shop_rules.py": '''\
"""The shop's own adjudicator: no refund above the cap."""

from fak_core import Reason, Verdict


class RefundCap:
    """DENY/POLICY_BLOCK a ``refund`` whose ``amount`` is above ``cap``."""

    def __init__(self, cap=100):
        self.cap = cap

    def adjudicate(self, view):
        if view.call.tool != "refund":
            return Verdict.defer("refund-cap")
        amount = view.args().get("amount")
        if amount > self.cap:
            claim = f"{amount} over {self.cap}"
            return Verdict.deny(Reason.POLICY_BLOCK, "refund-cap", claim=claim)
        return Verdict.defer("refund-cap")


REFUND_SCHEMA = {
    "type": "object",
    "properties": {"amount": {"type": "integer", "minimum": 0, "maximum": 1000}},
    "required": ["amount"],
    "additionalProperties": False,
}
''',
    "shop_discounts.py": '''\
"""Which discounts the shop allows."""


def discount_allowed(percent, limit=50):
    return 0 <= percent <= limit
''',
    "conftest.py": """\
from pathlib import Path
from unittest import mock

import pytest
import shop_discounts
from shop_rules import REFUND_SCHEMA, RefundCap

from fak_core import Kernel, load_policy
from pytest_fak import mutant


@pytest.hookimpl(optionalhook=True)
def pytest_fak_make_kernel(config):
    kernel = Kernel(load_policy(Path(__file__).parent / "shop-policy.json"))
    kernel.register_schema("refund", REFUND_SCHEMA)
    kernel.add_adjudicator(RefundCap(cap=100), 50, name="refund-cap")
    return kernel


@mutant("SH1.1/no-cap")
def no_cap():
    uncapped = lambda self, view: RefundCap(10**9).adjudicate(view)
    return mock.patch.object(RefundCap, "adjudicate", uncapped)


@mutant("SH1.2/any-discount")
def any_discount():
    return mock.patch.object(shop_discounts, "discount_allowed", lambda p, limit=50: True)
""",
    "tests/test_refunds.py": """\
import json

import pytest
from hypothesis import example, given
from hypothesis import strategies as st
from shop_rules import REFUND_SCHEMA, RefundCap

from fak_core import Reason, ToolCall, Verdict, VerdictKind
from fak_core.view import CallView
from pytest_fak.strategies import tool_calls


@pytest.mark.fak_theorem("SH1.1")
@given(call=tool_calls("refund", REFUND_SCHEMA))
@example(call=ToolCall("refund", '{"amount": 101}'))
@example(call=ToolCall("refund", '{"amount": 100}'))
def test_allowed_refunds_are_at_most_the_cap(fak_kernel_factory, call):
    verdict = fak_kernel_factory().decide(call)
    amount = json.loads(call.args)["amount"]
    assert (verdict.kind == VerdictKind.ALLOW) == (amount <= 100), (amount, verdict)


@pytest.mark.fak_theorem("SH1.1")
@given(
    tool=st.sampled_from(["refund", "Refund", "charge"]),
    amount=st.integers(-5, 300),
    cap=st.integers(0, 200),
)
@example(tool="refund", amount=101, cap=100)
@example(tool="refund", amount=100, cap=100)
def test_the_rung_denies_exactly_amounts_over_the_cap(tool, amount, cap):
    verdict = RefundCap(cap).adjudicate(CallView(ToolCall(tool, json.dumps({"amount": amount}))))
    if tool == "refund" and amount > cap:
        assert (verdict.kind, verdict.reason) == (VerdictKind.DENY, Reason.POLICY_BLOCK)
        assert (verdict.by, verdict.claim) == ("refund-cap", f"{amount} over {cap}")
    else:
        assert verdict == Verdict.defer("refund-cap"), verdict
""",
    # the weak witness: it never draws the limit itself, so `percent < limit` survives
    "tests/test_shop_discounts.py": """\
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

import shop_discounts


@pytest.mark.fak_theorem("SH1.2")
@given(percent=st.integers(-100, 49) | st.integers(51, 200))
@example(percent=0)
@example(percent=-1)
@example(percent=51)
def test_discounts_up_to_half_are_allowed(percent):
    assert shop_discounts.discount_allowed(percent) == (0 <= percent <= 50)
""",
    "theorems/shop.md": """\
# Shop

**MUTANT-MODULES.**
- `conftest`

## SH1.1 — no refund above the cap

**THEOREM.** The kernel allows a `refund` whose arguments satisfy the schema exactly when
its `amount` is at most 100; the rung denies exactly the refunds above its cap.

**REGIME.** D

**PROOF.** `shop_rules:RefundCap.adjudicate` denies an amount above the cap, and the fold
lets a DENY outrank the policy's ALLOW.

**ANCHORS.**
- `shop_rules:RefundCap.adjudicate`
- `fak_core.fold:fold`

**MUTANTS.**
- `no-cap` — any amount is refunded

**CAVEATS.**
- Amounts are whole units.

## SH1.2 — no discount above half

**THEOREM.** A discount is allowed exactly from 0 to 50 percent.

**REGIME.** A

**PROOF.** `shop_discounts:discount_allowed` compares with both bounds.

**ANCHORS.**
- `shop_discounts:discount_allowed`

**MUTANTS.**
- `any-discount` — every discount is allowed

**CAVEATS.**
- Only the default limit.
""",
}

#: the one generated mutant SH1.2's witness cannot kill (it never draws 50)
SURVIVOR_DIFF = ("-    return 0 <= percent <= limit", "+    return 0 <= percent < limit")
NOT_MUTATED = (
    "fak: 1 anchors in installed code were not mutated (modules: fak_core.fold); they are "
    "installed code, not this project's: pass --fak-mutate-installed (or ini "
    "fak_mutate_installed = true) to mutate them"
)
XDIST = [pytest.param("0", id="n0"), pytest.param("2", id="n2")]


def git(*args: str, cwd: Path) -> str:
    """git in the shop's own repository (no ``GIT_*`` variable of this run's)."""
    who = ("-c", "user.name=Shop", "-c", "user.email=shop@example.com")
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    cmd = ["git", *who, "-c", "commit.gpgsign=false", *args]
    done = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, check=True)
    return done.stdout.strip()


def last_line(out: str) -> str:
    return out.rstrip().splitlines()[-1]


def report(project: Path) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads((project / "proofs" / "verdicts.json").read_text())
    return doc


def theorems(project: Path) -> dict[str, dict[str, Any]]:
    return {t["id"]: t for t in report(project)["theorems"]}


def edit(path: Path, old: str, new: str) -> None:
    """Edit a module as a user does; its bytecode goes too (an edit of the same size in
    the same second would leave a cached .pyc looking current)."""
    text = path.read_text()
    assert old in text, old
    path.write_text(text.replace(old, new))
    shutil.rmtree(path.parent / "__pycache__", ignore_errors=True)


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Venv:
    wheel = build_wheel(tmp_path_factory.mktemp("wheel"))
    return install(wheel, tmp_path_factory.mktemp("venv"), "mutate", ("pytest-xdist",))


@pytest.fixture(scope="module")
def proven(venv: Venv, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The shop in a git repository, proved once (generated mutants off, the plugin's
    default) and committed with its report, as a user leaves it."""
    shop = tmp_path_factory.mktemp("template") / "shop"
    for name, text in PROJECT.items():
        (shop / name).parent.mkdir(parents=True, exist_ok=True)
        (shop / name).write_text(text)
    git("init", "-q", cwd=shop)
    git("add", "-A", cwd=shop)
    git("commit", "-q", "-m", "the shop", cwd=shop)
    proof = venv.pytest("--fak-theorems", cwd=shop)
    assert proof.returncode == 0, proof.stdout + proof.stderr
    git("add", "proofs", cwd=shop)
    git("commit", "-q", "-m", "proofs", cwd=shop)
    return shop


@pytest.fixture
def shop(proven: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "shop"
    shutil.copytree(proven, copy, ignore=shutil.ignore_patterns("__pycache__", ".hypothesis"))
    return copy


def test_a_first_proof_run_names_its_kernel_hook_and_a_misspelt_one(venv: Venv, shop: Path) -> None:
    proof = venv.pytest("--fak-theorems", cwd=shop)
    assert proof.returncode == 0, proof.stdout + proof.stderr
    assert "\nfak: kernel factory: conftest:pytest_fak_make_kernel\n" in proof.stdout
    assert last_line(proof.stdout) == "fak: 2 PROVEN", proof.stdout
    doc = report(shop)
    assert doc["run"]["kernel_factory"] == "conftest:pytest_fak_make_kernel"
    # the report's provenance: the commit the run started from, its work tree clean
    assert doc["git"]["commit"] == git("rev-parse", "HEAD", cwd=shop)
    assert doc["git"]["dirty"] is False, doc["git"]

    off = venv.pytest("-p", "no:fak", cwd=shop)
    assert "unknown hook" not in off.stdout + off.stderr, off.stdout + off.stderr
    assert off.returncode == pytest.ExitCode.TESTS_FAILED, off.stdout + off.stderr
    assert "fixture 'fak_kernel_factory' not found" in off.stdout, off.stdout

    edit(shop / "conftest.py", "def pytest_fak_make_kernel(", "def pytest_fak_make_kernal(")
    typo = venv.pytest("--fak-theorems", cwd=shop)
    assert typo.returncode == pytest.ExitCode.USAGE_ERROR, typo.stdout + typo.stderr
    assert typo.stderr.strip() == (
        f"ERROR: {shop / 'conftest.py'}: pytest_fak_make_kernal is not a pytest_fak hook, "
        "and pytest would ignore it; did you mean pytest_fak_make_kernel? (the hooks: "
        "pytest_fak_make_kernel, pytest_fak_modify_report, pytest_fak_theorem_dirs)"
    )


@pytest.mark.parametrize("n", XDIST)
def test_a_survivor_in_the_users_code_is_listed_shown_and_gated(
    venv: Venv, shop: Path, n: str
) -> None:
    run = venv.pytest("--fak-theorems", "--fak-mutate=incremental", "-n", n, cwd=shop)
    out = run.stdout
    assert run.returncode == pytest.ExitCode.TESTS_FAILED, out + run.stderr
    assert last_line(out) == "fak: FAILED: 1 VACUOUS (SH1.2) · 1 PROVEN", out
    assert "\nfak: kernel factory: conftest:pytest_fak_make_kernel\n" in out
    vs = theorems(shop)
    # SH1.1 anchors fak_core's fold, installed: measured, not mutated, and said so
    assert vs["SH1.1"]["verdict"] == "PROVEN", vs["SH1.1"]["reasons"]
    assert {a["symbol"]: a["covered"] for a in vs["SH1.1"]["anchors"]} == {
        "shop_rules:RefundCap.adjudicate": True,
        "fak_core.fold:fold": True,
    }
    assert f"\n{NOT_MUTATED}\n" in out, out
    assert report(shop)["run"]["not_mutated"]["symbols"] == ["fak_core.fold:fold"]
    assert vs["SH1.1"]["generated"]["survived"] == 0
    assert vs["SH1.1"]["generated"]["killed"] == vs["SH1.1"]["generated"]["generated"] > 0
    g = vs["SH1.2"]["generated"]
    assert (vs["SH1.2"]["verdict"], g["survived"]) == ("VACUOUS", 1), vs["SH1.2"]
    (survivor,) = g["survivors"]
    mid = survivor["id"]
    assert mid.startswith("shop_discounts:discount_allowed/compare-boundary/")
    assert f"\n  shop_discounts.py:5: {mid} (compare-boundary; SH1.2)\n" in out, out

    fak = venv.path / "bin" / "fak"
    listed = venv.run(fak, "mutants", "list", "--survivors", cwd=shop)
    assert listed.returncode == 0, listed.stdout + listed.stderr
    rows = [ln for ln in listed.stdout.splitlines() if not ln.startswith("fak mutants:")]
    assert rows == [f"{mid}  SH1.2  survived  shop_discounts.py:5"], listed.stdout
    shown = venv.run(fak, "mutants", "show", mid, cwd=shop)
    assert shown.returncode == 0, shown.stdout + shown.stderr
    lines = shown.stdout.splitlines()
    assert "  location:  shop_discounts.py:5" in lines, shown.stdout
    assert (
        "  witnesses: tests/test_shop_discounts.py::test_discounts_up_to_half_are_allowed "
        "(survived)"
    ) in lines
    assert all(d in lines for d in SURVIVOR_DIFF), shown.stdout
    snippet = lines[lines.index("**EQUIVALENT-MUTANTS.**") + 1]
    assert snippet.startswith(f"- `{mid}` — "), snippet


def test_fail_under_lets_the_shop_adopt_generated_mutants_gradually(venv: Venv, shop: Path) -> None:
    mutate = ("--fak-theorems", "--fak-mutate=incremental")
    below = venv.pytest(*mutate, "--fak-fail-under=SH1.2=100", cwd=shop)
    out = below.stdout
    assert below.returncode == pytest.ExitCode.TESTS_FAILED, out + below.stderr
    gs = {k: t["generated"] for k, t in theorems(shop).items()}
    own = round(100 * gs["SH1.2"]["killed"] / (gs["SH1.2"]["generated"] - gs["SH1.2"]["waived"]), 2)
    assert own < 100
    assert last_line(out) == (
        f"fak: FAILED: mutation score {own:g}% < 100% (SH1.2) · 1 PROVEN · 1 VACUOUS"
    ), out
    # the overall score (killed / (generated - waived) over both theorems) as the threshold
    killed = sum(g["killed"] for g in gs.values())
    score = round(100 * killed / sum(g["generated"] - g["waived"] for g in gs.values()), 2)
    at = venv.pytest(*mutate, f"--fak-fail-under={score}", cwd=shop)
    assert at.returncode == 0, at.stdout + at.stderr
    assert last_line(at.stdout) == f"fak: 1 PROVEN · 1 VACUOUS · mutation score {score:g}%"
    gate = report(shop)["run"]["fail_under"]
    assert (gate["overall"], gate["score"], gate["below"]) == (score, score, [])
    assert theorems(shop)["SH1.2"]["verdict"] == "VACUOUS"  # still reported as it is


SLOW = "".join(f"\n\ndef test_checkout_{i}():\n    time.sleep(0.2)\n" for i in range(20))


@pytest.mark.parametrize("n", XDIST)
def test_x_stops_early_and_decides_nothing_it_did_not_run(venv: Venv, shop: Path, n: str) -> None:
    before = (shop / "proofs" / "verdicts.json").read_bytes()
    (shop / "tests" / "test_slow_checkout.py").write_text("import time" + SLOW)
    # the user breaks the cap (a refund of 101 passes) and stops at the first failure
    edit(shop / "shop_rules.py", "if amount > self.cap:", "if amount > self.cap + 1:")
    run = venv.pytest("--fak-theorems", "-x", "-n", n, cwd=shop)
    out = run.stdout
    if n != "0":  # xdist ends the run interrupted: no verdict, the full report stays
        assert run.returncode == pytest.ExitCode.INTERRUPTED, out + run.stderr
        assert (
            last_line(out) == "fak: FAILED: no verdicts (the run stopped); the report is unchanged"
        )
        assert (shop / "proofs" / "verdicts.json").read_bytes() == before
        return
    vs = theorems(shop)
    assert (vs["SH1.1"]["verdict"], vs["SH1.1"]["ran"]) == ("REFUTED", True)
    kept = vs["SH1.2"]
    assert (kept["verdict"], kept["ran"]) == ("PROVEN", False)  # not OPEN, an orphan
    assert kept["carried_over"]["reason"] == "none of its 1 witnesses ran (the run stopped first)"
    assert run.returncode == pytest.ExitCode.TESTS_FAILED, out + run.stderr
    assert report(shop)["run"]["partial"] is True
    assert last_line(out) == "fak: FAILED: 1 REFUTED (SH1.1) · 1 not run", out
    assert (
        "\nfak: partial run (2 collected witnesses did not run (stopping after 1 failures)): "
        "1 theorems not run, 1 keep their last verdict (carried over)\n"
    ) in out, out


def test_compare_takes_a_path_outside_the_project_in_the_space_form(
    venv: Venv, shop: Path, tmp_path: Path
) -> None:
    prev = tmp_path / "elsewhere" / "prev.json"
    prev.parent.mkdir()
    shutil.copy(shop / "proofs" / "verdicts.json", prev)
    edit(shop / "shop_rules.py", "if amount > self.cap:", "if amount >= self.cap:")
    run = venv.pytest("--fak-theorems", "--fak-compare", str(prev), cwd=shop)
    out = run.stdout
    assert f"\nrootdir: {shop}\n" in out, out
    assert run.returncode == pytest.ExitCode.TESTS_FAILED, out + run.stderr
    assert f"\nfak: against {prev}: 1 changes\n  SH1.1: PROVEN -> REFUTED\n" in out, out


def test_a_project_with_no_theorems_fails_unless_none_is_expected(venv: Venv, shop: Path) -> None:
    shutil.rmtree(shop / "theorems")
    shutil.rmtree(shop / "proofs")
    (shop / "tests" / "test_refunds.py").unlink()
    (shop / "tests" / "test_shop_discounts.py").write_text(
        "import shop_discounts\n\n\ndef test_half():\n"
        "    assert shop_discounts.discount_allowed(50)\n"
    )
    none = venv.pytest("--fak-theorems", cwd=shop)
    assert none.returncode == pytest.ExitCode.NO_TESTS_COLLECTED, none.stdout + none.stderr
    assert last_line(none.stdout) == (
        "fak: FAILED: no theorems found (no theorems/ directory in the rootdir); write them in "
        "theorems/*.md, point --fak-theorems-dir or ini fak_theorems_dirs at them, or pass "
        "--fak-no-theorems-ok if none is expected; nothing written"
    )
    assert not (shop / "proofs").exists()
    ok = venv.pytest("--fak-theorems", "--fak-no-theorems-ok", cwd=shop)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert re.search(r"^=+ 1 passed in ", ok.stdout, re.M), ok.stdout


def test_a_partial_run_carrying_a_changed_verdict_fails_it_as_stale(venv: Venv, shop: Path) -> None:
    date = theorems(shop)["SH1.2"]["date"]
    edit(shop / "shop_discounts.py", "return 0 <= percent <= limit", "return 0 <= percent < limit")
    run = venv.pytest("--fak-theorems", "--fak-theorem=SH1.1", cwd=shop)
    out = run.stdout
    assert run.returncode == pytest.ExitCode.TESTS_FAILED, out + run.stderr
    assert (
        f"\nSTALE      SH1.2 no discount above half: carried over (PROVEN of {date}), but the "
        "source of anchor shop_discounts:discount_allowed changed since"
    ) in out, out
    assert last_line(out) == "fak: FAILED: 1 STALE (SH1.2) · 1 PROVEN · 1 not run", out
    kept = theorems(shop)["SH1.2"]
    assert (kept["verdict"], kept["ran"], kept["date"]) == ("STALE", False, date)
    assert kept["carried_over"]["verdict"] == "PROVEN"
