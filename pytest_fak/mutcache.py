"""The generated-mutant cache: which witness decided each mutant, and on what it depended.

A cached fact is "witness W, under generated mutant M, was killed (or survived)". It is
true for as long as what produced it is unchanged: the mutant (its id and the source
hash of its anchor, together its *key*), the witness's run on the real code (its
fingerprint, :mod:`pytest_fak.fingerprint`: every block of project code it executed and
every project data file it read, at function granularity), and the run's budget
(pytest-fak's build, Hypothesis's version, the mutant example and memory budgets). An
entry is reused only while its fingerprint holds, checked key by key against the code
and files as they are now, so a change to a callee, a helper, a fixture's module or a
data file re-runs exactly the results that depended on it.

The file keeps one compact entry per mutant and deciding witness, not one per pair the
run tried: a kill (by the witness that made it), or a survival where no witness killed
the mutant; a mutant a witness never reached is recomputed from coverage on each run.
It is ``<rootdir>/.fak-cache/mutants.json`` by default (ini ``fak_cache_dir``), one item
per line, sorted, so it can be committed, diffed and merged (``fak cache merge``):

- ``build``: the budget string every entry was made under; a file of another build is
  not read (the run says so and re-runs every mutant);
- ``blocks``: ``sid → [key, hash]``, one recorded dependency (``sid``: a short digest
  of the pair, so rows are shared by every fingerprint that has them);
- ``fingerprints``: ``fingerprint → "sid sid …"``, the dependencies of one recorded run;
- ``witnesses``: ``node id → fingerprint`` of each witness's latest run (what ``fak
  proofs check`` tests for staleness);
- ``mutants``: ``key → [[node id, outcome, fingerprint], …]``.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_fak.fingerprint import Blocks, digest, stale_keys

__all__ = ["CACHE_FILE", "CacheFile", "MutantCache", "mutant_key"]

CACHE_FILE = "mutants.json"
SCHEMA = "pytest-fak/mutant-cache/v3"
#: outcomes worth keeping (broken and inconclusive runs are retried next time)
KILLS = frozenset({"killed", "timeout", "memory", "crashed"})
CACHEABLE = KILLS | {"survived"}


def mutant_key(mutant_id: str, anchor_sha: str) -> str:
    """A mutant's cache key: its id and its anchor's source hash (the whole function)."""
    return f"{mutant_id}@{anchor_sha[:12]}"


def _sid(key: str, value: str) -> str:
    return hashlib.sha256(f"{key}={value}".encode()).hexdigest()[:10]


@dataclass
class CacheFile:
    """The content of one cache file (see the module docstring for the fields)."""

    build: str = ""
    deps: dict[str, dict[str, str]] = field(default_factory=dict)  #: fingerprint → key → hash
    witnesses: dict[str, str] = field(default_factory=dict)  #: node id → fingerprint
    mutants: dict[str, dict[str, tuple[str, str]]] = field(default_factory=dict)

    @classmethod
    def read(cls, path: Path) -> CacheFile | None:
        """The file at ``path`` (``None``: missing, unreadable or of another schema)."""
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        if not isinstance(doc, dict) or doc.get("schema") != SCHEMA:
            return None
        try:
            blocks = {str(s): (str(k), str(h)) for s, (k, h) in dict(doc["blocks"]).items()}
            deps: dict[str, dict[str, str]] = {}
            for fp, sids in dict(doc["fingerprints"]).items():
                pairs = [blocks[s] for s in str(sids).split()]
                if digest(dict(pairs)) == fp:  # a row that does not add up is dropped
                    deps[str(fp)] = dict(pairs)
            witnesses = {str(n): str(fp) for n, fp in dict(doc["witnesses"]).items()}
            mutants: dict[str, dict[str, tuple[str, str]]] = {}
            for k, rows in dict(doc["mutants"]).items():
                for nodeid, outcome, fp in rows:
                    if outcome in CACHEABLE:
                        mutants.setdefault(str(k), {})[str(nodeid)] = (str(outcome), str(fp))
            return cls(str(doc.get("build", "")), deps, witnesses, mutants)
        except (KeyError, TypeError, ValueError):
            return None

    def merge(self, other: CacheFile) -> None:
        """Add ``other``'s rows (made by the same build). Where the two differ on one pair,
        a kill wins over a survival, of two kills the first by name (``crashed``,
        ``killed``, ``memory``, ``timeout``), and of two runs with one outcome (a witness
        that ran in two shards) the greater fingerprint, as for a witness's own recorded
        run: merging the same files in any order gives the same content."""
        for fp, d in other.deps.items():
            self.deps.setdefault(fp, d)
        for n, fp in other.witnesses.items():
            self.witnesses[n] = max(fp, self.witnesses.get(n, fp))
        for k, rows in other.mutants.items():
            mine = self.mutants.setdefault(k, {})
            for n, row in rows.items():
                if n not in mine or (_rank(row[0]), row[1]) > (_rank(mine[n][0]), mine[n][1]):
                    mine[n] = row

    def text(self) -> str:
        """The file's content: one item per line, sorted."""
        used = set(self.witnesses.values()) | {
            fp for rows in self.mutants.values() for _, fp in rows.values()
        }
        deps = {fp: d for fp, d in self.deps.items() if fp in used}
        blocks: dict[str, list[str]] = {}
        fps: dict[str, str] = {}
        for fp, d in deps.items():
            sids = []
            for k, h in d.items():
                s = _sid(k, h)
                blocks[s] = [k, h]
                sids.append(s)
            fps[fp] = " ".join(sorted(sids))

        def section(name: str, items: Mapping[str, Any]) -> str:
            rows = ",\n".join(
                f"    {json.dumps(k)}: {json.dumps(v, ensure_ascii=False)}"
                for k, v in sorted(items.items())
            )
            return f'  "{name}": {{\n{rows}\n  }}' if rows else f'  "{name}": {{}}'

        mutants = {
            k: sorted([n, o, fp] for n, (o, fp) in rows.items())
            for k, rows in self.mutants.items()
            if rows
        }
        parts = [
            f'  "schema": "{SCHEMA}"',
            f'  "build": {json.dumps(self.build)}',
            section("blocks", blocks),
            section("fingerprints", fps),
            section("witnesses", self.witnesses),
            section("mutants", mutants),
        ]
        return "{\n" + ",\n".join(parts) + "\n}\n"

    def write(self, path: Path) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".mutants-", suffix=".json")
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(self.text())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
        return path


class MutantCache:
    """The entries read at the start of a run, checked against the code as it is now,
    plus the ones this run adds."""

    def __init__(self, directory: Path, build: str, blocks: Blocks, read: bool = True) -> None:
        self.path = directory / CACHE_FILE
        self.build = build
        self.blocks = blocks
        self.file = CacheFile(build)
        #: why the file on disk was not used (``None``: it was, or there was none)
        self.not_read: str | None = None
        if read:
            got = CacheFile.read(self.path)
            if got is None and self.path.exists():
                self.not_read = f"{self.path.name} is unreadable or of an older format"
            elif got is not None and got.build != build:
                self.not_read = (
                    f"{self.path.name} was written under another build or budget "
                    f"({_differs(got.build, build)}); no entry can be reused, every "
                    "mutant re-runs (the plugin's mutation code, Hypothesis and the "
                    "budgets can change any outcome)"
                )
            elif got is not None:
                self.file = got
        self._holds: dict[str, bool] = {}
        self.fresh: dict[str, dict[str, tuple[str, str]]] = {}

    def holds(self, fp: str) -> bool:
        """Whether the recorded run ``fp`` still depends on code and files as they are."""
        if fp not in self._holds:
            deps = self.file.deps.get(fp)
            self._holds[fp] = deps is not None and not stale_keys(deps, self.blocks)
        return self._holds[fp]

    def get(self, key: str, nodeid: str, fp: str | None) -> str | None:
        """The cached outcome of ``nodeid`` under mutant ``key`` while the fingerprint of
        the run that made it holds: it is ``fp``, this run's (``None``: not known), or every
        block and file it recorded is unchanged. A run that executed more or less than the
        recorded one (the first witness on a worker sets up its session fixtures) does not
        undo what the recorded run depended on."""
        row = self.file.mutants.get(key, {}).get(nodeid)
        if row is None:
            return None
        outcome, at = row
        if fp is not None and at == fp and fp in self.file.deps:
            return outcome
        return outcome if self.holds(at) else None

    def killed_by(self, key: str, nodeids: Iterable[str]) -> str | None:
        """One of ``nodeids`` whose cached kill of ``key`` still holds."""
        rows = self.file.mutants.get(key, {})
        for n in nodeids:
            row = rows.get(n)
            if row is not None and row[0] in KILLS and self.holds(row[1]):
                return n
        return None

    def write(
        self,
        ran: Mapping[str, tuple[str, dict[str, str]]],
        results: Mapping[str, Mapping[str, str]],
        theorems_of: Callable[[str], set[str] | None],
        keys: Mapping[str, tuple[str, set[str]]],
    ) -> Path:
        """Write what still holds and this run's results.

        ``ran``: node id → (fingerprint, deps) of each witness that passed this run;
        ``results``: node id → {mutant key → outcome} this run decided or confirmed;
        ``theorems_of``: the theorems a witness binds; ``keys``: mutant key → (mutant id,
        the theorems it is a mutant of), for every mutant this run knows (a row of an
        unknown key is kept while its fingerprint holds: a partial run never forgets
        other theorems' results)."""
        old = self.file
        new = CacheFile(self.build)
        for n, (fp, deps) in ran.items():
            new.witnesses[n] = fp
            new.deps[fp] = deps
        for n, fp in old.witnesses.items():
            if n not in ran and self.holds(fp):
                new.witnesses[n] = fp
                new.deps[fp] = old.deps[fp]
        pairs: dict[str, dict[str, tuple[str, str]]] = {}
        for k, rows in old.mutants.items():
            for n, (o, fp) in rows.items():
                if self.holds(fp):
                    pairs.setdefault(k, {})[n] = (o, fp)
                    new.deps.setdefault(fp, old.deps[fp])
        for n, outs in results.items():
            if n not in ran:
                continue
            for k, o in outs.items():
                kept = pairs.get(k, {}).get(n)
                if o in CACHEABLE and (kept is None or kept[0] != o):
                    # a result this run made (one it reused keeps the run it came from)
                    pairs.setdefault(k, {})[n] = (o, ran[n][0])
        for k, rows in pairs.items():
            new.mutants[k] = _deciding(rows, keys.get(k, ("", set()))[1], theorems_of)
        self.file = new
        return new.write(self.path)


def _differs(then: str, now: str) -> str:
    """What differs between two build strings (``part; part; ...``): ``was → is`` each."""
    a, b = then.split("; "), now.split("; ")
    if len(a) != len(b):
        return f"{then!r} → {now!r}"
    return ", ".join(f"{x!r} → {y!r}" for x, y in zip(a, b, strict=True) if x != y)


_BY_NAME = sorted(CACHEABLE)


def _rank(outcome: str) -> tuple[bool, int]:
    """Which of two outcomes of one pair a merge keeps: the higher."""
    return outcome in KILLS, -_BY_NAME.index(outcome)


def _deciding(
    rows: dict[str, tuple[str, str]],
    theorems: set[str],
    theorems_of: Callable[[str], set[str] | None],
) -> dict[str, tuple[str, str]]:
    """The rows worth keeping: for each theorem of the mutant one kill by a witness of it
    (preferring a witness that kills it for the most theorems), and a survival only of a
    witness some theorem of which no kept row kills it for. A row of a witness this run
    did not see, or of a mutant it does not know (``theorems`` empty), is kept as it is."""
    known = {n: theorems_of(n) for n in rows}
    keep = {n: r for n, r in rows.items() if known[n] is None or not theorems}
    if not theorems:
        return keep
    kills = sorted(
        (n for n, (o, _) in rows.items() if o in KILLS and known[n] is not None),
        key=lambda n: (-len((known[n] or set()) & theorems), n),
    )
    covered: set[str] = set()
    for n in kills:
        mine = (known[n] or set()) & theorems
        if mine - covered:
            keep[n] = rows[n]
            covered |= mine
    for n, row in rows.items():
        ts = known[n]
        if row[0] not in KILLS and ts is not None and (ts & theorems) - covered:
            keep[n] = row
    return keep
