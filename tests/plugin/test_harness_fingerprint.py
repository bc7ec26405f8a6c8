"""H1.1 witnesses: a cached result is reused only while its fingerprint holds.

Hypothesis draws a small project (modules of functions with constants in their bodies,
a module constant, data files), a witness's run on it (the functions it executed, the
data files it opened, read through a real :class:`~pytest_fak.fingerprint.ReadLog`) and
a cached kill made by that run. Then each kind of edit is made to a copy of the project
in turn: a comment, parentheses, a blank line, a changed body, a changed module constant,
a new function, a changed data file. The expectation comes from the edit alone: the kill
still holds exactly when the edit is formatting, or touches a function the run did not
execute, a module none of whose code it ran, or a file it did not read. The cache
(:class:`~pytest_fak.mutcache.MutantCache`), the staleness test
(:func:`~pytest_fak.fingerprint.stale_keys`) and ``fak proofs check``'s
(:class:`~pytest_fak.cli.Fingerprints`) must all agree with it, and name what changed.
"""

from __future__ import annotations

import json
import re
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from pytest_fak.cli import Fingerprints
from pytest_fak.fingerprint import MODULE, Blocks, ReadLog, digest, stale_keys
from pytest_fak.mutcache import CacheFile, MutantCache

BUILD = "pytest-fak test build"
NODE = "tests/test_x.py::test_w"
OTHER = "tests/test_x.py::test_other"
KEY = "pkg.mod:f/compare-boundary/1a2b3c4d@0123456789ab"

#: bodies a function may have; ``{c}`` is the constant an edit changes
BODIES = (
    ("return x + {c}",),
    ("if x > {c}:", "    return 1", "return 0"),
    ("total = 0", "for i in range(x):", "    total += i * {c}", "return total"),
    ("return [i for i in range(x) if i != {c}]",),
)


@dataclass(frozen=True)
class Fn:
    """One unit of a module: a function written as ``kind``."""

    name: str
    body: int
    const: int
    kind: str = "plain"  #: plain, method, nested, twin, decorated

    def quals(self) -> tuple[str, ...]:
        """The blocks it makes, outer first."""
        if self.kind == "method":
            return (f"C{self.name}.{self.name}",)
        if self.kind == "nested":
            return (self.name, f"{self.name}.inner")
        if self.kind == "twin":
            return (self.name, f"{self.name}#2")
        return (self.name,)


KINDS = ("plain", "method", "nested", "twin", "decorated")


@dataclass(frozen=True)
class Project:
    modules: tuple[tuple[Fn, ...], ...]  #: module i is ``m{i}.py``
    limits: tuple[int, ...]  #: each module's ``LIMIT``
    data: tuple[str, ...]  #: ``d{i}.txt``'s content
    #: each module: a one-line ``def first`` on its first line (its constant), or none
    first: tuple[int | None, ...] = ()
    #: each module: whether its last line ends with a line break
    trailing: tuple[bool, ...] = ()

    def module_first(self, i: int) -> int | None:
        return self.first[i] if i < len(self.first) else None

    def module_trailing(self, i: int) -> bool:
        return self.trailing[i] if i < len(self.trailing) else True


@dataclass(frozen=True)
class Fmt:
    """A formatting edit of one block's body: a comment, parentheses or a blank line."""

    kind: str = ""
    module: int = -1
    qual: str = ""


class _Writer:
    def __init__(self, fmt: Fmt) -> None:
        self.out: list[str] = []
        self.spans: dict[str, list[int]] = {}
        self.fmt = fmt

    def body(self, qual: str, indent: str, body: int, const: int, extra: int = 0) -> None:
        """The lines of ``qual``'s body (its constant ``const + extra``)."""
        start = len(self.out) + 1
        if self.fmt.kind == "comment" and self.fmt.qual == qual:
            self.out.append(f"{indent}# a comment an edit added")
        for i, line in enumerate(BODIES[body]):
            text = line.format(c=const + extra)
            if self.fmt.kind == "parens" and self.fmt.qual == qual and text.startswith("return "):
                text = f"return ({text[len('return ') :]})"
            self.out.append(indent + text)
            if self.fmt.kind == "blank" and self.fmt.qual == qual and i == 0:
                self.out.append("")
        self.spans.setdefault(qual, []).extend(range(start, len(self.out) + 1))

    def unit(self, fn: Fn) -> None:
        o = self.out
        o += ["", ""]
        if fn.kind == "plain":
            o.append(f"def {fn.name}(x):")
            self.body(fn.name, "    ", fn.body, fn.const)
        elif fn.kind == "method":
            o += [f"class C{fn.name}:", f"    def {fn.name}(self, x):"]
            self.body(f"C{fn.name}.{fn.name}", "        ", fn.body, fn.const)
        elif fn.kind == "nested":
            o += [f"def {fn.name}(x):", "    def inner(x):"]
            self.body(f"{fn.name}.inner", "        ", fn.body, fn.const)
            o.append("    return inner(x + 0)")
            self.spans.setdefault(fn.name, []).append(len(o))
        elif fn.kind == "twin":  # one name defined twice, on the two branches of an if
            o += ["if LIMIT >= 0:", f"    def {fn.name}(x):"]
            self.body(fn.name, "        ", fn.body, fn.const)
            o += ["else:", f"    def {fn.name}(x):"]
            self.body(f"{fn.name}#2", "        ", fn.body, fn.const, extra=50)
        else:
            o += ["@deco", f"def {fn.name}(x):"]
            self.body(fn.name, "    ", fn.body, fn.const)


def render(
    fns: tuple[Fn, ...],
    limit: int,
    fmt: Fmt = Fmt(),
    first: int | None = None,
    trailing: bool = True,
) -> tuple[str, dict[str, list[int]]]:
    """A module's text and the body lines of each block (1-based)."""
    w = _Writer(fmt)
    if first is not None:
        w.out.append(f"def first(x): return x + {first}")
        w.spans["first"] = [1]
    w.out += ['"""A generated module."""', "", f"LIMIT = {limit}", "", "", "def deco(f):"]
    w.out += ["    f.mark = 0", "    return f"]
    w.spans["deco"] = [len(w.out) - 1, len(w.out)]
    for fn in fns:
        w.unit(fn)
    return "\n".join(w.out) + ("\n" if trailing else ""), w.spans


names = st.sampled_from(["f", "g", "h", "k"])


@st.composite
def projects(draw: st.DrawFn) -> Project:
    n = draw(st.integers(1, 2))
    modules = []
    for _ in range(n):
        fnames = draw(st.lists(names, min_size=1, max_size=3, unique=True))
        modules.append(
            tuple(
                Fn(
                    f,
                    draw(st.integers(0, len(BODIES) - 1)),
                    draw(st.integers(0, 9)),
                    draw(st.sampled_from(KINDS)),
                )
                for f in fnames
            )
        )
    limits = tuple(draw(st.integers(0, 9)) for _ in range(n))
    data = tuple(draw(st.text("abc\n", max_size=5)) for _ in range(2))
    first = tuple(draw(st.none() | st.integers(0, 9)) for _ in range(n))
    trailing = tuple(draw(st.booleans()) for _ in range(n))
    return Project(tuple(modules), limits, data, first, trailing)


@dataclass(frozen=True)
class Run:
    executed: frozenset[tuple[int, str]]  #: (module, block) whose body lines it ran
    read: frozenset[int]  #: data files opened
    fixtures: frozenset[tuple[int, str]] = frozenset()  #: its fixtures' functions


def all_quals(p: Project) -> list[tuple[int, str]]:
    return (
        [(i, "deco") for i in range(len(p.modules))]
        + [(i, "first") for i in range(len(p.modules)) if p.module_first(i) is not None]
        + [(i, q) for i, m in enumerate(p.modules) for fn in m for q in fn.quals()]
    )


@st.composite
def runs(draw: st.DrawFn, p: Project) -> Run:
    executed = draw(st.sets(st.sampled_from(all_quals(p))))
    read = draw(st.sets(st.sampled_from(range(len(p.data)))))
    fixtures = draw(st.sets(st.sampled_from(all_quals(p)), max_size=2))
    return Run(frozenset(executed), frozenset(read), frozenset(fixtures))


def write(root: Path, p: Project, fmt: Fmt = Fmt()) -> dict[int, dict[str, list[int]]]:
    """Write ``p`` under ``root`` (with the formatting edit ``fmt``); the body lines of
    every block, by module."""
    spans = {}
    for i, fns in enumerate(p.modules):
        text, spans[i] = render(
            fns,
            p.limits[i],
            fmt if fmt.module == i else Fmt(),
            p.module_first(i),
            p.module_trailing(i),
        )
        (root / f"m{i}.py").write_text(text, encoding="utf-8")
    for i, content in enumerate(p.data):
        (root / f"d{i}.txt").write_text(content, encoding="utf-8")
    return spans


def record(root: Path, run: Run, spans: dict[int, dict[str, list[int]]]) -> dict[str, str]:
    """The dependencies of ``run`` on the project as written: its lines, its fixtures'
    functions, and the files it really opened while a :class:`ReadLog` recorded. Beside
    them, what is no dependency: line numbers outside each file, code and data outside the
    root, a fixture's name its file does not define, and Python source opened as a file."""
    outside = root.parent / "outside"
    outside.mkdir(exist_ok=True)
    (outside / "lib.py").write_text("def helper(x):\n    return x\n", encoding="utf-8")
    (outside / "data.txt").write_text("outside", encoding="utf-8")
    lines: dict[str, set[int]] = {str(outside / "lib.py"): {1, 2}}
    for i, qual in run.executed:
        path = root / f"m{i}.py"
        n = path.read_text(encoding="utf-8").count("\n")
        lines.setdefault(str(path), {0, -1, n + 2, n + 3, n + 50}).update(spans[i][qual])
    defs = [(str(outside / "lib.py"), "helper"), (str(root / "m0.py"), "no_such_function")]
    defs += [(str(root / f"m{i}.py"), qual) for i, qual in sorted(run.fixtures)]
    with ReadLog() as log:
        for path in [outside / "data.txt", root / "m0.py"]:
            with open(path, encoding="utf-8") as fh:
                fh.read()
        for i in sorted(run.read):
            with open(root / f"d{i}.txt", encoding="utf-8") as fh:
                fh.read()
    return Blocks(root).deps(lines, log.paths, defs)


FORMATTING = ("comment", "parens", "blank")


@dataclass(frozen=True)
class Edit:
    kind: str
    module: int = 0
    qual: str = ""
    data: int = 0


def edits(p: Project) -> list[Edit]:
    out = []
    for i, q in all_quals(p):
        out += [Edit(k, i, q) for k in (*FORMATTING, "body")]
    for i in range(len(p.modules)):
        out += [Edit("limit", i), Edit("new-def", i), Edit("broken", i)]
    out += [Edit("data", data=j) for j in range(len(p.data))]
    return out


def apply(root: Path, p: Project, e: Edit) -> dict[int, dict[str, list[int]]]:
    """Write ``p`` with edit ``e`` under ``root``; the body lines after it."""
    if e.kind in FORMATTING:
        return write(root, p, Fmt(e.kind, e.module, e.qual))
    if e.kind == "body":  # the first number of the block's first body line, plus one
        spans = write(root, p)
        path = root / f"m{e.module}.py"
        lines = path.read_text(encoding="utf-8").split("\n")
        first = spans[e.module][e.qual][0] - 1
        lines[first] = re.sub(r"\d+", lambda m: str(int(m.group()) + 1), lines[first], count=1)
        path.write_text("\n".join(lines), encoding="utf-8")
        return spans
    if e.kind == "broken":  # the module no longer parses
        spans = write(root, p)
        with open(root / f"m{e.module}.py", "a", encoding="utf-8") as fh:
            fh.write("\ndef broken(:\n")
        return spans
    modules = list(p.modules)
    limits = list(p.limits)
    data = list(p.data)
    if e.kind == "limit":
        limits[e.module] += 1
    elif e.kind == "new-def":
        modules[e.module] = (*p.modules[e.module], Fn("added", 0, 0))
    else:
        data[e.data] += "x"
    return write(root, Project(tuple(modules), tuple(limits), tuple(data), p.first, p.trailing))


def changed_keys(e: Edit, deps: dict[str, str]) -> set[str]:
    """From the edit alone: the keys of ``deps`` whose hash it changes."""
    if e.kind == "broken":  # every block of the module is gone
        return {k for k in deps if k.startswith(f"m{e.module}.py::")}
    if e.kind in FORMATTING:
        return set()
    if e.kind == "body":  # the block, and a def around it (its code holds the inner def)
        keys = {f"m{e.module}.py::{e.qual}"}
        if e.qual.endswith(".inner"):
            keys.add(f"m{e.module}.py::{e.qual.removesuffix('.inner')}")
        return keys
    if e.kind in ("limit", "new-def"):
        return {f"m{e.module}.py::{MODULE}"}
    return {f"d{e.data}.txt"}


def cache_at(
    root: Path, deps: dict[str, str], outcome: str = "killed", other: dict[str, str] | None = None
) -> Path:
    """A cache directory holding one row: ``NODE`` decided ``KEY`` under ``deps``; and,
    with ``other``, another witness's run recorded with those dependencies."""
    fp = digest(deps)
    f = CacheFile(BUILD, {fp: deps}, {NODE: fp}, {KEY: {NODE: (outcome, fp)}})
    if other is not None:
        f.deps[digest(other)] = other
        f.witnesses[OTHER] = digest(other)
    d = root / ".fak-cache"
    f.write(d / "mutants.json")
    return d


@pytest.mark.fak_theorem("H1.1")
@settings(suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(data=st.data())
@example(data=None)
def test_a_cached_kill_is_reused_exactly_while_what_its_run_depended_on_is_unchanged(
    data: st.DataObject | None,
) -> None:
    if data is None:  # a helper and a data file: the downstream case of the issue
        p = Project(
            ((Fn("f", 1, 3, "nested"), Fn("g", 0, 1, "twin")),),
            (5,),
            ("100\n", "x"),
            (4,),
            (False,),
        )
        run = Run(
            frozenset({(0, "f.inner"), (0, "g#2"), (0, "first")}),
            frozenset({0}),
            frozenset({(0, "f")}),
        )
    else:
        p = data.draw(projects())
        run = data.draw(runs(p))
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp) / "base"
        base.mkdir()
        deps = record(base, run, write(base, p))
        # what the run recorded: its blocks and its fixtures', their modules' module
        # blocks, the data files it read; nothing else
        want = {f"m{i}.py::{q}" for i, q in run.executed | run.fixtures}
        want |= {f"m{i}.py::{MODULE}" for i, _ in run.executed | run.fixtures}
        want |= {f"d{j}.txt" for j in run.read}
        assert set(deps) == want
        tampered_is_never_reused(base, deps)
        for e in edits(p):
            root = Path(tmp) / "edited"
            shutil.copytree(base, root)
            after = apply(root, p, e)
            expect = sorted(changed_keys(e, deps) & set(deps))
            blocks = Blocks(root)
            assert stale_keys(deps, blocks) == expect, e
            # the cache: with this run's own fingerprint on the edited code (which another
            # witness's recorded run also has), and without one
            now = record(root, run, after)
            cache = MutantCache(cache_at(root, deps, other=now), BUILD, blocks)
            assert cache.not_read is None
            reused = None if expect else "killed"
            assert cache.get(KEY, NODE, digest(now)) == reused, e
            assert cache.get(KEY, NODE, None) == reused, e
            assert cache.killed_by(KEY, ["other", NODE]) == (None if expect else NODE), e
            # fak proofs check: the same fingerprints, what changed named
            recorded = CacheFile.read(root / ".fak-cache" / "mutants.json")
            assert recorded is not None
            fps = Fingerprints(recorded, blocks)
            why = fps.changed(["never-recorded", NODE])
            if expect:
                what = ", ".join(expect[:3]) + (f" and {len(expect) - 3} more" * (len(expect) > 3))
                assert why == f"witness {NODE} depends on {what}, which changed since its run"
            else:
                assert why is None, (e, why)
            assert fps.checked == {NODE} and fps.unknown == {"never-recorded"}
            # a cache written by another build is not read at all
            other = MutantCache(root / ".fak-cache", "another build", blocks)
            assert other.get(KEY, NODE, None) is None
            assert other.not_read is not None and f"{BUILD!r} → 'another build'" in other.not_read
            shutil.rmtree(root)


def tampered_is_never_reused(root: Path, deps: dict[str, str]) -> None:
    """A recorded run whose stored dependencies do not add up to its fingerprint (a hash
    edited by hand, a bad merge) is dropped: its rows are never reused, not even for a run
    with that very fingerprint."""
    if not deps:
        return
    d = cache_at(root, deps)
    path = d / "mutants.json"
    text = path.read_text(encoding="utf-8")
    key = sorted(deps)[0]
    h = deps[key]
    forged = text.replace(f'[{json.dumps(key)}, "{h}"]', f'[{json.dumps(key)}, "{h[::-1]}"]', 1)
    assert forged != text
    path.write_text(forged, encoding="utf-8")
    cache = MutantCache(d, BUILD, Blocks(root))
    assert cache.get(KEY, NODE, digest(deps)) is None
    assert cache.get(KEY, NODE, None) is None
    shutil.rmtree(d)


@pytest.mark.fak_theorem("H1.1")
def test_a_survival_is_reused_like_a_kill_but_never_stands_for_a_kill() -> None:
    """A cached survival holds on the same terms; ``killed_by`` reuses kills only."""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        p = Project(((Fn("f", 0, 1),),), (0,), ("a",))
        run = Run(frozenset({(0, "f")}), frozenset({0}))
        deps = record(root, run, write(root, p))
        cache = MutantCache(cache_at(root, deps, "survived"), BUILD, Blocks(root))
        assert cache.get(KEY, NODE, None) == "survived"
        assert cache.killed_by(KEY, [NODE]) is None
        apply(root, p, Edit("data", data=0))
        cache = MutantCache(root / ".fak-cache", BUILD, Blocks(root))
        assert cache.get(KEY, NODE, None) is None
