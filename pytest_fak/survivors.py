"""``fak mutants list`` and ``fak mutants show``: the generated mutants of the last report.

The report (``proofs/verdicts.json``) holds, per theorem, every surviving and unmeasured
generated mutant with its ``file:line`` and diff, and the ids of the waived ones; the
mutant cache (``.fak-cache/mutants.json``) holds which witness killed each killed mutant
(or which witnesses it survived). The mutants themselves are regenerated from the
theorems' anchors (:func:`pytest_fak.generated.generate`), so a killed mutant shows its
diff too. A location is printed as a path the user can open: relative to the working
directory when inside it, else absolute (never relative to an installed package's
``site-packages``). For a survivor, :func:`waiver_snippet` is the waiver to paste into the
theorem's document, in the syntax :func:`pytest_fak.theorems.parse_document` accepts.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_fak.mutcache import KILLS, CacheFile

__all__ = ["MutantRow", "click_path", "collect", "waiver_snippet"]

#: a report status that means the mutant was not killed
SURVIVOR_STATUSES = ("survived", "uncovered")


@dataclass
class MutantRow:
    """One generated mutant as the last run left it."""

    id: str
    operator: str
    status: str
    #: absolute path of the mutated file and its first mutated line (path None: unknown)
    path: str | None
    line: int
    diff: str
    theorems: list[str] = field(default_factory=list)
    #: node id → outcome, the witnesses that ran it (from the report and the cache)
    witnesses: dict[str, str] = field(default_factory=dict)
    #: why the status is what it is (a waiver's reason, an unconfirmed waiver)
    why: str | None = None

    @property
    def survivor(self) -> bool:
        return self.status in SURVIVOR_STATUSES


def click_path(path: str, line: int, cwd: Path | None = None) -> str:
    """``path:line`` relative to ``cwd`` (default: the working directory) when the file is
    under it, else absolute: what a terminal or editor opens as written."""
    p = Path(path).resolve()
    here = (cwd or Path.cwd()).resolve()
    try:
        shown = p.relative_to(here).as_posix()
    except ValueError:
        shown = p.as_posix()
    return f"{shown}:{line}"


def _split_where(where: str, root: Path) -> tuple[str, int]:
    path, _, line = where.rpartition(":")
    p = Path(path)
    return str(p if p.is_absolute() else root / p), int(line) if line.isdigit() else 1


def waiver_snippet(row: MutantRow) -> str:
    """The waiver of ``row`` to paste into its theorem's **EQUIVALENT-MUTANTS.** field
    (the field's header included: keep one header per theorem)."""
    return (
        "**EQUIVALENT-MUTANTS.**\n"
        f"- `{row.id}` — <why no input tells this mutant from the code: replace this text>"
    )


def _cache_rows(cache: CacheFile | None, mid: str) -> dict[str, str]:
    """node id → outcome of ``mid`` in the cache, over every anchor version it holds."""
    out: dict[str, str] = {}
    if cache is None:
        return out
    for key, rows in cache.mutants.items():
        if key.rpartition("@")[0] == mid:
            for nodeid, (outcome, _fp) in rows.items():
                out[nodeid] = outcome
    return out


def collect(
    report: dict[str, Any],
    cache: CacheFile | None,
    root: Path,
    theorem: str | None = None,
    regenerate: bool = True,
    symbol: str | None = None,
) -> tuple[list[MutantRow], list[str]]:
    """Every generated mutant the report's theorems (or ``theorem`` alone; or those of the
    anchor ``symbol`` alone) have, and what could not be read (an anchor that no longer
    resolves, or changed since the report). ``root``: the project root the report's paths
    are relative to."""
    rows: dict[str, MutantRow] = {}
    problems: list[str] = []
    records = [t for t in report.get("theorems", []) if isinstance(t, dict)]
    if theorem is not None:
        records = [t for t in records if t.get("id") == theorem]
    if symbol is not None:
        records = [t for t in records if any(a.get("symbol") == symbol for a in t["anchors"])]
    for t in records:
        gen = t.get("generated")
        if not isinstance(gen, dict):
            continue
        tid = str(t["id"])
        passed = [w["nodeid"] for w in t.get("witnesses", []) if w.get("outcome") == "passed"]
        listed: dict[str, dict[str, Any]] = {}
        for key in ("survivors", "unmeasured"):
            for r in gen.get(key) or []:
                listed[str(r["id"])] = r
        waived = {str(w["id"]): str(w.get("reason", "")) for w in gen.get("waivers") or []}
        for mid, r in listed.items():
            path, line = _split_where(str(r["where"]), root)
            row = rows.setdefault(
                mid, MutantRow(mid, str(r["operator"]), str(r["status"]), path, line, r["diff"])
            )
            row.why = r.get("why") or row.why
            if tid not in row.theorems:
                row.theorems.append(tid)
        if not regenerate:
            continue
        for m, changed in _regenerated(t, problems, symbol):
            if m.id in rows:
                row = rows[m.id]
                if tid not in row.theorems:
                    row.theorems.append(tid)
                continue
            status = "waived" if m.id in waived else "killed"
            if changed and m.id not in waived:
                status = "not run (its anchor changed since the report)"
            rows[m.id] = MutantRow(
                m.id, m.operator, status, m.filename, m.line, m.diff, [tid], why=waived.get(m.id)
            )
        for mid, reason in waived.items():
            if mid in rows:
                rows[mid].status, rows[mid].why = "waived", reason
        for mid in listed:
            # who ran it: the passing witnesses, unless the cache names who decided it
            rows[mid].witnesses.update({n: rows[mid].status for n in passed})
    for row in rows.values():
        found = _cache_rows(cache, row.id)
        if row.status == "killed":
            # the cache names the witness that killed it (a survival row is another's)
            found = {n: o for n, o in found.items() if o in KILLS}
        row.witnesses.update(found)
    return sorted(rows.values(), key=lambda r: r.id), problems


def _regenerated(
    t: dict[str, Any], problems: list[str], only: str | None = None
) -> Iterable[tuple[Any, bool]]:
    """The generated mutants of the report record ``t``'s anchors (or of its anchor
    ``only``), as the code is now, each with whether its anchor changed since the report."""
    from pytest_fak.generated import generate
    from pytest_fak.symbols import SymbolError

    seen: set[str] = set()
    for a in t.get("anchors", []):
        symbol = str(a.get("symbol"))
        if only is not None and symbol != only:
            continue
        try:
            g = generate(symbol)
        except (SymbolError, ImportError) as exc:
            problems.append(f"anchor {symbol} of {t['id']} no longer resolves: {exc}")
            continue
        changed = bool(a.get("sha256") and g.source_sha256 and a["sha256"] != g.source_sha256)
        if changed:
            problems.append(
                f"anchor {symbol} of {t['id']} changed since the report: its mutants are "
                "shown as the code is now; re-run the proofs for their outcomes"
            )
        for m in g.mutants:
            if m.id not in seen:
                seen.add(m.id)
                yield m, changed


def describe(row: MutantRow, cwd: Path | None = None) -> list[str]:
    """The lines ``fak mutants show`` prints for ``row``."""
    where = click_path(row.path, row.line, cwd) if row.path else "(unknown location)"
    out = [
        f"{row.id}",
        f"  theorems:  {', '.join(row.theorems)}",
        f"  outcome:   {row.status}" + (f" ({row.why})" if row.why else ""),
        f"  operator:  {row.operator}",
        f"  location:  {where}",
        "  witnesses: "
        + (
            "; ".join(f"{n} ({o})" for n, o in sorted(row.witnesses.items()))
            if row.witnesses
            else "none (a waived mutant is not run)"
            if row.status == "waived"
            else "none recorded (no passing witness reached it, or the cache is gone)"
        ),
        "",
        row.diff.rstrip(os.linesep),
    ]
    if row.survivor:
        out += [
            "",
            "Kill it: add a witness (or an example) that fails under this diff. If no input "
            "can tell it from the code, waive it: paste this into the theorem's section of "
            f"its document ({', '.join(row.theorems)}), and give the reason:",
            "",
            waiver_snippet(row),
        ]
    return out
