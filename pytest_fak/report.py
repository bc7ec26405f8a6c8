"""The verdict report: ``verdicts.json`` (versioned schema) and ``PROOFS.md``.

``verdicts.json`` is validated against the JSON Schema shipped beside this module
(``verdicts.schema.json``) before anything is written. Each theorem's record says whether
it ``ran`` in this run; one that did not (a partial run, :mod:`pytest_fak.selection`)
keeps its record from the report being replaced, with ``carried_over`` giving the date
and commit of the run that decided it and why it was not re-run. ``run`` says what
selected the run and counts the verdicts that ran (the exit status counts only those).
``git`` is the commit and whether the work tree differed from it (``null`` when unknown,
:mod:`pytest_fak.provenance`); ``inputs`` what ``fak proofs check`` re-hashes.

Deterministic means: for the same code, theorem documents and tool versions on the same
machine, both files are byte-identical from run to run except the keys listed in the
JSON's ``deterministic_except`` (the generation time, each verdict's date, witness
durations). Example counts are stable because the ``fak`` Hypothesis profile is
derandomised. ``PROOFS.md`` carries no durations at all.
"""

from __future__ import annotations

import copy
import json
import os
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pytest_fak import paths
from pytest_fak.paths import VERDICTS_SCHEMA
from pytest_fak.provenance import git_info, python, versions
from pytest_fak.theorems import REGIMES
from pytest_fak.verdicts import OPEN, STALE, VERDICTS, TheoremVerdict

__all__ = [
    "SCHEMA",
    "RunInfo",
    "build",
    "git_info",
    "load_previous",
    "project_path",
    "relpath",
    "render_markdown",
    "schema_errors",
    "summary_line",
    "write",
]

SCHEMA = "pytest-fak/verdicts/v1"
DETERMINISTIC_EXCEPT = [
    "generated_at",
    "theorems[].date",
    "theorems[].witnesses[].duration_s",
    "theorems[].generated.cache_hits",
    "theorems[].generated.runs",
    "theorems[].generated.seconds",
]


@dataclass
class RunInfo:
    """What the report needs to know of the run: plain data, so the report depends on
    nothing of proof mode."""

    rootpath: Path
    report_dir: Path
    dirs: list[Path]
    fail_on: set[str]
    mutant_examples: int
    max_examples: int | None
    mutate: str
    modes: set[str]
    pack_nodeids: dict[str, str]
    git: dict[str, Any]
    #: what built the witnesses' kernels (``module:function`` or the default)
    kernel_factory: str
    #: what made the run partial (empty: a full run)
    selection: list[str]
    #: theorem id → what its verdict depends on (:func:`pytest_fak.inputs.record`)
    inputs: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: address-space budget of each mutant re-run, in bytes (None: no limit asked for)
    mutant_memory: int | None = None
    #: anchor symbol → module, of the anchors in installed code left unmutated
    left_out: dict[str, str] | None = None


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


def project_path(path: str | os.PathLike[str], root: Path) -> str:
    """``path`` relative to ``root`` with forward slashes when it is under it, else
    absolute: a file of an installed package is never written relative to its
    ``site-packages`` (no one can open that path from the project)."""
    p = Path(path).resolve()
    try:
        return p.relative_to(root.resolve()).as_posix()
    except ValueError:
        return p.as_posix()


def _relative(gen: dict[str, Any] | None, root: Path) -> dict[str, Any] | None:
    """The mutation score with each ``file:line`` made relative to the root."""
    if gen is None:
        return None
    out = dict(gen)
    for key in ("survivors", "unmeasured"):
        rows = []
        for r in gen[key]:
            path, _, line = r["where"].rpartition(":")
            rows.append({**r, "where": f"{project_path(path, root)}:{line}"})
        out[key] = rows
    return out


def witness_command(theorem_id: str, nodeids: list[str], pack_paths: dict[str, str]) -> str:
    """The ``pytest`` command that re-runs the witnesses ``nodeids`` of one theorem in
    proof mode, with its mutants: a partial run of that theorem (with the bundled pack
    when they are the pack's)."""
    args = ["pytest", "--fak-theorems"]
    if any(n in pack_paths for n in nodeids):
        args.append("--fak-pack")
    args.append(f"--fak-theorem '{theorem_id}'")
    return " ".join(args)


def _fresh(tv: TheoremVerdict, run: RunInfo, date: str) -> dict[str, Any]:
    """The record of a theorem this run decided."""
    t = tv.theorem
    root = run.rootpath
    nodeids = [w.nodeid for w in tv.witnesses]
    killers = {n for m in tv.mutants for n in m["killed_by"]}
    return {
        "id": t.id,
        "title": t.title,
        "regime": t.regime,
        "source": f"{relpath(t.path, root)}:{t.line}",
        "verdict": tv.verdict,
        "date": date,
        "ran": True,
        "carried_over": None,
        "reasons": tv.reasons,
        "statement": t.statement,
        "proof": t.proof,
        "caveats": list(t.caveats),
        "scoped_out": t.scoped_out,
        "theorem_sha256": t.text_sha256,
        "witness_command": (witness_command(t.id, nodeids, run.pack_nodeids) if nodeids else None),
        "witnesses": [
            {
                "nodeid": w.nodeid,
                "outcome": w.outcome,
                "error_kind": w.error_kind,
                "duration_s": round(w.duration_s, 3),
                "examples": w.examples,
                "skip_reason": w.skip_reason,
                "failure": w.failure,
                # what a witness did differently: a survival is the common case
                "mutants": {m: o for m, o in sorted(w.mutants.items()) if o != "survived"},
                "anchors": {a: r for a, r in sorted(w.anchors.items()) if r is not False},
                "crash": w.crash,
            }
            for w in tv.witnesses
        ],
        # passing witnesses that killed none of the declared mutants
        "idle_witnesses": sorted(
            w.nodeid
            for w in tv.witnesses
            if w.outcome == "passed" and tv.mutants and w.nodeid not in killers
        ),
        "mutants": tv.mutants,
        "anchors": tv.anchors,
        "generated": _relative(tv.generated, root),
        "inputs": run.inputs.get(t.id),
    }


def _carried(prev: dict[str, Any], prev_doc: dict[str, Any], why: str) -> dict[str, Any] | None:
    """``prev`` (a theorem's record in the last report) kept as it was, marked carried
    over; ``None`` if it is not a record this version can carry (an older format)."""
    rec = copy.deepcopy(prev)
    first = rec.get("carried_over") or {
        "date": rec.get("date"),
        "commit": (prev_doc.get("git") or {}).get("commit"),
    }
    rec["ran"] = False
    rec["carried_over"] = {"date": first.get("date"), "commit": first.get("commit"), "reason": why}
    for kept in ("verdict", "reasons"):  # what a STALE record was carried with
        if kept in first:
            rec["carried_over"][kept] = first[kept]
    rec.setdefault("idle_witnesses", [])
    rec.setdefault("inputs", None)
    for w in rec.get("witnesses", []):
        if isinstance(w, dict):
            w.setdefault("error_kind", None)
    gen = rec.get("generated")
    for wv in gen.get("waivers", []) if isinstance(gen, dict) else []:
        if isinstance(wv, dict):
            wv.setdefault("source", "document")  # before in-code waivers, all were
    return rec if not schema_errors(rec, "theorem") else None


def _staleness(rec: dict[str, Any], why: str | None) -> dict[str, Any]:
    """A carried record made STALE (``why``: what changed since its run), or, no longer
    stale, given back the verdict it was carried with."""
    co = rec["carried_over"]
    if why is not None:
        co.setdefault("verdict", rec["verdict"])
        co.setdefault("reasons", rec["reasons"])
        rec["verdict"] = STALE
        rec["reasons"] = [
            f"carried over ({co['verdict']} of {co['date']}), but {why} since: re-run it: "
            f"pytest --fak-theorems --fak-theorem '{rec['id']}'"
        ]
    elif rec["verdict"] == STALE and co.get("verdict"):
        rec["verdict"] = co.pop("verdict")
        rec["reasons"] = co.pop("reasons", [])
    return rec


def load_previous(report_dir: Path) -> dict[str, Any] | None:
    """The last ``verdicts.json`` in ``report_dir``, or ``None`` if there is none this
    version can read."""
    try:
        doc = json.loads((report_dir / "verdicts.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(doc, dict) or doc.get("schema") != SCHEMA:
        return None
    if not isinstance(doc.get("theorems"), list):
        return None
    return doc


def previous_records(prev_doc: dict[str, Any] | None) -> dict[str, dict[str, Any]]:
    if prev_doc is None:
        return {}
    return {
        t["id"]: t
        for t in prev_doc["theorems"]
        if isinstance(t, dict) and isinstance(t.get("id"), str)
    }


def build(
    run: RunInfo,
    tvs: list[TheoremVerdict],
    not_run: dict[str, tuple[str, bool]] | None = None,
    previous: dict[str, Any] | None = None,
    stale: dict[str, str] | None = None,
) -> dict[str, Any]:
    """The report as a plain JSON dict (before ``pytest_fak_modify_report``).

    ``not_run``: theorem id → (why it did not run, whether its last verdict is carried
    over from ``previous``, the report being replaced). A theorem not run with no earlier
    verdict to carry is OPEN and says so. ``stale``: theorem id → why, for a carried
    verdict whose inputs changed since (it is reported STALE, its verdict kept in
    ``carried_over.verdict``)."""
    now = datetime.now(UTC).replace(microsecond=0)
    date = now.date().isoformat()
    not_run = not_run or {}
    prev_by_id = previous_records(previous)
    summary = {v: 0 for v in VERDICTS}
    counted = {v: 0 for v in VERDICTS}
    theorems = []
    carried = 0
    for tv in tvs:
        rec = _fresh(tv, run, date)
        tid = tv.theorem.id
        if tid in not_run:
            why, carry = not_run[tid]
            prev = prev_by_id.get(tid) if carry else None
            old = _carried(prev, previous or {}, why) if prev is not None else None
            if old is not None:
                rec = _staleness(old, (stale or {}).get(tid))
                carried += 1
            else:
                rec["ran"] = False
                if carry:
                    rec["verdict"] = OPEN
                    rec["reasons"] = [f"not run: {why}; no earlier verdict to carry over"]
                else:
                    rec["reasons"] = [*rec["reasons"], f"not counted: {why}"]
        summary[rec["verdict"]] += 1
        if rec["ran"]:
            counted[rec["verdict"]] += 1
        theorems.append(rec)
    ran = sum(counted.values())
    return {
        "schema": SCHEMA,
        "generated_at": now.isoformat().replace("+00:00", "Z"),
        "deterministic_except": DETERMINISTIC_EXCEPT,
        "git": run.git,
        "environment": {
            **python(),
            "packages": versions(),
            "hypothesis_profile": "fak",
            "mutant_examples": run.mutant_examples,
            "max_examples": run.max_examples,
            "generated_mutants": run.mutate,
            "anchor_measurement": sorted(run.modes),
            "mutant_memory": _memory_env(run.mutant_memory),
        },
        "theorem_dirs": [paths.dir_ref(d, run.rootpath) for d in run.dirs],
        "fail_on": sorted(run.fail_on),
        "summary": summary,
        "run": {
            "partial": bool(run.selection),
            "selection": list(run.selection),
            "ran": ran,
            "not_run": len(tvs) - ran,
            "carried_over": carried,
            "summary": counted,
            "kernel_factory": run.kernel_factory,
            **_not_mutated(run.left_out),
        },
        "theorems": theorems,
    }


def _not_mutated(left_out: dict[str, str] | None) -> dict[str, Any]:
    """``run.not_mutated``: the anchors in code the user does not own (installed
    packages) whose generated mutants were left out, and how to include them."""
    if not left_out:
        return {}
    return {
        "not_mutated": {
            "anchors": len(left_out),
            "modules": sorted(set(left_out.values())),
            "symbols": sorted(left_out),
            "how": "they are installed code, not this project's: pass --fak-mutate-installed "
            "(or ini fak_mutate_installed = true) to mutate them",
        }
    }


def _memory_env(budget: int | None) -> dict[str, Any]:
    """The mutant re-runs' address-space budget as enforced here (or why it was not)."""
    from pytest_fak.crash import memory_limit_unsupported

    why = "no limit asked for (--fak-mutant-memory=off)" if budget is None else None
    why = why or memory_limit_unsupported()
    return {"budget_bytes": budget, "enforced": why is None, "why_not": why}


def schema_errors(doc: Any, part: str | None = None) -> list[str]:
    """Where ``doc`` breaks the shipped JSON Schema of ``verdicts.json`` (``part``: one of
    its ``$defs``, e.g. ``"theorem"``); empty when it conforms."""
    from jsonschema import Draft202012Validator

    schema = json.loads(VERDICTS_SCHEMA.read_text(encoding="utf-8"))
    if part is not None:
        schema = {"$defs": schema["$defs"], "$ref": f"#/$defs/{part}"}
    validator = Draft202012Validator(schema)
    out = []
    for err in sorted(validator.iter_errors(doc), key=lambda e: list(e.absolute_path)):
        where = "/".join(str(p) for p in err.absolute_path) or "(top)"
        out.append(f"{where}: {err.message}")
    return out


def summary_line(summary: dict[str, int], not_run: int = 0) -> str:
    """``fak: 3 PROVEN · 0 REFUTED · 0 VACUOUS · 0 OPEN`` (+ the other verdicts present)."""
    parts = [f"{summary.get(v, 0)} {v}" for v in VERDICTS[:4]]
    parts += [f"{summary[v]} {v}" for v in VERDICTS[4:] if summary.get(v)]
    if not_run:
        parts.append(f"{not_run} not run")
    return "fak: " + " · ".join(parts)


def _md_escape(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render_markdown(doc: dict[str, Any]) -> str:
    """``PROOFS.md``: a ledger table, then each theorem with its witness and verdict."""
    lines = [
        "# Proof ledger",
        "",
        f"Generated by `pytest --fak-theorems` on {doc['generated_at'][:10]} at "
        f"{_git_md(doc['git'])}. Do not edit: every verdict is computed from a run.",
        "",
        "PROVEN means: at least one bound witness ran and every one passed, every anchor was "
        "executed by a passing witness, and every declared mutant made some witness fail. "
        "A Hypothesis witness samples its domain (derandomised profile `fak`): it can refute "
        "a theorem, never prove it beyond the examples tried. Skips never count as passes. "
        "ERROR means a witness never tested the code (setup, collection, a Hypothesis "
        "health check) or its worker process died outside any mutant.",
        "",
        _tools_md(doc["environment"]),
        "",
        summary_line(doc["summary"]).removeprefix("fak: "),
        "",
    ]
    run = doc.get("run") or {}
    if run.get("kernel_factory"):
        lines += [f"Kernel factory: `{run['kernel_factory']}`.", ""]
    if run.get("partial"):
        lines += [
            f"Partial run ({'; '.join(run['selection'])}): {run['ran']} theorems ran; "
            f"{run['not_run']} did not, and {run['carried_over']} of those keep their last "
            "verdict and its date, marked carried over.",
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
            f"{_verdict_md(t)} | {ran}/{len(t['witnesses'])} | {killed}/{len(t['mutants'])} "
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
                lines.append(f"- `{w['nodeid']}`: {w['outcome']}{ex}{_crash_md(w.get('crash'))}")
            lines.append("")
        else:
            lines += ["**WITNESS.** none bound", ""]
        if t["mutants"]:
            lines.append("**MUTANTS.**")
            for m in t["mutants"]:
                by = "".join(f", by `{n}`" for n in m["killed_by"])
                lines.append(f"- `{m['name']}` ({m['description']}): {m['status']}{by}")
            lines.append("")
        if t.get("idle_witnesses"):
            idle = ", ".join(f"`{n}`" for n in t["idle_witnesses"])
            lines += [f"Witnesses that killed no declared mutant: {idle}.", ""]
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
        co = t.get("carried_over")
        if co:
            at = f" at commit `{co['commit']}`" if co.get("commit") else ""
            verdict += (
                f" (carried over from the run of {co['date']}{at}; not run now: {co['reason']})"
            )
        elif t.get("ran") is False:
            verdict += " (not run now, not counted)"
        if t["reasons"]:
            verdict += ": " + "; ".join(t["reasons"])
        lines.append(verdict)
        for w in t["witnesses"]:
            f = w.get("failure") or {}
            if f.get("falsifying_example"):
                kind = "Failing explicit example" if f.get("explicit") else "Falsifying example"
                lines += ["", f"{kind} ({w['nodeid']}): `{f['falsifying_example']}`"]
            if f.get("reproduction"):
                lines += ["", f"Reproduce with `{f['reproduction']}`"]
    return "\n".join(lines) + "\n"


def _crash_md(c: dict[str, Any] | None) -> str:
    if not c:
        return ""
    if c.get("mutant"):
        return (
            f"; crashed worker {c['worker']} under mutant `{c['mutant']}` (counted as "
            "killed; its other mutant re-runs were lost)"
        )
    return f"; crashed worker {c['worker']} outside any mutant"


def _git_md(git: dict[str, Any]) -> str:
    if git.get("commit") is None:
        err = git.get("error")
        return f"no known commit (git failed: {err})" if err else "no commit (not a git checkout)"
    dirty = git.get("dirty")
    if dirty is None:
        state = f" (uncommitted changes unknown: {git.get('error') or 'not checked'})"
    else:
        state = " (with uncommitted changes)" if dirty else " (clean work tree)"
    return f"commit `{git['commit']}`{state}"


def _tools_md(env: dict[str, Any]) -> str:
    pk = env.get("packages") or {}
    names = (("pytest-fak", "pytest-fak"), ("pytest", "pytest"), ("hypothesis", "Hypothesis"))
    tools = ", ".join(f"{label} {pk.get(k) or '?'}" for k, label in names)
    cap = env.get("max_examples")
    own = f"at most {cap} examples" if cap else "Hypothesis examples as its settings say"
    return (
        f"Tools: {tools}, Python {env.get('python', '?')}. Budget: each witness runs "
        f"{own}; each re-run under a mutant at most {env.get('mutant_examples')}."
    )


def _verdict_md(t: dict[str, Any]) -> str:
    co = t.get("carried_over")
    if co:
        return f"**{t['verdict']}** (carried over, {co['date']})"
    if t.get("ran") is False:
        return f"**{t['verdict']}** (not run)"
    return f"**{t['verdict']}**"


def _generated_md(g: dict[str, Any]) -> list[str]:
    """The GENERATED MUTANTS block of one theorem: its score, then each survivor's diff."""
    in_code = sum(1 for w in g["waivers"] if w.get("source") == "code")
    lines = [
        f"**GENERATED MUTANTS.** {g['generated']} generated, {g['killed']} killed, "
        f"{g['waived']} waived as equivalent"
        + (f" ({in_code} in the code)" if in_code else "")
        + f", {g['survived']} survived"
        + (f", {g['other']} not measured" if g["other"] else "")
        + f" (score {g['score']:.1%}).",
        "",
    ]
    for r in g["survivors"] + g["unmeasured"]:
        why = f" ({r['why']})" if r.get("why") else ""
        lines.append(f"- `{r['id']}` ({r['operator']}, {r['where']}): {r['status']}{why}")
        lines += ["", "  ```diff"] + [f"  {d}" for d in r["diff"].rstrip("\n").split("\n")]
        lines += ["  ```"]
    if g["survivors"] or g["unmeasured"]:
        lines.append("")
    return lines


def _anchor(t: dict[str, Any]) -> str:
    slug = f"{t['id']} — {t['title']}".lower()
    keep = "".join(c for c in slug if c.isalnum() or c in " -_")
    return keep.replace(" ", "-")


def to_json(value: Any, depth: int = 0) -> str:
    """The report as JSON, laid out so a change shows as the lines it touches and the file
    stays small: indented down to each theorem's fields and the items of their lists, and
    each such item (a witness, a mutant, an anchor, an input) on one line of its own."""
    if (isinstance(value, dict) and depth >= 4 and value) or not isinstance(value, (dict, list)):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, list) and (
        depth >= 5 or all(not isinstance(v, (dict, list)) for v in value)
    ):
        return json.dumps(value, ensure_ascii=False)
    if not value:
        return json.dumps(value)
    pad = "  " * (depth + 1)
    if isinstance(value, dict):
        rows = [
            f"{pad}{json.dumps(k, ensure_ascii=False)}: {to_json(v, depth + 1)}"
            for k, v in value.items()
        ]
        return "{\n" + ",\n".join(rows) + "\n" + "  " * depth + "}"
    rows = [pad + to_json(v, depth + 1) for v in value]
    return "[\n" + ",\n".join(rows) + "\n" + "  " * depth + "]"


def write(doc: dict[str, Any], report_dir: Path) -> list[Path]:
    """Write ``verdicts.json`` and ``PROOFS.md`` into ``report_dir``; return their paths.

    ``doc`` is validated against the shipped JSON Schema first; a report that does not
    conform is not written (:class:`ValueError` says where it breaks)."""
    problems = schema_errors(doc)
    if problems:
        raise ValueError(
            "the report does not match pytest_fak/verdicts.schema.json (a "
            "pytest_fak_modify_report hook may have broken it): " + "; ".join(problems[:5])
        )
    report_dir.mkdir(parents=True, exist_ok=True)
    js = report_dir / "verdicts.json"
    md = report_dir / "PROOFS.md"
    js.write_text(to_json(doc) + "\n", encoding="utf-8")
    md.write_text(render_markdown(doc), encoding="utf-8")
    return [js, md]
