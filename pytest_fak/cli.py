"""``fak proofs check``: which committed verdicts no longer match the code (STALE); also
``fak cache merge`` and ``fak mutants list|show`` (:mod:`pytest_fak.survivors`).

A verdict is bound by SHA-256 to the theorem's text, the source of each of its anchors,
and its other inputs (:mod:`pytest_fak.inputs`): the source of each bound witness and of
each declared mutant's factory, and each file it lists under **DEPENDS-ON.** It is also
bound to its witnesses' fingerprints (:mod:`pytest_fak.fingerprint`), read from the
mutant cache the proof run wrote: every block of project code each witness executed and
every project data file it read, so a changed callee, helper, fixture or data file makes
the theorem STALE without any **DEPENDS-ON.** The check re-reads the theorem documents,
re-resolves the anchors and re-reads those sources; a theorem any of whose inputs
changed, whose anchor no longer resolves, that vanished, or that is new since the
report, is listed as STALE and the exit status is 1.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from pytest_fak import paths
from pytest_fak.fingerprint import Blocks, project_blocks, stale_keys
from pytest_fak.mutcache import CacheFile

__all__ = ["Fingerprints", "check", "document_errors", "merge_caches", "register"]


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
    chk.add_argument(
        "--cache",
        default=".fak-cache/mutants.json",
        help="the mutant cache holding the witnesses' fingerprints "
        "(default: .fak-cache/mutants.json)",
    )
    chk.set_defaults(func=_main)
    cache = subparsers.add_parser("cache", help="work with the generated-mutant cache")
    csub = cache.add_subparsers(dest="cache_command", metavar="ACTION", required=True)
    merge = csub.add_parser(
        "merge",
        help="fold the caches of sharded proof runs (--fak-shard) into one",
        description="Fold mutant caches written by the same plugin build (e.g. one per "
        "--fak-shard job) into OUT; OUT itself is folded in when it exists. Run the proof "
        "once more on the merged cache to assemble the report from it.",
    )
    merge.add_argument("out", metavar="OUT", help="the merged cache to write")
    merge.add_argument("caches", metavar="CACHE", nargs="+", help="a cache to fold in")
    merge.set_defaults(func=_merge)
    _register_mutants(subparsers)


def _register_mutants(subparsers: Any) -> None:
    """``fak mutants list`` and ``fak mutants show`` (:mod:`pytest_fak.survivors`)."""
    mutants = subparsers.add_parser(
        "mutants", help="list and show the generated mutants of the last proof run"
    )
    msub = mutants.add_subparsers(dest="mutants_command", metavar="ACTION", required=True)
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--report", default="proofs/verdicts.json", help="default: proofs/verdicts.json"
    )
    common.add_argument(
        "--cache",
        default=".fak-cache/mutants.json",
        help="the mutant cache naming who killed each mutant (default: .fak-cache/mutants.json)",
    )
    common.add_argument("--root", default=".", help="project root the report's paths are under")
    lst = msub.add_parser(
        "list",
        parents=[common],
        help="one line per generated mutant: id, theorems, outcome, file:line",
    )
    lst.add_argument("--theorem", metavar="ID", default=None, help="only this theorem's")
    lst.add_argument(
        "--survivors", action="store_true", help="only the survivors (neither killed nor waived)"
    )
    lst.set_defaults(func=_mutants_list)
    show = msub.add_parser(
        "show",
        parents=[common],
        help="a mutant's diff, location, witnesses, and for a survivor the waiver to paste",
    )
    show.add_argument("mutant", metavar="ID", help="a generated mutant id (from fak mutants list)")
    show.set_defaults(func=_mutants_show)


def _mutant_problems(problems: list[str]) -> None:
    """What could not be read, the first few in full."""
    for p in problems[:3]:
        print(f"fak mutants: {p}", file=sys.stderr)
    if len(problems) > 3:
        print(
            f"fak mutants: and {len(problems) - 3} more anchors changed or gone since the "
            "report (fak proofs check lists the theorems)",
            file=sys.stderr,
        )


def _mutant_rows(
    ns: argparse.Namespace, theorem: str | None, symbol: str | None = None
) -> tuple[Any, list[str]] | None:
    from pytest_fak import survivors

    root = Path(ns.root).resolve()
    path = Path(ns.report)
    path = path if path.is_absolute() else root / path
    try:
        report = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        print(
            f"fak mutants: cannot read {path}: {exc} (run pytest --fak-theorems "
            "--fak-mutate=incremental first, or pass --report)",
            file=sys.stderr,
        )
        return None
    if not isinstance(report, dict) or report.get("schema") != "pytest-fak/verdicts/v1":
        print(f"fak mutants: {path} is not a pytest-fak verdict report", file=sys.stderr)
        return None
    known = [t.get("id") for t in report.get("theorems", []) if isinstance(t, dict)]
    if theorem is not None and theorem not in known:
        print(
            f"fak mutants: no theorem {theorem!r} in {path} (known: {', '.join(map(str, known))})",
            file=sys.stderr,
        )
        return None
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))
    cache = Path(ns.cache)
    cache = cache if cache.is_absolute() else root / cache
    return survivors.collect(report, CacheFile.read(cache), root, theorem, symbol=symbol)


def _mutants_list(ns: argparse.Namespace) -> int:
    from pytest_fak.survivors import click_path

    got = _mutant_rows(ns, ns.theorem)
    if got is None:
        return 2
    rows, problems = got
    _mutant_problems(problems)
    if not rows:
        print(
            "fak mutants: the report has no generated mutants"
            + (f" of {ns.theorem}" if ns.theorem else "")
            + ": run pytest --fak-theorems --fak-mutate=incremental first",
            file=sys.stderr,
        )
    shown = [r for r in rows if r.survivor or not ns.survivors]
    for r in shown:
        where = click_path(r.path, r.line) if r.path else "?"
        print(f"{r.id}  {','.join(r.theorems)}  {r.status}  {where}")
    n = sum(1 for r in rows if r.survivor)
    print(
        f"fak mutants: {len(shown)} listed, {n} survivors of {len(rows)} generated mutants"
        + ("; details and the waiver to paste: fak mutants show ID" if n else "")
    )
    return 0


def _mutants_show(ns: argparse.Namespace) -> int:
    from pytest_fak.survivors import describe

    got = _mutant_rows(ns, None, str(ns.mutant).split("/", 1)[0])
    if got is None:
        return 2
    rows, problems = got
    row = next((r for r in rows if r.id == ns.mutant), None)
    if row is None:
        near = [r.id for r in rows if ns.mutant in r.id or r.id.startswith(ns.mutant)][:5]
        hint = f"; did you mean {', '.join(near)}" if near else "; see fak mutants list"
        print(
            f"fak mutants: no generated mutant {ns.mutant!r} in the report{hint}", file=sys.stderr
        )
        return 2
    _mutant_problems(problems)
    print("\n".join(describe(row)))
    return 0


def check(
    report: dict[str, Any],
    dirs: list[Path],
    root: Path | None = None,
    fingerprints: Fingerprints | None = None,
) -> tuple[list[tuple[str, str]], int]:
    """``([(theorem id, why stale)], theorems checked)`` for ``report`` against ``dirs``;
    ``root``: the project root the recorded witness, mutant and dependency files are under
    (default: the working directory); ``fingerprints``: the witnesses' recorded runs.
    Document errors are not theorems: see :func:`document_errors`."""
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
        if len(stale) == before and fingerprints is not None:
            moved = fingerprints.changed([w["nodeid"] for w in rec.get("witnesses", [])])
            if moved:
                stale.append((tid, moved))
    for t in current:
        if t.id not in reported:
            stale.append((t.id, "the theorem is not in the report (new since it was made)"))
    return stale, len(reported)


def merge_caches(out: Path, caches: list[Path]) -> tuple[CacheFile, list[str]]:
    """The fold of ``caches`` (and of ``out`` when it exists and was written by the same
    build), and what could not be folded: an unreadable file, or one written by another
    build than the first cache's (its results were made under other rules and cannot
    stand beside them). An ``out`` of another build is replaced, not refused: no run of
    this build could read it."""
    merged: CacheFile | None = None
    problems: list[str] = []
    for path in caches:
        got = CacheFile.read(path)
        if got is None:
            problems.append(f"{path}: not a readable pytest-fak mutant cache of this version")
        elif merged is None:
            merged = got
        elif got.build != merged.build:
            problems.append(
                f"{path}: written by another build or budget ({got.build!r}, not "
                f"{merged.build!r}): re-run that shard with the same pytest-fak and options"
            )
        else:
            merged.merge(got)
    before = CacheFile.read(out) if out.exists() else None
    if merged is not None and before is not None and before.build == merged.build:
        merged.merge(before)
    return merged or CacheFile(), problems


def _merge(ns: argparse.Namespace) -> int:
    out = Path(ns.out)
    merged, problems = merge_caches(out, [Path(c) for c in ns.caches])
    for p in problems:
        print(f"fak cache merge: {p}", file=sys.stderr)
    if problems:
        print("fak cache merge: nothing written", file=sys.stderr)
        return 2
    merged.write(out)
    n = sum(len(rows) for rows in merged.mutants.values())
    print(
        f"fak cache merge: wrote {out}: {len(merged.mutants)} mutants, {n} results, "
        f"{len(merged.witnesses)} witness fingerprints"
    )
    return 0


class Fingerprints:
    """The witnesses' recorded fingerprints, checked against the project as it is now."""

    def __init__(self, recorded: CacheFile, blocks: Blocks) -> None:
        self.recorded = recorded
        self.blocks = blocks
        self.checked: set[str] = set()
        self.unknown: set[str] = set()

    @classmethod
    def load(cls, path: Path, root: Path, report_dir: Path) -> Fingerprints | None:
        recorded = CacheFile.read(path)
        if recorded is None:
            return None
        return cls(recorded, project_blocks(root, path.parent, report_dir))

    def changed(self, nodeids: list[str]) -> str | None:
        """Why the runs of ``nodeids`` no longer hold (``None``: they all hold, or were
        never recorded)."""
        for n in nodeids:
            fp = self.recorded.witnesses.get(n)
            deps = None if fp is None else self.recorded.deps.get(fp)
            if deps is None:
                self.unknown.add(n)
                continue
            self.checked.add(n)
            keys = stale_keys(deps, self.blocks)
            if keys:
                what = ", ".join(keys[:3]) + (f" and {len(keys) - 3} more" if len(keys) > 3 else "")
                return f"witness {n} depends on {what}, which changed since its run"
        return None

    def summary(self) -> str:
        s = f"{len(self.checked)} witness fingerprints checked"
        if self.unknown:
            s += f", {len(self.unknown)} witnesses without one (not run with mutants)"
        return s


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
    cache = Path(ns.cache)
    cache = cache if cache.is_absolute() else root / cache
    fingerprints = Fingerprints.load(cache, root, path.parent)
    stale, total = check(report, dirs, root, fingerprints)
    errors = document_errors(dirs)
    for err in errors:
        print(f"ERROR {err}")
    for tid, why in stale:
        print(f"STALE {tid}: {why}")
    bad = f", {len(errors)} document errors" if errors else ""
    print(f"fak proofs check: {len(stale)} stale of {total} reported theorems{bad} ({path.name})")
    if fingerprints is None:
        print(
            f"fak proofs check: no witness fingerprints ({cache} is missing or unreadable): "
            "a change to code the witnesses call, or to a data file they read, is only "
            "seen through DEPENDS-ON"
        )
    else:
        print(f"fak proofs check: {fingerprints.summary()}")
    return 1 if stale or errors else 0
