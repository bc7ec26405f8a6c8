"""H1.2 witnesses: shards split and merged give the results of one run.

Hypothesis draws theorem indexes with generated-mutant weights and shard counts: the
split must be a partition of the index, the same whatever order the index comes in, and
balanced as the greedy rule promises (no shard heavier than the lightest by more than
the heaviest theorem). It draws the results of one full run (mutant rows of witnesses,
each witness with the fingerprint of its run) and spreads them over shards written as
separate cache files: ``fak cache merge`` must fold them into exactly the full run's
rows, whatever the order, every row reused by the cache as it stands; and a shard written
by another build must be refused with nothing written.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fak_core.cli import main
from pytest_fak.fingerprint import Blocks, digest
from pytest_fak.mutcache import CACHEABLE, KILLS, CacheFile, MutantCache
from pytest_fak.selection import _shard, split
from pytest_fak.theorems import Theorem

BUILD = "pytest-fak test build"
EMPTY = digest({})


def theorem(tid: str) -> Theorem:
    return Theorem(tid, "", "t.md", 1, "", "A", "", (), (), (), None, "")


ids = st.from_regex(r"[A-Z][0-9]{1,2}(\.[0-9])?", fullmatch=True)


@pytest.mark.fak_theorem("H1.2")
@given(
    weights=st.dictionaries(ids, st.integers(0, 3) | st.integers(0, 500), min_size=0, max_size=12),
    n=st.integers(1, 5),
    data=st.data(),
)
def test_the_split_is_a_balanced_partition_the_same_in_every_process(
    weights: dict[str, int], n: int, data: st.DataObject
) -> None:
    index = [theorem(t) for t in weights]
    shards = split(index, n, lambda t: weights[t.id])
    assert len(shards) == n
    assert set().union(*shards) == set(weights)
    assert sum(len(s) for s in shards) == len(weights)  # no theorem in two shards
    again = split(data.draw(st.permutations(index)), n, lambda t: weights[t.id])
    assert again == shards  # another process, another collection order: the same split
    load = [sum(max(1, weights[t]) for t in s) for s in shards]
    if weights:
        assert max(load) - min(load) <= max(max(1, w) for w in weights.values())
    assert shards == model_split(weights, n)


def model_split(weights: dict[str, int], n: int) -> list[set[str]]:
    """The rule as the documentation states it: heaviest first (ties by id), each to the
    shard with the least weight so far (ties by shard number), a theorem weighing at
    least 1."""
    shards: list[set[str]] = [set() for _ in range(n)]
    load = [0] * n
    for tid, w in sorted(weights.items(), key=lambda kv: (-kv[1], kv[0])):
        lightest = min(load)
        i = load.index(lightest)
        shards[i].add(tid)
        load[i] += max(1, w)
    return shards


@pytest.mark.fak_theorem("H1.2")
@given(k=st.integers(-3, 9), n=st.integers(-3, 9), junk=st.text(max_size=6))
def test_a_shard_is_k_of_n_with_1_le_k_le_n_and_anything_else_is_refused(
    k: int, n: int, junk: str
) -> None:
    assert _shard(None) is None and _shard("") is None
    if 1 <= k <= n:
        assert _shard(f"{k}/{n}") == (k, n)
    else:
        with pytest.raises(pytest.UsageError, match="1 <= K <= N"):
            _shard(f"{k}/{n}")
    with pytest.raises(pytest.UsageError):  # not two integers
        _shard(f"x{junk}")


def best(a: tuple[str, str], b: tuple[str, str]) -> tuple[str, str]:
    """Of two rows (outcome, fingerprint) of one pair, the one the merge keeps: a kill
    over a survival, of two kills the first by name, else the greater fingerprint."""
    kills = sorted(r[0] for r in (a, b) if r[0] in KILLS)
    if kills and (a[0] != b[0]):
        return a if a[0] == kills[0] else b
    return max(a, b, key=lambda r: r[1])


def _fak(*argv: str) -> int:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            return main(list(argv))
        except SystemExit as exc:  # argparse
            return int(exc.code or 0)


nodes = st.sampled_from([f"tests/test_t.py::test_w{i}" for i in range(4)])
keys = st.sampled_from([f"m:f/op/{i:08x}@{i:012x}" for i in range(6)])


@pytest.mark.fak_theorem("H1.2")
@settings(deadline=None)
@given(
    rows=st.dictionaries(st.tuples(keys, nodes), st.sampled_from(sorted(CACHEABLE)), min_size=1),
    n=st.integers(1, 4),
    data=st.data(),
)
def test_shards_merged_hold_exactly_the_rows_of_one_run(
    rows: dict[tuple[str, str], str], n: int, data: st.DataObject
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        blocks = Blocks(root)
        # each witness's run depends on a data file of its own
        fps: dict[str, tuple[str, dict[str, str]]] = {}
        again: dict[str, tuple[str, dict[str, str]]] = {}  # its run in another shard
        for _, node in rows:
            name = f"d{hashlib.sha256(node.encode()).hexdigest()[:6]}.txt"
            (root / name).write_text(node, encoding="utf-8")
            (root / f"setup-{name}").write_text(node, encoding="utf-8")
            deps = {name: blocks.data_hash(name) or ""}
            fps[node] = (digest(deps), deps)
            more = {**deps, f"setup-{name}": blocks.data_hash(f"setup-{name}") or ""}
            again[node] = (digest(more), more)
        full = CacheFile(BUILD)
        for (k, node), outcome in rows.items():
            fp, deps = fps[node]
            full.deps[fp] = deps
            full.witnesses[node] = fp
            full.mutants.setdefault(k, {})[node] = (outcome, fp)
        # one shard per witness (a witness runs in the shard of its theorem)
        where = {node: data.draw(st.integers(0, n - 1)) for node in fps}
        shards = [CacheFile(BUILD) for _ in range(n)]
        for (k, node), outcome in rows.items():
            s = shards[where[node]]
            fp, deps = fps[node]
            s.deps[fp] = deps
            s.witnesses[node] = fp
            s.mutants.setdefault(k, {})[node] = (outcome, fp)
        # a witness of theorems in two shards runs in both: its rows there agree, or the
        # shards saw different outcomes (a survival and a kill: the kill stands; two kills:
        # the first by name), whatever the order of the merge
        for (k, node), outcome in rows.items():
            if n > 1 and data.draw(st.booleans()):
                other = shards[(where[node] + 1) % n]
                # the same run, or one that set up more (the first witness of a worker)
                fp2, deps2 = fps[node] if data.draw(st.booleans()) else again[node]
                twin = data.draw(st.sampled_from(sorted(CACHEABLE)))
                other.deps[fp2] = deps2
                other.witnesses[node] = max(fp2, other.witnesses.get(node, fp2))
                other.mutants.setdefault(k, {})[node] = (twin, fp2)
                full.deps[fp2] = deps2
                full.witnesses[node] = max(fp2, full.witnesses[node])
                full.mutants[k][node] = best((outcome, fps[node][0]), (twin, fp2))
        paths = [s.write(root / f"shard{i}" / "mutants.json") for i, s in enumerate(shards)]
        out = root / "merged" / "mutants.json"
        assert _fak("cache", "merge", str(out), *map(str, paths)) == 0
        merged = CacheFile.read(out)
        assert merged is not None
        assert merged.mutants == full.mutants
        assert merged.witnesses == full.witnesses
        assert merged.text() == full.text()
        # the order of the shards does not matter
        out2 = root / "merged2" / "mutants.json"
        order = data.draw(st.permutations(paths))
        assert _fak("cache", "merge", str(out2), *map(str, order)) == 0
        assert out2.read_text(encoding="utf-8") == out.read_text(encoding="utf-8")
        # the incremental run on the merged cache reuses every row: nothing re-runs
        cache = MutantCache(out.parent, BUILD, Blocks(root))
        for k, pairs in full.mutants.items():
            for node, (outcome, fp) in pairs.items():
                assert cache.get(k, node, None) == outcome
                assert cache.get(k, node, fp) == outcome


@pytest.mark.fak_theorem("H1.2")
@given(n=st.integers(1, 3), bad=st.data())
def test_a_shard_of_another_build_is_refused_and_nothing_is_written(
    n: int, bad: st.DataObject
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        paths = []
        odd = bad.draw(st.integers(0, n))
        for i in range(n + 1):
            f = CacheFile(BUILD if i != odd else "another build")
            f.witnesses[f"t::w{i}"] = EMPTY
            f.deps[EMPTY] = {}
            paths.append(f.write(root / f"s{i}" / "mutants.json"))
        out = root / "merged" / "mutants.json"
        assert _fak("cache", "merge", str(out), *map(str, paths)) == 2
        assert not out.exists()
        # an unreadable shard (cut short, another schema) is refused the same way
        good = [p for i, p in enumerate(paths) if i != odd]
        broken = root / "broken" / "mutants.json"
        broken.parent.mkdir()
        text = good[0].read_text(encoding="utf-8")
        broken.write_text(bad.draw(st.sampled_from([text[: len(text) // 2], "{}", "[]"])))
        assert _fak("cache", "merge", str(out), *map(str, [*good, broken])) == 2
        assert not out.exists()
        # a merge into an existing file of the same build keeps what it held
        keep = CacheFile(BUILD)
        keep.witnesses["t::kept"] = EMPTY
        keep.deps[EMPTY] = {}
        keep.write(out)
        assert _fak("cache", "merge", str(out), *map(str, good)) == 0
        merged = CacheFile.read(out)
        assert merged is not None and "t::kept" in merged.witnesses
        assert all(f"t::w{i}" in merged.witnesses for i in range(n + 1) if i != odd)
