"""The verdict report: ``verdicts.json`` (versioned schema) and ``PROOFS.md``.

Deterministic means: for the same code, theorem documents and tool versions on the same
machine, both files are byte-identical from run to run except the keys listed in the
JSON's ``deterministic_except`` (the generation time, each verdict's date, witness
durations). Example counts are stable because the ``fak`` Hypothesis profile is
derandomised. ``PROOFS.md`` carries no durations at all.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_fak.theorems import REGIMES
from pytest_fak.verdicts import VERDICTS, TheoremVerdict

if TYPE_CHECKING:
    from pytest_fak.proof import ProofSession

__all__ = ["SCHEMA", "build", "git_info", "relpath", "render_markdown", "summary_line", "write"]

SCHEMA = "pytest-fak/verdicts/v1"
_PACKAGES = ("pytest-fak", "pytest", "hypothesis", "coverage", "pytest-xdist", "pytest-cov")
DETERMINISTIC_EXCEPT = [
    "generated_at",
    "theorems[].date",
    "theorems[].witnesses[].duration_s",
    "theorems[].generated.cache_hits",
    "theorems[].generated.runs",
    "theorems[].generated.seconds",
]


def relpath(path: str | os.PathLike[str], root: Path) -> str:
    """``path`` relative to ``root`` with forward slashes (absolute if outside it)."""
    p = Path(path).resolve()
    try:
        return p.relative_to(root.resolve()).as_posix()
    except ValueError:
        pass
    pkg_parent = Path(__file__).resolve().parent.parent  # files of the bundled pack
    try:
        return p.relative_to(pkg_parent).as_posix()
    except ValueError:
        return p.as_posix()


def git_info(root: Path, exclude: Path | None = None, *more: Path) -> dict[str, Any]:
    """The commit at ``root`` and whether the work tree differs from it (``exclude`` and
    ``more`` aside: the report itself, the generated-mutant cache)."""

    def run(*args: str) -> str | None:
        try:
            out = subprocess.run(
                ["git", *args], cwd=root, capture_output=True, text=True, timeout=10, check=True
            )
        except (OSError, subprocess.SubprocessError):
            return None
        return out.stdout

    commit = run("rev-parse", "HEAD")
    if commit is None:
        return {"commit": None, "dirty": None}
    spec = ["--", "."]
    for ex in (exclude, *more):
        if ex is not None:
            spec.append(f":(exclude){relpath(ex, root)}")
    status = run("status", "--porcelain", *spec)
    return {"commit": commit.strip(), "dirty": bool(status and status.strip())}


def _versions() -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for name in _PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


def _relative(gen: dict[str, Any] | None, root: Path) -> dict[str, Any] | None:
    """The mutation score with each ``file:line`` made relative to the root."""
    if gen is None:
        return None
    out = dict(gen)
    for key in ("survivors", "unmeasured"):
        rows = []
        for r in gen[key]:
            path, _, line = r["where"].rpartition(":")
            rows.append({**r, "where": f"{relpath(path, root)}:{line}"})
        out[key] = rows
    return out


def witness_command(nodeids: list[str], pack_paths: dict[str, str]) -> str:
    """The exact ``pytest`` command that re-runs these witnesses in proof mode.

    Pack witnesses are named by module (``--pyargs``), not by a machine-specific path.
    """
    args = ["pytest", "--fak-theorems"]
    if any(n in pack_paths for n in nodeids):
        args += ["--fak-pack", "--pyargs"]
    args += [f"'{pack_paths.get(n, n)}'" for n in nodeids]
    return " ".join(args)


def build(ps: ProofSession, tvs: list[TheoremVerdict]) -> dict[str, Any]:
    """The report as a plain JSON dict (before ``pytest_fak_modify_report``)."""
    now = datetime.now(UTC).replace(microsecond=0)
    root = ps.rootpath
    report_dir = ps._report_dir()
    pack = ps.pack_nodeids()
    summary = {v: 0 for v in VERDICTS}
    theorems = []
    for tv in tvs:
        t = tv.theorem
        summary[tv.verdict] += 1
        nodeids = [w.nodeid for w in tv.witnesses]
        theorems.append(
            {
                "id": t.id,
                "title": t.title,
                "regime": t.regime,
                "source": f"{relpath(t.path, root)}:{t.line}",
                "verdict": tv.verdict,
                "date": now.date().isoformat(),
                "reasons": tv.reasons,
                "statement": t.statement,
                "proof": t.proof,
                "caveats": list(t.caveats),
                "scoped_out": t.scoped_out,
                "theorem_sha256": t.text_sha256,
                "witness_command": witness_command(nodeids, pack) if nodeids else None,
                "witnesses": [
                    {
                        "nodeid": w.nodeid,
                        "outcome": w.outcome,
                        "duration_s": round(w.duration_s, 3),
                        "examples": w.examples,
                        "skip_reason": w.skip_reason,
                        "failure": w.failure,
                        "mutants": dict(sorted(w.mutants.items())),
                        "anchors": dict(sorted(w.anchors.items())),
                    }
                    for w in tv.witnesses
                ],
                "mutants": tv.mutants,
                "anchors": tv.anchors,
                "generated": _relative(tv.generated, root),
            }
        )
    return {
        "schema": SCHEMA,
        "generated_at": now.isoformat().replace("+00:00", "Z"),
        "deterministic_except": DETERMINISTIC_EXCEPT,
        "git": git_info(root, report_dir, *([ps._cache_dir()] if ps.generated else [])),
        "environment": {
            "python": platform.python_version(),
            "implementation": sys.implementation.name,
            "platform": platform.platform(terse=True),
            "packages": _versions(),
            "hypothesis_profile": "fak",
            "mutant_examples": ps.mutant_examples,
            "generated_mutants": ps.mutate,
            "anchor_measurement": sorted(ps.modes),
        },
        "theorem_dirs": [relpath(d, root) for d in ps.dirs],
        "fail_on": sorted(ps.fail_on),
        "summary": summary,
        "theorems": theorems,
    }


def summary_line(summary: dict[str, int]) -> str:
    parts = [f"{summary.get(v, 0)} {v}" for v in VERDICTS[:4]]
    parts += [f"{summary[v]} {v}" for v in VERDICTS[4:] if summary.get(v)]
    return "fak: " + " · ".join(parts)


def _md_escape(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render_markdown(doc: dict[str, Any]) -> str:
    """``PROOFS.md``: a ledger table, then each theorem with its witness and verdict."""
    git = doc["git"]
    commit = git["commit"] or "(not a git checkout)"
    dirty = " (with uncommitted changes)" if git["dirty"] else ""
    lines = [
        "# Proof ledger",
        "",
        f"Generated by `pytest --fak-theorems` on {doc['generated_at'][:10]} at commit "
        f"`{commit}`{dirty}. Do not edit: every verdict is computed from this run.",
        "",
        "PROVEN means: at least one bound witness ran and every one passed, every anchor was "
        "executed by a passing witness, and every declared mutant made some witness fail. "
        "A Hypothesis witness samples its domain (derandomised profile `fak`): it can refute "
        "a theorem, never prove it beyond the examples tried. Skips never count as passes.",
        "",
        summary_line(doc["summary"]).removeprefix("fak: "),
        "",
    ]
    gen_on = any(t.get("generated") for t in doc["theorems"])
    head = "| Theorem | Title | Regime | Verdict | Witnesses | Mutants killed | Anchors executed |"
    if gen_on:
        lines += [
            "With generated mutants (`--fak-mutate`): PROVEN also requires every generated "
            "mutant of the anchors killed or waived as equivalent in the theorem document.",
            "",
        ]
        head += " Generated: killed + waived / total (survivors) |"
    lines += [head, "|---" * (8 if gen_on else 7) + "|"]
    for t in doc["theorems"]:
        killed = sum(1 for m in t["mutants"] if m["status"] == "killed")
        hit = sum(1 for a in t["anchors"] if a["covered"] is True)
        ran = sum(1 for w in t["witnesses"] if w["outcome"] in ("passed", "failed", "error"))
        row = (
            f"| [{t['id']}](#{_anchor(t)}) | {_md_escape(t['title'])} | {t['regime']} | "
            f"**{t['verdict']}** | {ran}/{len(t['witnesses'])} | {killed}/{len(t['mutants'])} "
            f"| {hit}/{len(t['anchors'])} |"
        )
        if gen_on:
            g = t.get("generated")
            done = f"{g['killed'] + g['waived']}/{g['generated']}" if g else ""
            row += f" {done} ({g['survived']}) |" if g else " n/a |"
        lines.append(row)
    for t in doc["theorems"]:
        lines += ["", f"## {t['id']} — {t['title']}", ""]
        lines += [f"**THEOREM.** {t['statement']}", ""]
        lines += [f"**REGIME.** {t['regime']} ({REGIMES.get(t['regime'], '?')})", ""]
        lines += [f"**PROOF.** {t['proof']}", ""]
        if t["witness_command"]:
            lines += [f"**WITNESS.** `{t['witness_command']}`", ""]
            for w in t["witnesses"]:
                ex = f", {w['examples']} examples" if w["examples"] is not None else ""
                lines.append(f"- `{w['nodeid']}`: {w['outcome']}{ex}")
            lines.append("")
        else:
            lines += ["**WITNESS.** none bound", ""]
        if t["mutants"]:
            lines.append("**MUTANTS.**")
            for m in t["mutants"]:
                lines.append(f"- `{m['name']}` ({m['description']}): {m['status']}")
            lines.append("")
        if t["anchors"]:
            lines.append("**ANCHORS.**")
            for a in t["anchors"]:
                state = {True: "executed", False: "NOT executed", None: "unmeasured"}[a["covered"]]
                lines.append(f"- `{a['symbol']}`: {state}")
            lines.append("")
        if t.get("generated"):
            lines += _generated_md(t["generated"])
        lines.append("**CAVEATS.**")
        lines += [f"- {c}" for c in t["caveats"]]
        lines.append("")
        verdict = f"**VERDICT.** {t['verdict']}, {t['date']}"
        if t["reasons"]:
            verdict += ": " + "; ".join(t["reasons"])
        lines.append(verdict)
        for w in t["witnesses"]:
            f = w.get("failure") or {}
            if f.get("falsifying_example"):
                lines += ["", f"Falsifying example ({w['nodeid']}): `{f['falsifying_example']}`"]
            if f.get("reproduction"):
                lines += ["", f"Reproduce with `{f['reproduction']}`"]
    return "\n".join(lines) + "\n"


def _generated_md(g: dict[str, Any]) -> list[str]:
    """The GENERATED MUTANTS block of one theorem: its score, then each survivor's diff."""
    lines = [
        f"**GENERATED MUTANTS.** {g['generated']} generated, {g['killed']} killed, "
        f"{g['waived']} waived as equivalent, {g['survived']} survived"
        + (f", {g['other']} not measured" if g["other"] else "")
        + f" (score {g['score']:.1%}).",
        "",
    ]
    for r in g["survivors"] + g["unmeasured"]:
        lines.append(f"- `{r['id']}` ({r['operator']}, {r['where']}): {r['status']}")
        lines += ["", "  ```diff"] + [f"  {d}" for d in r["diff"].rstrip("\n").split("\n")]
        lines += ["  ```"]
    if g["survivors"] or g["unmeasured"]:
        lines.append("")
    return lines


def _anchor(t: dict[str, Any]) -> str:
    slug = f"{t['id']} — {t['title']}".lower()
    keep = "".join(c for c in slug if c.isalnum() or c in " -_")
    return keep.replace(" ", "-")


def write(doc: dict[str, Any], report_dir: Path) -> list[Path]:
    """Write ``verdicts.json`` and ``PROOFS.md`` into ``report_dir``; return their paths."""
    report_dir.mkdir(parents=True, exist_ok=True)
    js = report_dir / "verdicts.json"
    md = report_dir / "PROOFS.md"
    js.write_text(json.dumps(doc, indent=2, sort_keys=False) + "\n", encoding="utf-8")
    md.write_text(render_markdown(doc), encoding="utf-8")
    return [js, md]
