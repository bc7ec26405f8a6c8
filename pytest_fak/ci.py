"""Verdicts a CI system can read.

- The last line of the run: ``fak: FAILED: 1 VACUOUS (CL1.1) · 44 PROVEN`` when a counted
  verdict is in ``--fak-fail-on``, else ``fak: 45 PROVEN`` (pytest's own "N passed" line
  comes before it and counts tests, not theorems).
- JUnit (``--junitxml``): one testcase per theorem (``theorems/x.md::ID``), failed when
  its verdict fails the run, skipped when it did not run, with properties ``fak_verdict``,
  ``fak_mutants_killed``, ``fak_examples``, ``fak_witnesses`` (and ``fak_carried_over``).
- GitHub Actions: with ``GITHUB_ACTIONS=true`` an ``::error`` annotation on the theorem's
  line for each failing verdict, and one on each surviving generated mutant's own line;
  with ``GITHUB_STEP_SUMMARY`` set, a markdown summary is appended to that file.
- ``--fak-compare PATH``: the transitions against a committed ``verdicts.json``.
- ``--fak-fail-under``: the mutation score the run must reach (overall or per theorem);
  under it a theorem VACUOUS only by generated survivors is reported VACUOUS but left to
  the score, which the report records in ``run.fail_under``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from pytest_fak.verdicts import PROVEN, STALE, VACUOUS, VERDICTS

__all__ = [
    "compare",
    "fail_under",
    "failing",
    "final_line",
    "github_annotations",
    "junit_theorems",
    "load_committed",
    "nothing_to_prove",
    "step_summary",
]


def failing(doc: dict[str, Any], fail_on: set[str]) -> list[dict[str, Any]]:
    """The theorems whose verdict fails the run: those that ran, and a carried-over
    verdict whose inputs changed since (STALE: the run cannot vouch for it). Under
    ``--fak-fail-under`` a theorem VACUOUS only by its generated survivors is left to the
    score (:func:`fail_under`)."""
    gated = doc.get("run", {}).get("fail_under") is not None
    return [
        t
        for t in doc["theorems"]
        if t["verdict"] in fail_on
        and (t["ran"] or t["verdict"] == STALE)
        and not (gated and only_generated_survivors(t))
    ]


def only_generated_survivors(t: dict[str, Any]) -> bool:
    """Whether theorem record ``t`` is VACUOUS by its generated survivors alone (every
    declared mutant killed, every anchor executed)."""
    g = t.get("generated")
    return (
        t["verdict"] == VACUOUS
        and isinstance(g, dict)
        and g["survived"] > 0
        and all(m["status"] == "killed" for m in t["mutants"])
        and all(a["covered"] is True for a in t["anchors"])
    )


def mutation_score(g: dict[str, Any]) -> float:
    """Killed over generated minus waived, in percent (100 with nothing left to kill)."""
    n = g["generated"] - g["waived"]
    return 100.0 if n <= 0 else round(100.0 * g["killed"] / n, 2)


def fail_under(doc: dict[str, Any], overall: float | None, per: dict[str, float]) -> dict[str, Any]:
    """``run.fail_under`` of the report: the thresholds (``--fak-fail-under``), the scores
    of the theorems that ran with generated mutants, and which are below (``"overall"``
    for the whole run's: its killed over generated minus waived, summed over theorems)."""
    ran = [t for t in doc["theorems"] if t["ran"] and t.get("generated")]
    killed = sum(t["generated"]["killed"] for t in ran)
    total = sum(t["generated"]["generated"] - t["generated"]["waived"] for t in ran)
    score = 100.0 if total <= 0 else round(100.0 * killed / total, 2)
    below = ["overall"] if overall is not None and score < overall else []
    scores = {t["id"]: mutation_score(t["generated"]) for t in ran}
    below += [tid for tid, want in sorted(per.items()) if tid in scores and scores[tid] < want]
    return {
        "overall": overall,
        "theorems": dict(sorted(per.items())),
        "score": score,
        "scores": scores,
        "below": below,
    }


def final_line(doc: dict[str, Any], fail_on: set[str]) -> str:
    """The run's last line: ``fak: FAILED: <why>`` or ``fak: <counts>``."""
    counted = doc["run"]["summary"]
    bad = failing(doc, fail_on)
    failed = bool(bad)
    parts: list[str] = []
    for v in VERDICTS:
        ids = [t["id"] for t in bad if t["verdict"] == v]
        if ids:
            shown = ", ".join(ids[:5]) + (f" and {len(ids) - 5} more" if len(ids) > 5 else "")
            parts.append(f"{len(ids)} {v} ({shown})")
    for v in VERDICTS:
        n = counted.get(v, 0)
        if n and not any(t["verdict"] == v for t in bad):
            parts.append(f"{n} {v}")
    not_run = doc["run"]["not_run"]
    if not_run:
        parts.append(f"{not_run} not run")
    if not parts:
        parts.append(f"0 {PROVEN}")
    gate = doc["run"].get("fail_under")
    if gate is not None:
        for what in gate["below"]:
            got = gate["score"] if what == "overall" else gate["scores"][what]
            want = gate["overall"] if what == "overall" else gate["theorems"][what]
            parts.insert(0, f"mutation score {got:g}% < {want:g}% ({what})")
        if not gate["below"]:
            parts.append(f"mutation score {gate['score']:g}%")
        failed = failed or bool(gate["below"])
    return ("fak: FAILED: " if failed else "fak: ") + " · ".join(parts)


def nothing_to_prove(theorems: int, expected: bool, dirs: list[str]) -> str | None:
    """Why a proof run that found ``theorems`` theorems in ``dirs`` (shown paths) fails
    (pytest's "no tests collected" exit status), or ``None``: it found some, or the user
    said none is expected (``--fak-no-theorems-ok``, ini ``fak_no_theorems_ok``)."""
    if theorems or expected:
        return None
    where = ", ".join(dirs) if dirs else "no theorems/ directory in the rootdir"
    return (
        f"fak: FAILED: no theorems found ({where}); write them in theorems/*.md, point "
        "--fak-theorems-dir or ini fak_theorems_dirs at them, or pass --fak-no-theorems-ok "
        "if none is expected; nothing written"
    )


def _path_line(t: dict[str, Any]) -> tuple[str, int]:
    path, _, line = str(t["source"]).rpartition(":")
    return path, int(line) if line.isdigit() else 1


def _properties(t: dict[str, Any]) -> list[tuple[str, object]]:
    killed = sum(1 for m in t["mutants"] if m["status"] == "killed")
    examples = sum(w["examples"] or 0 for w in t["witnesses"])
    props: list[tuple[str, object]] = [
        ("fak_theorem", t["id"]),
        ("fak_verdict", t["verdict"]),
        ("fak_mutants_killed", f"{killed}/{len(t['mutants'])}"),
        ("fak_examples", examples),
        ("fak_witnesses", len(t["witnesses"])),
    ]
    if t.get("generated"):
        g = t["generated"]
        props.append(("fak_generated_killed", f"{g['killed'] + g['waived']}/{g['generated']}"))
    if t.get("carried_over"):
        props.append(("fak_carried_over", t["carried_over"]["date"]))
    return props


def junit_theorems(config: pytest.Config, doc: dict[str, Any], fail_on: set[str]) -> int:
    """Add one JUnit testcase per theorem to ``--junitxml``'s file; return how many."""
    try:
        from _pytest.junitxml import xml_key
    except ImportError:  # pragma: no cover - pytest moved it
        return 0
    xml = config.stash.get(xml_key, None)
    if xml is None:
        return 0
    for t in doc["theorems"]:
        path, line = _path_line(t)
        nodeid = f"{path}::{t['id']}"
        location = (path, line - 1, t["id"])
        why = "; ".join(t["reasons"]) or t["verdict"]
        longrepr: Any = None
        if not t["ran"]:
            outcome = "skipped"
            co = t.get("carried_over")
            note = f"carried over from {co['date']}: {co['reason']}" if co else why
            longrepr = (path, line, f"fak: not run ({t['verdict']}, {note})")
        elif t["verdict"] in fail_on:
            outcome = "failed"
            longrepr = f"fak: {t['verdict']} {t['id']} {t['title']}: {why}"
        else:
            outcome = "passed"
        call = pytest.TestReport(nodeid, location, {}, outcome, longrepr, "call")  # type: ignore[arg-type]
        end = pytest.TestReport(
            nodeid, location, {}, "passed", None, "teardown", user_properties=_properties(t)
        )
        xml.pytest_runtest_logreport(call)
        xml.pytest_runtest_logreport(end)
    return len(doc["theorems"])


def _escape(text: str, prop: bool = False) -> str:
    out = text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
    if prop:
        out = out.replace(":", "%3A").replace(",", "%2C")
    return out


def github_annotations(doc: dict[str, Any], fail_on: set[str]) -> list[str]:
    """``::error`` workflow commands, one per theorem whose verdict fails the run."""
    out = []
    for t in failing(doc, fail_on):
        path, line = _path_line(t)
        title = _escape(f"fak {t['verdict']} {t['id']}", prop=True)
        msg = _escape(f"{t['title']}: " + ("; ".join(t["reasons"]) or t["verdict"]))
        out.append(f"::error file={_escape(path, True)},line={line},title={title}::{msg}")
        out += _survivor_annotations(t)
    return out


def _survivor_annotations(t: dict[str, Any]) -> list[str]:
    """One ``::error`` on each surviving generated mutant's own line in the project (a
    survivor in code outside it, an absolute path, is named in the theorem's)."""
    g = t.get("generated")
    if t["verdict"] != VACUOUS or not g:
        return []
    out = []
    for s in g["survivors"]:
        path, _, line = str(s["where"]).rpartition(":")
        if not path or Path(path).is_absolute():
            continue
        title = _escape(f"fak surviving mutant of {t['id']}", prop=True)
        msg = _escape(
            f"{s['id']} ({s['operator']}) survived every witness of {t['id']}:\n{s['diff']}\n"
            f"Kill it with a witness, or waive it: fak mutants show {s['id']}"
        )
        out.append(f"::error file={_escape(path, True)},line={line or 1},title={title}::{msg}")
    return out


def step_summary(doc: dict[str, Any], fail_on: set[str], transitions: list[str]) -> str:
    """The markdown a GitHub Actions job shows on its summary page."""
    lines = ["## fak proofs", "", f"**{final_line(doc, fail_on)}**", ""]
    git = doc["git"]
    if git.get("commit"):
        dirty = {True: ", uncommitted changes", False: ""}.get(git.get("dirty"), ", dirty unknown")
        lines += [f"Commit `{git['commit'][:12]}`{dirty}.", ""]
    lines += ["| Theorem | Verdict | Why |", "|---|---|---|"]
    for t in doc["theorems"]:
        v = t["verdict"]
        if t.get("carried_over"):
            v += f" (carried over, {t['carried_over']['date']})"
        elif not t["ran"]:
            v += " (not run)"
        why = "; ".join(t["reasons"]).replace("|", "\\|").replace("\n", " ")
        lines.append(f"| {t['id']} | {v} | {why[:300]} |")
    if transitions:
        lines += ["", "Changes against the committed verdicts:", ""]
        lines += [f"- {x}" for x in transitions]
    return "\n".join(lines) + "\n"


def load_committed(path: Path) -> dict[str, Any]:
    """A committed ``verdicts.json`` for ``--fak-compare`` (a clear error if unreadable)."""
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise pytest.UsageError(f"--fak-compare {path}: cannot read it: {exc}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("theorems"), list):
        raise pytest.UsageError(f"--fak-compare {path}: not a pytest-fak verdicts.json")
    return doc


def compare(doc: dict[str, Any], committed: Mapping[str, Any]) -> list[str]:
    """Each verdict that changed (``A1: PROVEN -> REFUTED``), each new and removed theorem."""
    old = {t.get("id"): t.get("verdict") for t in committed.get("theorems", [])}
    new = {t["id"]: t["verdict"] for t in doc["theorems"]}
    out = [f"{tid}: {old[tid]} -> {v}" for tid, v in new.items() if tid in old and old[tid] != v]
    out += [f"{tid}: new ({v})" for tid, v in new.items() if tid not in old]
    out += [f"{tid}: removed (was {v})" for tid, v in old.items() if tid not in new]
    return out


def github_env() -> tuple[bool, str | None]:
    """(annotate?, step summary file) from the GitHub Actions environment."""
    return os.environ.get("GITHUB_ACTIONS") == "true", os.environ.get("GITHUB_STEP_SUMMARY")
