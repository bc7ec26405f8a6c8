"""Cached mutant results are keyed by what the witness depended on (its fingerprint).

A refund adjudicator's limit is routed through a helper in another module and read from
a data file; its witnesses' results are cached, then the helper, the data file or an
unrelated function changes. An incremental run must give the verdict a full run gives,
re-running exactly the results that depended on what changed; ``fak proofs check`` must
call the theorem STALE from the same fingerprints, without any DEPENDS-ON.
"""

from __future__ import annotations

import contextlib
import io
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from fak_core.cli import main
from pytest_fak.fingerprint import MODULE, Blocks, digest, file_blocks, stale_keys

from .plugin_project import make_small_project, verdicts

LIMITS = '''
import pathlib

_HERE = pathlib.Path(__file__).parent


def limit():
    """The refund limit, from the policy file."""
    return int((_HERE / "policy.txt").read_text().strip())


def unrelated():
    return "nothing a witness runs"
'''

REFUND = """
import limits


def allowed(amount):
    if amount <= limits.limit():
        return True
    return False
"""

DOC = """# Refunds

## RF1 — a refund over the limit is refused

**THEOREM.** `allowed(a)` is true exactly when a is at most the policy's limit (100).

**REGIME.** A

**PROOF.** `refund:allowed` compares the amount with the limit.

**ANCHORS.**
- `refund:allowed`

**MUTANTS.**
- `no-limit` — every refund is allowed

**CAVEATS.**
- Amounts are integers.
"""

WITNESS = """
from unittest import mock
import pytest
from hypothesis import given, strategies as st
import refund
from pytest_fak import mutant

@mutant("RF1/no-limit")
def no_limit():
    return mock.patch.object(refund, "allowed", lambda a: True)

@pytest.mark.fak_theorem("RF1")
@given(st.integers(0, 300))
def test_refund_limit(a):
    assert refund.allowed(a) == (a <= 100)

@pytest.mark.fak_theorem("RF1")
def test_the_limit_itself_is_allowed_and_one_more_is_not():
    assert refund.allowed(100) and not refund.allowed(101)
"""

ARGS = ("--fak-theorems", "--fak-fail-on=none", "--fak-report-dir=r", "-p", "no:randomly")


def _project(pytester: pytest.Pytester) -> None:
    make_small_project(pytester, DOC, limits=LIMITS, refund=REFUND, test_refund=WITNESS)
    (pytester.path / "policy.txt").write_text("100\n", encoding="utf-8")


def _gen(pytester: pytest.Pytester) -> dict[str, Any]:
    g: dict[str, Any] = verdicts(pytester, "r")["RF1"]["generated"]
    return g


def _run(pytester: pytest.Pytester, mode: str = "incremental") -> dict[str, Any]:
    res = pytester.runpytest(*ARGS, f"--fak-mutate={mode}")
    assert res.ret == 0, res.stdout.str()
    return _gen(pytester)


def _fold(g: dict[str, Any]) -> tuple[int, int, list[str]]:
    return g["killed"], g["survived"], sorted(s["id"] for s in g["survivors"])


def _fak(*argv: str) -> subprocess.CompletedProcess[str]:
    """``fak ARGV`` run in this process (so a mutant of the plugin applies to it)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(list(argv))
        except SystemExit as exc:  # argparse
            code = int(exc.code or 0)
    return subprocess.CompletedProcess(list(argv), code, out.getvalue(), err.getvalue())


def _check(pytester: pytest.Pytester) -> subprocess.CompletedProcess[str]:
    root = str(pytester.path)
    return _fak("proofs", "check", "--root", root, "--report", "r/verdicts.json")


# ---------------------------------------------------------------------- the blocks
def test_a_comment_or_a_moved_line_elsewhere_changes_no_block_but_an_edit_changes_its_own() -> None:
    before = file_blocks(LIMITS)
    assert before is not None and set(before.hashes) == {MODULE, "limit", "unrelated"}
    moved = file_blocks("\n\n# a comment\n" + LIMITS.replace("return int(", "return  int("))
    assert moved is not None and moved.hashes == before.hashes
    edited = file_blocks(LIMITS.replace('"nothing a witness runs"', '"something else"'))
    assert edited is not None
    changed = {q for q in before.hashes if before.hashes[q] != edited.hashes[q]}
    assert changed == {"unrelated"}
    constant = file_blocks(LIMITS.replace('"policy.txt"', '"other.txt"'))
    assert constant is not None  # inside limit(): its block, not the module's
    assert {q for q in before.hashes if before.hashes[q] != constant.hashes[q]} == {"limit"}
    module = file_blocks(LIMITS.replace("import pathlib", "import pathlib\nLIMIT = 3"))
    assert module is not None
    assert {q for q in before.hashes if before.hashes[q] != module.hashes[q]} == {MODULE}


def test_a_line_belongs_to_its_innermost_def_and_a_redefinition_is_its_own_block() -> None:
    src = "def f():\n    def g():\n        return 1\n    return g\n\n\ndef f():\n    return 2\n"
    fb = file_blocks(src)
    assert fb is not None
    assert [fb.owner[i] for i in (1, 3, 4, 7, 8)] == ["f", "f.g", "f", "f#2", "f#2"]


def test_a_recorded_dependency_is_stale_once_its_block_or_file_changes(tmp_path: Path) -> None:
    (tmp_path / "limits.py").write_text(LIMITS)
    (tmp_path / "policy.txt").write_text("100\n")
    blocks = Blocks(tmp_path)
    deps = blocks.deps({str(tmp_path / "limits.py"): {9}}, [str(tmp_path / "policy.txt")])
    assert set(deps) == {"limits.py::<module>", "limits.py::limit", "policy.txt"}
    assert stale_keys(deps, Blocks(tmp_path)) == []
    (tmp_path / "policy.txt").write_text("90\n")
    (tmp_path / "limits.py").write_text(LIMITS.replace("strip()", "strip() or 0"))
    assert stale_keys(deps, Blocks(tmp_path)) == ["limits.py::limit", "policy.txt"]
    assert digest(deps) != digest(Blocks(tmp_path).deps({str(tmp_path / "limits.py"): {9}}))


def test_an_installations_metadata_is_no_dependency_even_when_recorded(tmp_path: Path) -> None:
    """An editable install's egg-info is read by entry-point lookups; a fresh clone has
    none yet, so a recorded key of it must not make the run look changed."""
    meta = tmp_path / "pkg.egg-info" / "entry_points.txt"
    meta.parent.mkdir()
    meta.write_text("[fak.commands]\n")
    blocks = Blocks(tmp_path)
    assert blocks.deps({}, [str(meta)]) == {}
    recorded = {"pkg.egg-info/entry_points.txt": "0" * 16}
    assert stale_keys(recorded, blocks) == []


# ---------------------------------------------------------------------- the proof run
def test_a_changed_helper_reruns_its_dependents_and_the_incremental_verdict_is_the_full_one(
    pytester: pytest.Pytester,
) -> None:
    _project(pytester)
    first = _run(pytester)
    assert first["runs"] > 0 and first["cache_hits"] == 0
    assert _run(pytester)["runs"] == 0  # nothing changed: every result is reused
    # only the helper changes (not the anchor, not the witness's module): the limit gains
    # a half, so `amount < limit()` now means what `amount <= limit()` means for integers
    # and that generated mutant of the anchor becomes equivalent (it survives)
    limits = pytester.path / "limits.py"
    limits.write_text(LIMITS.replace(".strip())", ".strip()) + 0.5"), encoding="utf-8")
    again = _run(pytester)
    assert again["runs"] > 0, "the results depended on the helper: they must re-run"
    full = _run(pytester, "full")
    assert _fold(again) == _fold(full)
    assert full["survived"] == first["survived"] + 1, "the helper change made one equivalent"


def test_an_unrelated_edit_reruns_nothing_and_a_data_file_edit_reruns_its_readers(
    pytester: pytest.Pytester,
) -> None:
    _project(pytester)
    _run(pytester)
    limits = pytester.path / "limits.py"
    limits.write_text(
        LIMITS.replace("nothing a witness runs", "still nothing") + "\n# a note\n",
        encoding="utf-8",
    )
    assert _run(pytester)["runs"] == 0
    assert _check(pytester).returncode == 0
    # the policy file is data the witnesses read: the theorem is now false, and both the
    # check (without DEPENDS-ON) and the run see it
    (pytester.path / "policy.txt").write_text("90\n", encoding="utf-8")
    check = _check(pytester)
    assert check.returncode == 1, check.stdout
    assert "STALE RF1" in check.stdout and "policy.txt" in check.stdout
    res = pytester.runpytest(*ARGS, "--fak-mutate=incremental")
    assert verdicts(pytester, "r")["RF1"]["verdict"] == "REFUTED", res.stdout.str()


def test_fak_proofs_check_calls_a_theorem_stale_when_a_callee_changed(
    pytester: pytest.Pytester,
) -> None:
    _project(pytester)
    _run(pytester)
    assert _check(pytester).returncode == 0
    limits = pytester.path / "limits.py"
    limits.write_text(LIMITS.replace("strip())", "strip()) + 0"), encoding="utf-8")
    check = _check(pytester)
    assert check.returncode == 1
    assert "limits.py::limit" in check.stdout, check.stdout


def test_the_cache_keeps_one_deciding_row_per_mutant_and_is_deterministic(
    pytester: pytest.Pytester,
) -> None:
    _project(pytester)
    _run(pytester, "full")
    path = pytester.path / ".fak-cache" / "mutants.json"
    first = path.read_text()
    doc = json.loads(first)
    assert doc["schema"] == "pytest-fak/mutant-cache/v3"
    for key, rows in doc["mutants"].items():
        assert key.startswith("refund:allowed/")
        kills = [r for r in rows if r[1] != "survived"]
        assert len(kills) <= 1, rows  # one witness decides; the other's run is not kept
        assert all(r[2] in doc["fingerprints"] for r in rows)
    assert set(doc["witnesses"]) == {
        "test_refund.py::test_refund_limit",
        "test_refund.py::test_the_limit_itself_is_allowed_and_one_more_is_not",
    }
    _run(pytester)
    assert path.read_text() == first


def test_a_cache_of_another_build_is_not_read_and_the_run_says_why(
    pytester: pytest.Pytester,
) -> None:
    _project(pytester)
    _run(pytester)
    path = pytester.path / ".fak-cache" / "mutants.json"
    doc = json.loads(path.read_text())
    doc["build"] = "pytest-fak 0.0.1 (0000000000000000); hypothesis 1"
    path.write_text(json.dumps(doc))
    res = pytester.runpytest(*ARGS, "--fak-mutate=incremental")
    assert "mutant cache not used" in res.stdout.str() and "0.0.1" in res.stdout.str()
    assert _gen(pytester)["cache_hits"] == 0


# ---------------------------------------------------------------------- shards
SHARDED_DOC = (
    DOC
    + """
## RF2 — a refund is never allowed for a negative limit

**THEOREM.** `limit()` is the policy file's number.

**REGIME.** A

**PROOF.** `limits:limit` reads the file.

**ANCHORS.**
- `limits:limit`

**MUTANTS.**
- `off-by-one` — the limit is one more

**CAVEATS.**
- One file.
"""
)

SHARDED_WITNESS = (
    WITNESS
    + """
import limits

@mutant("RF2/off-by-one")
def off_by_one():
    real = limits.limit
    return mock.patch.object(limits, "limit", lambda: real() + 1)

@pytest.mark.fak_theorem("RF2")
def test_the_limit_is_the_files():
    assert limits.limit() == 100
"""
)


def test_shards_merged_give_the_verdicts_of_one_run_and_the_assembly_reruns_nothing(
    pytester: pytest.Pytester,
) -> None:
    make_small_project(
        pytester, SHARDED_DOC, limits=LIMITS, refund=REFUND, test_refund=SHARDED_WITNESS
    )
    (pytester.path / "policy.txt").write_text("100\n", encoding="utf-8")
    whole = pytester.runpytest(*ARGS, "--fak-mutate=full")
    assert whole.ret == 0
    one = {k: _fold(v["generated"]) for k, v in verdicts(pytester, "r").items()}
    caches = []
    ran: list[set[str]] = []
    for k in (1, 2):
        d = f"--fak-cache-dir=shard{k}"
        res = pytester.runpytest(*ARGS, "--fak-mutate=full", f"--fak-shard={k}/2", d)
        assert res.ret == 0, res.stdout.str()
        assert f"--fak-shard {k}/2" in res.stdout.str()
        caches.append(str(pytester.path / f"shard{k}" / "mutants.json"))
        ran.append({i for i, t in verdicts(pytester, "r").items() if t["ran"]})
    # every theorem in exactly one shard
    assert ran[0] and ran[1] and not ran[0] & ran[1] and ran[0] | ran[1] == set(one)
    merged = pytester.path / "merged" / "mutants.json"
    out = _fak("cache", "merge", str(merged), *caches)
    assert out.returncode == 0, out.stderr
    res = pytester.runpytest(*ARGS, "--fak-mutate=incremental", "--fak-cache-dir=merged")
    assert res.ret == 0
    v = verdicts(pytester, "r")
    assert {k: _fold(t["generated"]) for k, t in v.items()} == one
    assert all(t["generated"]["runs"] == 0 for t in v.values())


def test_a_shard_option_that_names_no_shard_is_refused(pytester: pytest.Pytester) -> None:
    _project(pytester)
    res = pytester.runpytest(*ARGS, "--fak-shard=3/2")
    assert res.ret == pytest.ExitCode.USAGE_ERROR
    assert "1 <= K <= N" in res.stderr.str()


def test_merge_refuses_a_cache_of_another_build(pytester: pytest.Pytester) -> None:
    _project(pytester)
    _run(pytester)
    path = pytester.path / ".fak-cache" / "mutants.json"
    doc = json.loads(path.read_text())
    doc["build"] = "another"
    other = pytester.path / "other.json"
    other.write_text(json.dumps(doc))
    merged = pytester.path / "m.json"
    out = _fak("cache", "merge", str(merged), str(path), str(other))
    assert out.returncode == 2 and "another build" in out.stderr
    assert not merged.exists()
