"""Fingerprints: what a witness's run depended on, and whether that still holds.

A witness's run on the real code depends on the code it executed and the files it read.
Both are recorded at function granularity, as pytest-testmon does: each project file is
cut into *blocks*, one per ``def`` (its decorators, signature and body, nested functions
included) and one ``<module>`` block (everything else: imports, constants, class bodies,
the signatures and decorators of its functions, each function's body left out). A line
the witness executed selects the innermost ``def`` holding it, and always the file's
``<module>`` block. A project file the witness opened that is not Python source is a
*data* dependency, recorded as the file itself.

Each dependency is a key, ``path::qualname`` for a block and ``path`` for a data file
(``path`` relative to the project root, POSIX style), with the hash of what it is now: a
block's hash is SHA-256 over its ``ast.dump`` (so comments, blank lines and formatting
do not count; any change to the code does), a data file's over its bytes. The
*fingerprint* of a run is the digest of its sorted ``key=hash`` lines. A recorded
fingerprint holds while every one of its keys still hashes the same: that is the test
both the proof run's cache (:mod:`pytest_fak.mutcache`) and ``fak proofs check`` apply.

What it cannot see: code only a mutant makes the witness reach (the fingerprint is taken
on the real code); code or data reached outside the project root (installed packages,
keyed with the environment separately) and the plugin build's own files
(:mod:`pytest_fak.build`, keyed by the build); state that is neither code
nor a file (environment variables, the clock, the network).
"""

from __future__ import annotations

import ast
import contextlib
import hashlib
import os
import site
import sys
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from pytest_fak.build import build_paths

__all__ = [
    "MODULE",
    "Blocks",
    "ReadLog",
    "digest",
    "file_blocks",
    "installed_dirs",
    "project_blocks",
    "stale_keys",
]

#: the block of a file's code outside every ``def``
MODULE = "<module>"
_HASH = 16  # hex digits kept of a block's or file's SHA-256 (64 bits)


@dataclass(frozen=True, slots=True)
class FileBlocks:
    """The blocks of one Python file: each line's innermost ``def``, each block's hash."""

    owner: tuple[str, ...]  #: line number (1-based; index 0 unused) → qualname or MODULE
    hashes: Mapping[str, str]  #: qualname → hash, MODULE included


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:_HASH]


_Def = (ast.FunctionDef, ast.AsyncFunctionDef)


def _walk_defs(
    body: Iterable[ast.AST], prefix: str
) -> Iterator[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
    """Every ``def`` under ``body`` with its qualified name, outer ones first."""
    for node in body:
        if isinstance(node, _Def):
            name = f"{prefix}{node.name}"
            yield name, node
            yield from _walk_defs(node.body, f"{name}.")
        elif isinstance(node, ast.ClassDef):
            yield from _walk_defs(node.body, f"{prefix}{node.name}.")
        else:
            # a def inside an if/try/with/for at any level keeps its enclosing prefix
            for field in ("body", "orelse", "finalbody", "handlers", "cases"):
                inner = getattr(node, field, None)
                if isinstance(inner, list):
                    yield from _walk_defs(inner, prefix)


def file_blocks(text: str) -> FileBlocks | None:
    """The blocks of the Python source ``text`` (``None``: it does not parse)."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return None
    n = text.count("\n") + 2
    owner = [MODULE] * n
    hashes: dict[str, str] = {}
    defs = list(_walk_defs(tree.body, ""))
    seen: dict[str, int] = {}
    for name, node in defs:  # outer before inner: an inner def overwrites its lines
        k = seen[name] = seen.get(name, 0) + 1
        qual = name if k == 1 else f"{name}#{k}"  # a name defined twice (a setter, a branch)
        hashes[qual] = _sha(ast.dump(node, include_attributes=False).encode())
        start = min([node.lineno, *(d.lineno for d in node.decorator_list)])
        end = node.end_lineno or node.lineno
        for line in range(start, end + 1):  # ast's lines are the text's
            owner[line] = qual
    for _, node in defs:  # the module block: every body left out, signatures kept
        node.body = [ast.Pass()]
    hashes[MODULE] = _sha(ast.dump(tree, include_attributes=False).encode())
    return FileBlocks(tuple(owner), hashes)


def digest(deps: Mapping[str, str]) -> str:
    """The fingerprint of ``deps`` (key → hash)."""
    h = hashlib.sha256()
    for k in sorted(deps):
        h.update(f"{k}={deps[k]}\n".encode())
    return h.hexdigest()[:32]


class Blocks:
    """The blocks and data files of one project root, read once per process."""

    def __init__(
        self, root: Path, exclude: Iterable[Path] = (), files: Iterable[Path] = ()
    ) -> None:
        """``exclude``: folders nothing of which is a dependency; ``files``: single files
        that are not (the plugin build's, keyed by the build itself)."""
        self.root = Path(os.path.realpath(root))
        self._root_prefix = str(self.root) + os.sep
        self.exclude = tuple(str(Path(os.path.realpath(p))) + os.sep for p in exclude)
        self.files = {os.path.realpath(p) for p in files}
        self._files: dict[str, FileBlocks | None] = {}
        self._data: dict[str, str | None] = {}

    # ------------------------------------------------------------------ paths
    def rel(self, path: str) -> str | None:
        """``path`` relative to the root when it is a project file, else ``None``."""
        real = os.path.realpath(path)
        if not real.startswith(self._root_prefix) or real.startswith(self.exclude):
            return None
        if real in self.files:
            return None
        rel = real[len(self._root_prefix) :].replace(os.sep, "/")
        if "/__pycache__/" in f"/{rel}" or rel.startswith((".git/", ".hypothesis/")):
            return None
        if ".egg-info/" in rel or ".dist-info/" in rel:
            return None  # an installation's metadata (an editable install's entry points)
        return rel

    def blocks(self, rel: str) -> FileBlocks | None:
        if rel not in self._files:
            try:
                text = (self.root / rel).read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError):
                self._files[rel] = None
            else:
                self._files[rel] = file_blocks(text)
        return self._files[rel]

    def data_hash(self, rel: str) -> str | None:
        if rel not in self._data:
            try:
                self._data[rel] = _sha((self.root / rel).read_bytes())
            except OSError:
                self._data[rel] = None
        return self._data[rel]

    # ------------------------------------------------------------------ recording
    def deps(
        self,
        lines: Mapping[str, Iterable[int]],
        read: Iterable[str] = (),
        defs: Iterable[tuple[str, str]] = (),
    ) -> dict[str, str]:
        """key → hash for a run that executed ``lines`` (file → line numbers), opened the
        files ``read`` and relied on the functions ``defs`` (file, qualname)."""
        out: dict[str, str] = {}
        for path, nums in lines.items():
            rel = self.rel(path)
            fb = None if rel is None else self.blocks(rel)
            if rel is None or fb is None:
                continue
            out[f"{rel}::{MODULE}"] = fb.hashes[MODULE]
            last = len(fb.owner) - 1
            for line in nums:
                if 0 < line <= last:
                    q = fb.owner[line]
                    out[f"{rel}::{q}"] = fb.hashes[q]
        for path, qual in defs:
            rel = self.rel(path)
            fb = None if rel is None else self.blocks(rel)
            if rel is not None and fb is not None and qual in fb.hashes:
                out[f"{rel}::{MODULE}"] = fb.hashes[MODULE]
                out[f"{rel}::{qual}"] = fb.hashes[qual]
        for path in read:
            rel = self.rel(path)
            if rel is None or rel.endswith((".py", ".pyc")):
                continue  # Python source is followed by its blocks
            h = self.data_hash(rel)
            if h is not None:
                out[rel] = h
        return out

    def tracked(self, key: str) -> bool:
        """Whether ``key`` is a dependency by this version's rules (a recorded key these
        rules now leave out, such as an installation's metadata, is not checked)."""
        path = key.split("::", 1)[0]
        return self.rel(str(self.root / path)) is not None

    def current(self, key: str) -> str | None:
        """What ``key`` hashes to now (``None``: the block or file is gone)."""
        if "::" in key:
            rel, qual = key.split("::", 1)
            fb = self.blocks(rel)
            return None if fb is None else fb.hashes.get(qual)
        return self.data_hash(key)


def installed_dirs() -> list[str]:
    """The interpreter's and the installed packages' folders, real paths (a virtual
    environment inside the project root is not the project's code)."""
    dirs = {sys.prefix, sys.exec_prefix, sys.base_prefix, sys.base_exec_prefix}
    with contextlib.suppress(AttributeError):
        dirs.update(site.getsitepackages())
    with contextlib.suppress(AttributeError):
        dirs.add(site.getusersitepackages())
    return sorted({os.path.realpath(d) for d in dirs if d})


def installed_file(filename: str, root: Path) -> bool:
    """Whether ``filename`` is installed code, not the project's: in a ``site-packages``
    or ``dist-packages`` folder (a virtual environment inside the project too), or in the
    interpreter's own folders outside the project root."""
    real = Path(os.path.realpath(filename))
    if {"site-packages", "dist-packages"} & set(real.parts):
        return True
    root_real = Path(os.path.realpath(root))
    if real == root_real or root_real in real.parents:
        return False
    return any(Path(d) in real.parents for d in installed_dirs())


#: the anchor probe: its ``begin`` and ``end`` run inside the measurement they start and
#: stop, around every witness, and decide no outcome
_PROBE = Path(__file__).resolve().parent / "anchors.py"


def project_blocks(root: Path, *written: Path) -> Blocks:
    """The blocks of the project at ``root`` as a proof run sees them: less the folders
    the run itself ``written`` (cache, report), the installed code, the plugin build's
    files (:mod:`pytest_fak.build`: keyed by the build) and the anchor probe (it runs
    around every witness, inside its measurement); the plugin's other modules are project
    code when the plugin lives in the project."""
    return Blocks(
        root,
        exclude=[*written, *map(Path, installed_dirs())],
        files=[*build_paths(), _PROBE],
    )


def stale_keys(deps: Mapping[str, str], blocks: Blocks) -> list[str]:
    """The keys of ``deps`` whose hash changed (or whose block or file is gone), sorted."""
    return sorted(k for k, h in deps.items() if blocks.tracked(k) and blocks.current(k) != h)


_WRITES = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC


class ReadLog:
    """The files opened for reading while :meth:`recording` (an ``open`` audit hook).

    Audit hooks cannot be removed, so one hook is installed for the process the first time
    and does nothing while no recording is active."""

    _installed = False
    _active: ClassVar[list[set[str]]] = []

    @classmethod
    def _hook(cls, event: str, args: tuple[object, ...]) -> None:
        if event != "open" or not cls._active:
            return
        path, mode = args[0], args[1] if len(args) > 1 else None
        if isinstance(mode, str) and any(c in mode for c in "wax+"):
            return
        flags = args[2] if len(args) > 2 else 0
        if mode is None and isinstance(flags, int) and flags & _WRITES:
            return  # os.open for writing
        if isinstance(path, bytes):
            path = os.fsdecode(path)
        if isinstance(path, str):
            cls._active[-1].add(os.path.abspath(path))

    def __init__(self) -> None:
        self.paths: set[str] = set()

    def __enter__(self) -> ReadLog:
        if not ReadLog._installed:
            sys.addaudithook(ReadLog._hook)
            ReadLog._installed = True
        ReadLog._active.append(self.paths)
        return self

    def __exit__(self, *exc: object) -> None:
        if ReadLog._active and ReadLog._active[-1] is self.paths:
            ReadLog._active.pop()
