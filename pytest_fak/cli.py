"""``fak proofs check``: which committed verdicts no longer match the code (STALE).

A verdict is bound by SHA-256 to the theorem's text, the source of each of its anchors,
and its other inputs (:mod:`pytest_fak.inputs`): the source of each bound witness and of
each declared mutant's factory, and each file it lists under **DEPENDS-ON.** The check
re-reads the theorem documents, re-resolves the anchors and re-reads those sources; a
theorem any of whose inputs changed, whose anchor no longer resolves, that vanished, or
that is new since the report, is listed as STALE and the exit status is 1.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from pytest_fak import paths

__all__ = ["check", "document_errors", "register"]


def register(subparsers: Any) -> None:
    """Add ``proofs check`` to the ``fak`` command line (the ``fak.commands`` entry point)."""
    proofs = subparsers.add_parser("proofs", help="work with the theorem verdict report")
    psub = proofs.add_subparsers(dest="proofs_command", metavar="ACTION", required=True)
    chk = psub.add_parser(
        "check", help="list theorems whose text or anchor code changed since the report"
    )
    chk.add_argument(
        "--report", default="proofs/verdicts.json", help="default: proofs/verdicts.json"
    )
    chk.add_argument(
        "--theorems-dir",
        action="append",
        default=[],
        help="theorem directory (repeatable); default: the directories the report lists",
    )
    chk.add_argument("--root", default=".", help="project root the report's paths are under")
    chk.set_defaults(func=_main)


def check(
    report: dict[str, Any], dirs: list[Path], root: Path | None = None
) -> tuple[list[tuple[str, str]], int]:
    """``([(theorem id, why stale)], theorems checked)`` for ``report`` against ``dirs``;
    ``root``: the project root the recorded witness, mutant and dependency files are under
    (default: the working directory). Document errors are not theorems: see
    :func:`document_errors`."""
    from pytest_fak.inputs import changed
    from pytest_fak.symbols import SymbolError, resolve
    from pytest_fak.theorems import TheoremIndex, load_theorems

    index, _ = load_theorems(dirs)
    stale: list[tuple[str, str]] = []
    current: TheoremIndex = index
    reported = {t["id"]: t for t in report.get("theorems", [])}
    for tid, rec in reported.items():
        t = current.get(tid)
        if t is None:
            stale.append((tid, "the theorem is no longer in the documents"))
            continue
        if t.text_sha256 != rec.get("theorem_sha256"):
            stale.append((tid, "the theorem text changed"))
            continue
        before = len(stale)
        for a in rec.get("anchors", []):
            try:
                res = resolve(a["symbol"])
            except SymbolError as exc:
                stale.append((tid, f"anchor {a['symbol']} no longer resolves: {exc}"))
                break
            assert res is not None
            if res.sha256 != a.get("sha256"):
                stale.append((tid, f"the source of anchor {a['symbol']} changed"))
                break
        if len(stale) == before:
            why = changed(rec.get("inputs") or {}, root or Path.cwd())
            if why:
                stale.append((tid, "; ".join(why)))
    for t in current:
        if t.id not in reported:
            stale.append((t.id, "the theorem is not in the report (new since it was made)"))
    return stale, len(reported)


def document_errors(dirs: list[Path]) -> list[str]:
    """What is wrong with the theorem documents in ``dirs`` (a missing directory included)."""
    from pytest_fak.theorems import load_theorems

    return [str(e) for e in load_theorems(dirs)[1]]


def _main(ns: argparse.Namespace) -> int:
    root = Path(ns.root).resolve()
    path = Path(ns.report)
    path = path if path.is_absolute() else root / path
    try:
        report = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        print(f"fak proofs check: cannot read {path}: {exc}", file=sys.stderr)
        return 2
    if report.get("schema") != "pytest-fak/verdicts/v1":
        print(
            f"fak proofs check: {path} is not a pytest-fak verdict report "
            f"(schema {report.get('schema')!r})",
            file=sys.stderr,
        )
        return 2
    refs = [str(d) for d in ns.theorems_dir] or [str(d) for d in report.get("theorem_dirs", [])]
    try:
        dirs = [paths.resolve_dir_ref(r, root) for r in refs]
    except ValueError as exc:
        print(f"fak proofs check: {exc}", file=sys.stderr)
        return 2
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))
    stale, total = check(report, dirs, root)
    errors = document_errors(dirs)
    for err in errors:
        print(f"ERROR {err}")
    for tid, why in stale:
        print(f"STALE {tid}: {why}")
    bad = f", {len(errors)} document errors" if errors else ""
    print(f"fak proofs check: {len(stale)} stale of {total} reported theorems{bad} ({path.name})")
    return 1 if stale or errors else 0
