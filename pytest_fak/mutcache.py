"""The generated-mutant cache: what each witness did under each mutant, keyed by content.

A cached fact is "witness W, under generated mutant M, was killed / survived / did not
reach the mutated line". It is true for as long as what produced it is unchanged, so its
key is SHA-256 over: the mutant (its anchor's source hash and its id, which carries the
hash of the mutated text), the witness (its node id and the content of its test module),
and the run's budget (pytest-fak's version, Hypothesis's version, the mutant example
and memory budgets). The theorem text is not in the key: it decides which anchors, witnesses
and waivers a verdict folds, and that is recomputed on every run; it cannot change what a
witness does under a mutant. Each entry also records the plugin build that wrote it (its
version and code digest): another build's entry can never be hit again, so writing the file
drops it.

The file is ``<rootdir>/.fak-cache/mutants.json`` by default (ini ``fak_cache_dir``): one
entry per line, sorted, so it can be committed and merged; a clean clone of a commit
whose cache is committed re-mutates only what changed since. Entries whose anchor or
witness changed are pruned when the file is written; the rest are kept, so a partial
run never forgets other theorems' results.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["CACHE_FILE", "Entry", "MutantCache", "witness_fingerprint"]

CACHE_FILE = "mutants.json"
_SCHEMA = "pytest-fak/mutant-cache/v2"
#: an older file's rows carry no plugin digest: they load, and the next write drops them
_OLD_SCHEMAS = frozenset({"pytest-fak/mutant-cache/v1"})
#: outcomes worth keeping (broken and inconclusive runs are retried next time)
CACHEABLE = frozenset({"killed", "timeout", "memory", "crashed", "survived", "uncovered"})


@dataclass(frozen=True, slots=True)
class Entry:
    outcome: str
    symbol: str
    anchor_sha: str
    nodeid: str
    witness_fp: str
    plugin: str = ""


def witness_fingerprint(path: str | os.PathLike[str], budget: str) -> str:
    """SHA-256 of a witness's test module content and the run's budget string."""
    h = hashlib.sha256(budget.encode())
    try:
        h.update(Path(path).read_bytes())
    except OSError:
        h.update(b"<unreadable>")
    return h.hexdigest()


def key(anchor_sha: str, mutant_id: str, nodeid: str, witness_fp: str) -> str:
    raw = "\0".join((anchor_sha, mutant_id, nodeid, witness_fp))
    return hashlib.sha256(raw.encode()).hexdigest()


class MutantCache:
    """Entries read at the start of a run, plus the ones this run adds."""

    def __init__(self, directory: Path, read: bool = True, plugin: str | None = None) -> None:
        """``plugin``: the digest of the plugin build writing this run's entries; with it,
        :meth:`write` drops every entry another build wrote (``None`` keeps them all, for
        tools that merge caches)."""
        self.path = directory / CACHE_FILE
        self.plugin = plugin
        self.entries: dict[str, Entry] = {}
        self.fresh: dict[str, Entry] = {}
        if read:
            self._load()

    def _load(self) -> None:
        try:
            doc = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return
        if not isinstance(doc, dict) or doc.get("schema") not in {_SCHEMA, *_OLD_SCHEMAS}:
            return
        entries = doc.get("entries")
        if not isinstance(entries, dict):
            return
        for k, row in entries.items():
            ok = isinstance(row, list) and len(row) in (5, 6)
            if ok and all(isinstance(x, str) for x in row):
                self.entries[k] = Entry(*row)

    def get(self, anchor_sha: str, mutant_id: str, nodeid: str, witness_fp: str) -> str | None:
        e = self.entries.get(key(anchor_sha, mutant_id, nodeid, witness_fp))
        return e.outcome if e is not None else None

    def put(
        self,
        symbol: str,
        anchor_sha: str,
        mutant_id: str,
        nodeid: str,
        witness_fp: str,
        outcome: str,
    ) -> None:
        if outcome in CACHEABLE:
            k = key(anchor_sha, mutant_id, nodeid, witness_fp)
            self.fresh[k] = Entry(
                outcome, symbol, anchor_sha, nodeid, witness_fp, self.plugin or ""
            )

    def write(self, anchors: dict[str, str], witnesses: dict[str, str]) -> Path:
        """Write old entries still valid for ``anchors`` (symbol → source sha) and
        ``witnesses`` (node id → fingerprint) and made by this plugin build, plus this
        run's; return the path."""
        keep: dict[str, Any] = {}
        for k, e in self.entries.items():
            if self.plugin is not None and e.plugin != self.plugin:
                continue
            if e.symbol in anchors and anchors[e.symbol] != e.anchor_sha:
                continue
            if e.nodeid in witnesses and witnesses[e.nodeid] != e.witness_fp:
                continue
            keep[k] = e
        keep.update(self.fresh)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        rows = ",\n".join(
            f"    {json.dumps(k)}: "
            + json.dumps([e.outcome, e.symbol, e.anchor_sha, e.nodeid, e.witness_fp, e.plugin])
            for k, e in sorted(keep.items())
        )
        text = f'{{\n  "schema": "{_SCHEMA}",\n  "entries": {{\n{rows}\n  }}\n}}\n'
        if not keep:
            text = f'{{\n  "schema": "{_SCHEMA}",\n  "entries": {{}}\n}}\n'
        fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=".mutants-", suffix=".json")
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.chmod(tmp, 0o644)
        os.replace(tmp, self.path)
        return self.path
