"""Waivers that survive edits: a generated mutant's id is the mutated code (not its place),
an in-code ``# pragma: fak-equivalent`` waiver, a stale waiver that is an error of its own
theorem only, and a waiver that hands its mutant to another theorem's claim."""

from __future__ import annotations

import importlib
import itertools
import re
import textwrap
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest

from pytest_fak.generated import GeneratedMutant, generate
from pytest_fak.theorems import Theorem, parse_document
from pytest_fak.verdicts import ERROR, PROVEN, VACUOUS, WitnessEvidence, decide_all

from .plugin_project import make_small_project, verdicts

ID = re.compile(r"^[\w.]+:[\w.]+/[a-z-]+/[0-9a-f]{8}(?:#[2-9]\d*)?$")

BASE = """
def clamp(x, lo=0, hi=10):
    if x < lo:
        return lo
    if x > hi:
        return hi
    return x
"""

_names = itertools.count()


@pytest.fixture
def module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    """Writes source as a fresh module (a new name each time) and returns its name."""
    monkeypatch.syspath_prepend(str(tmp_path))

    def write(source: str) -> str:
        name = f"waiver_sample_{next(_names)}"
        (tmp_path / f"{name}.py").write_text(textwrap.dedent(source), encoding="utf-8")
        importlib.invalidate_caches()
        return name

    return write


def _ids(module: str, function: str = "clamp") -> list[str]:
    """The mutant ids of ``module:function`` without their module (comparable across)."""
    return [m.id.split(":", 1)[1] for m in generate(f"{module}:{function}").mutants]


# ---------------------------------------------------------------- the id


@pytest.mark.parametrize(
    "edited",
    [
        pytest.param(
            BASE.replace("    if x < lo:", "    # clamp below first\n\n    if x < lo:").replace(
                "return hi", "return hi  # the upper bound"
            ),
            id="comments-and-a-blank-line",
        ),
        pytest.param(
            "import math\n\n\ndef other():\n    return math.pi\n\n" + BASE,
            id="the-function-moved-down-the-file",
        ),
        pytest.param(
            "class Box:\n" + textwrap.indent(BASE.replace("(x,", "(self, x,"), "    "),
            id="re-indented-into-a-class",
        ),
        pytest.param(
            BASE.replace("if x > hi:", "if (\n        x\n        > hi\n    ):"),
            id="the-condition-re-wrapped",
        ),
    ],
)
def test_an_id_is_the_same_after_edits_that_change_no_mutated_code(
    module: Any, edited: str
) -> None:
    before = _ids(module(BASE))
    name = module(edited)
    after = _ids(name, "Box.clamp" if "class Box" in edited else "clamp")
    assert all(ID.match(f"m:{i}") for i in before), before
    if "class Box" in edited:
        after = [i.replace("Box.clamp", "clamp", 1) for i in after]
    assert after == before


def test_a_line_inserted_above_keeps_the_ids_of_the_mutants_below(module: Any) -> None:
    before = _ids(module(BASE))
    after = _ids(
        module(BASE.replace("    if x < lo:", "    log = []\n    log.append(x)\n    if x < lo:"))
    )
    added = [i for i in after if i not in before]
    assert [i.split("/")[1] for i in added] == ["remove-statement"]  # the new call alone
    assert [i for i in after if i not in added] == before


def test_an_edit_of_the_mutated_code_changes_its_id_and_no_other(module: Any) -> None:
    before = generate(f"{module(BASE)}:clamp").mutants
    # `x > hi` rewritten `hi < x`, and the line before re-wrapped (which moves `x > hi`)
    edited = BASE.replace("x > hi", "hi < x").replace("if x < lo:", "if (\n        x < lo\n    ):")
    after = generate(f"{module(edited)}:clamp").mutants

    def cmp(ms: tuple[GeneratedMutant, ...]) -> list[str]:
        return [m.id.split(":", 1)[1] for m in ms if m.operator == "compare-boundary"]

    low_before, high_before = cmp(before)
    low_after, high_after = cmp(after)
    assert low_after == low_before  # `x < lo` is as it was, only wrapped
    assert high_after != high_before
    kept = {m.id.split(":", 1)[1] for m in after} & {m.id.split(":", 1)[1] for m in before}
    assert len(kept) == len(before) - 3  # those of `x > hi`: two of it, one of its `if`


def test_spaces_inside_a_string_count_in_the_id_and_its_wrapping_does_not(module: Any) -> None:
    one = _ids(module('def f():\n    return "a b"\n'), "f")
    wrapped = _ids(module('def f():\n    return (\n        "a b"\n    )\n'), "f")
    two = _ids(module('def f():\n    return "a  b"\n'), "f")
    assert [i.split("/")[1] for i in one] == ["return-value", "constant"]
    assert wrapped == one
    assert one[0] != two[0]  # `return "a b"` → `return None`
    assert one[1] != two[1]  # `"a b"` → `""`


def test_the_same_change_again_in_a_function_gets_an_occurrence_suffix(module: Any) -> None:
    twice = textwrap.dedent(
        """
        def count(xs, ys):
            n = 0
            for x in xs:
                n += 1
            for y in ys:
                n += 1
            return n
        """
    )
    name = module(twice)
    ms = [m for m in generate(f"{name}:count").mutants if m.operator == "arith"]
    first, second = ms
    assert second.id == first.id + "#2"
    assert "#" not in first.id and first.line < second.line
    # the first loop gone, the one left takes the id without a suffix
    once = twice.replace("    for x in xs:\n        n += 1\n", "")
    (left,) = [m for m in generate(f"{module(once)}:count").mutants if m.operator == "arith"]
    assert left.id.split(":", 1)[1] == first.id.split(":", 1)[1]


# ---------------------------------------------------------------- the pragma


def test_a_pragma_waives_the_mutants_of_nodes_starting_on_its_line(module: Any) -> None:
    src = BASE.replace(
        "if x < lo:", "if x < lo:  # pragma: fak-equivalent[compare-boundary]: equal at lo"
    ).replace("return hi", "return hi  # pragma: fak-equivalent: the caller re-checks it")
    g = generate(f"{module(src)}:clamp")
    assert g.problems == ()
    waived = {(m.operator, m.pragma) for m in g.mutants if m.pragma is not None}
    assert waived == {
        ("compare-boundary", "equal at lo"),
        ("return-value", "the caller re-checks it"),
    }
    # the other operators of the first line, and the second `if`, are not waived
    assert {m.operator for m in g.mutants if m.pragma is None} >= {
        "compare-negate",
        "negate-condition",
        "compare-boundary",
    }


@pytest.mark.parametrize(
    ("comment", "says"),
    [
        ("# pragma: fak-equivalent", "gives no reason: write `# pragma: fak-equivalent: <why"),
        ("# pragma: fak-equivalent:   ", "gives no reason"),
        ("# pragma: fak-equivalent[compare-bound]: why", "unknown operator(s) compare-bound"),
        ("# pragma: fak-equivalnet: why", "is not a waiver: write `# pragma: fak-equivalent:"),
        ("# pragma: fak-equivalent[arith]: why", "waives no generated mutant"),
    ],
)
def test_a_malformed_pragma_is_a_problem_saying_what_to_write(
    module: Any, comment: str, says: str
) -> None:
    name = module(BASE.replace("if x < lo:", f"if x < lo:  {comment}"))
    g = generate(f"{name}:clamp")
    (problem,) = g.problems
    assert problem.startswith(f"{name}:clamp, line ")
    assert says in problem
    assert all(m.pragma is None for m in g.mutants)


# ---------------------------------------------------------------- the proof run

LIB = """
def clamp(x, lo=0, hi=10):
    if x < lo:{low_pragma}
        return lo
    if {high}:{high_pragma}
        return hi
    return x


def double(x):
    return x * 2
"""

WITNESSES = {
    "clamp": "assert lib.clamp(x) == min(max(x, 0), 10)",
    "double": "assert lib.double(x) == 2 * x",
}
BROKEN = {"clamp": "lambda x, lo=0, hi=10: max(x, lo)", "double": "lambda x: x + 2"}


def _section(tid: str, fn: str, waivers: list[tuple[str, str]]) -> str:
    text = f"""
## {tid} — {fn} is right

**THEOREM.** `{fn}` computes what it says.

**REGIME.** A

**PROOF.** `lib:{fn}` does it.

**ANCHORS.**
- `lib:{fn}`

**MUTANTS.**
- `broken` — {fn} is broken

**CAVEATS.**
- Small integers only.
"""
    if waivers:
        text += "\n**EQUIVALENT-MUTANTS.**\n" + "".join(f"- `{i}` — {r}\n" for i, r in waivers)
    return text


def _project(
    pytester: pytest.Pytester,
    theorems: dict[str, tuple[str, list[tuple[str, str]]]],
    low_pragma: str = "",
    high: str = "x > hi",
    high_pragma: str = "",
) -> None:
    """``lib`` (clamp and double) and one theorem per ``theorems`` entry (id → anchored
    function, waivers), each with its own witness and declared mutant."""
    doc = "# Lib\n\n**MUTANT-MODULES.**\n- `libmutants`\n" + "".join(
        _section(tid, fn, ws) for tid, (fn, ws) in theorems.items()
    )
    mutants = "from unittest import mock\nimport lib\nfrom pytest_fak import mutant\n"
    tests = "import pytest\nfrom hypothesis import given, strategies as st\nimport lib\n"
    for tid, (fn, _) in theorems.items():
        slug = tid.lower().replace(".", "_")
        mutants += (
            f'\n@mutant("{tid}/broken")\ndef broken_{slug}():\n'
            f'    return mock.patch.object(lib, "{fn}", {BROKEN[fn]})\n'
        )
        tests += (
            f'\n@pytest.mark.fak_theorem("{tid}")\n@given(st.integers(-50, 50))\n'
            f"def test_{slug}(x):\n    {WITNESSES[fn]}\n"
        )
    make_small_project(
        pytester,
        doc,
        lib=LIB.format(low_pragma=low_pragma, high=high, high_pragma=high_pragma),
        libmutants=mutants,
        test_lib=tests,
    )


def _boundaries(pytester: pytest.Pytester, high: str = "x > hi") -> list[str]:
    """The ids of clamp's two compare-boundary mutants (no witness can kill them), read
    from a copy of ``lib`` under another name (so ``lib`` itself is imported afresh)."""
    pytester.syspathinsert()
    name = f"lib_copy_{next(_names)}"
    pytester.makepyfile(**{name: LIB.format(low_pragma="", high=high, high_pragma="")})
    ms = generate(f"{name}:clamp").mutants
    return ["lib:" + m.id.split(":", 1)[1] for m in ms if m.operator == "compare-boundary"]


def _run(pytester: pytest.Pytester) -> dict[str, Any]:
    pytester.runpytest("--fak-theorems", "--fak-mutate=full", "--fak-fail-on=none")
    return verdicts(pytester)


EQUAL = "equal at the bound: clamp returns the bound either way"


def test_pragma_waivers_in_the_code_prove_the_theorem_and_are_reported_as_code(
    pytester: pytest.Pytester,
) -> None:
    pragma = "  # pragma: fak-equivalent[compare-boundary]: " + EQUAL
    _project(pytester, {"CL1": ("clamp", [])}, low_pragma=pragma, high_pragma=pragma)
    t = _run(pytester)["CL1"]
    assert t["verdict"] == PROVEN, t["reasons"]
    g = t["generated"]
    assert (g["waived"], g["survived"]) == (2, 0)
    assert {(w["reason"], w["source"]) for w in g["waivers"]} == {(EQUAL, "code")}
    assert {w["id"] for w in g["waivers"]} == set(_boundaries(pytester))
    md = (pytester.path / "proofs" / "PROOFS.md").read_text()
    assert "2 waived as equivalent (2 in the code)" in md


def test_a_pragma_without_a_reason_makes_each_theorem_anchoring_it_error(
    pytester: pytest.Pytester,
) -> None:
    _project(
        pytester,
        {"CL1": ("clamp", []), "CL2": ("clamp", []), "DB1": ("double", [])},
        low_pragma="  # pragma: fak-equivalent",
    )
    vs = _run(pytester)
    line = (pytester.path / "lib.py").read_text().splitlines().index(
        "    if x < lo:  # pragma: fak-equivalent"
    ) + 1
    for tid in ("CL1", "CL2"):
        assert vs[tid]["verdict"] == ERROR
        assert vs[tid]["reasons"][0].startswith(
            f"lib:clamp, line {line}: its `# pragma: fak-equivalent` gives no reason: write "
            "`# pragma: fak-equivalent: <why no input tells the mutant from the code>`"
        )
    assert vs["DB1"]["verdict"] == PROVEN, vs["DB1"]["reasons"]


def test_a_stale_waiver_is_an_error_of_its_theorem_only_and_offers_the_current_id(
    pytester: pytest.Pytester,
) -> None:
    low, high = _boundaries(pytester)  # waived, then `x > hi` is rewritten `hi < x`
    (now,) = [i for i in _boundaries(pytester, high="hi < x") if i != low]
    _project(
        pytester,
        {"CL1": ("clamp", [(low, EQUAL), (high, EQUAL)]), "DB1": ("double", [])},
        high="hi < x",
    )
    result = pytester.runpytest("--fak-theorems", "--fak-mutate=full")
    assert result.ret == 1  # ERROR fails the run, which went on to every verdict
    vs = verdicts(pytester)
    t = vs["CL1"]
    assert t["verdict"] == ERROR
    (why,) = [r for r in t["reasons"] if high in r]
    assert "(theorems.md:" in why and "no longer exists" in why
    assert f"copy its current id: `{now}` (line " in why
    assert ": if hi < x: → if hi <= x:); else remove the waiver" in why
    assert low not in why  # still current: not stale, and waived (not offered)
    assert vs["DB1"]["verdict"] == PROVEN, vs["DB1"]["reasons"]
    result.stdout.fnmatch_lines(["ERROR * CL1 *no longer exists*"])


def test_a_waiver_handing_its_mutant_to_a_theorem_not_anchoring_it_is_refused(
    pytester: pytest.Pytester,
) -> None:
    low, high = _boundaries(pytester)
    handed = "which bound is returned at the bound is DB1's claim"
    _project(
        pytester,
        {"CL1": ("clamp", [(low, EQUAL), (high, handed)]), "DB1": ("double", [])},
    )
    vs = _run(pytester)
    t = vs["CL1"]
    assert t["verdict"] == ERROR
    assert t["reasons"][0].startswith(
        f"the waiver of {high} hands the mutant to the claim of DB1, which does not anchor "
        "lib:clamp"
    )
    assert "DB1 must anchor lib:clamp" in t["reasons"][0]
    assert [w["id"] for w in t["generated"]["waivers"]] == [low]
    assert vs["DB1"]["verdict"] == PROVEN


# ---------------------------------------------------------------- settled at verdict time


def _theorems() -> dict[str, Theorem]:
    sym = "tests.plugin.mutation_sample:compare"
    doc = "# Sample\n" + "".join(
        f"""
## {tid} — compare

**THEOREM.** compare is right.

**REGIME.** A

**PROOF.** `{sym}` compares.

**ANCHORS.**
- `{anchor}`

**MUTANTS.**
- `m` — broken

**CAVEATS.**
- None.
"""
        for tid, anchor in (("T1", sym), ("T2", sym), ("T3", "tests.plugin.mutation_sample:flag"))
    )
    return {t.id: t for t in parse_document("sample.md", doc)}


def _settle(
    waived: dict[str, dict[str, str]],
    t2_first: str = "killed",
    source: str = "document",
) -> dict[str, Any]:
    """The verdicts of T1..T3 where every witness kills every generated mutant of its
    theorem that it does not waive, except T2's under the first one: ``t2_first``."""
    ts = _theorems()
    of = {tid: list(generate(t.anchors[0].symbol).mutants) for tid, t in ts.items()}
    by_id = {m.id: m for ms in of.values() for m in ms}
    evidence = {}
    for tid, ms in of.items():
        outcomes = {m.id: "killed" for m in ms if m.id not in waived.get(tid, {})}
        if tid == "T2" and ms[0].id in outcomes:
            outcomes[ms[0].id] = t2_first
        evidence[tid] = [
            WitnessEvidence(
                f"test_{tid}",
                "passed",
                mutants={f"{tid}/m": "killed"},
                anchors={ts[tid].anchors[0].symbol: True},
                generated=outcomes,
            )
        ]
    phase = SimpleNamespace(
        of_theorem=of,
        by_id=by_id,
        waived=waived,
        waiver_source={t: {m: source for m in w} for t, w in waived.items()},
        problems={tid: [] for tid in ts},
    )
    tvs = decide_all(list(ts.values()), evidence, cast(Any, phase))
    return {tv.theorem.id: tv for tv in tvs}


def _first() -> str:
    return generate("tests.plugin.mutation_sample:compare").mutants[0].id


def test_a_handed_waiver_counts_when_the_other_theorem_killed_the_mutant() -> None:
    vs = _settle({"T1": {_first(): "outside this claim: T2's"}})
    assert vs["T1"].verdict == PROVEN, vs["T1"].reasons
    assert vs["T1"].generated["waived"] == 1  # type: ignore[index]
    (w,) = vs["T1"].generated["waivers"]  # type: ignore[index]
    assert (w["source"], w["handed_to"]) == ("document", ["T2"])


def test_a_handed_waiver_counts_when_the_other_theorem_waived_the_mutant_itself() -> None:
    m = _first()
    vs = _settle({"T1": {m: "T2 waives it"}, "T2": {m: "no input tells them apart"}})
    assert vs["T1"].verdict == PROVEN, vs["T1"].reasons
    assert vs["T1"].generated["waivers"][0]["handed_to"] == ["T2"]  # type: ignore[index]
    assert vs["T2"].verdict == PROVEN
    assert "handed_to" not in vs["T2"].generated["waivers"][0]  # type: ignore[index]


def test_a_handed_waiver_the_other_theorem_did_not_kill_is_a_survivor() -> None:
    m = _first()
    vs = _settle({"T1": {m: "outside this claim: T2's"}}, t2_first="survived")
    assert vs["T1"].verdict == VACUOUS
    (s,) = vs["T1"].generated["survivors"]  # type: ignore[index]
    assert (s["id"], s["status"]) == (m, "survived")
    assert "hands it to the claim of T2, which neither killed nor waived it" in s["why"]
    assert vs["T2"].verdict == VACUOUS  # its own survivor


def test_waivers_handing_a_mutant_to_each_other_do_not_count() -> None:
    m = _first()
    # T2 hands it back: neither settles it itself, so neither waiver counts
    vs = _settle({"T1": {m: "it is T2's claim"}, "T2": {m: "it is T1's claim"}})
    for tid, other in (("T1", "T2"), ("T2", "T1")):
        tv = vs[tid]
        assert tv.verdict == VACUOUS
        (s,) = tv.generated["survivors"]  # type: ignore[index]
        assert (s["id"], s["status"]) == (m, "survived")
        assert s["why"].startswith(
            f"the waiver of {m} hands it to the claim of {other}, which neither killed nor "
            "waived it in this run: it counts as a survivor"
        )
        assert s["why"] in tv.reasons
        assert tv.generated["waivers"] == []  # type: ignore[index]


def test_a_handed_waiver_to_a_theorem_not_anchoring_the_function_is_an_error() -> None:
    vs = _settle({"T1": {_first(): "T3 claims it"}})
    assert vs["T1"].verdict == ERROR
    assert "T3 must anchor tests.plugin.mutation_sample:compare" in vs["T1"].reasons[0]
    assert (vs["T2"].verdict, vs["T3"].verdict) == (PROVEN, PROVEN)


def test_a_pragma_whose_reason_names_a_theorem_is_an_error() -> None:
    vs = _settle({"T1": {_first(): "it is T2's claim"}}, source="code")
    assert vs["T1"].verdict == ERROR
    assert "an in-code waiver claims the mutant equivalent" in vs["T1"].reasons[0]
