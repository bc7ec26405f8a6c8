"""What a verdict depends on besides its theorem text and anchors, so ``fak proofs check``
can tell when it went STALE: the source of each bound witness, of each declared mutant's
factory, and each file the theorem declares under **DEPENDS-ON.**

Sources are found by reading the file (``ast``), never by importing it: a witness by its
node id (``tests/test_x.py::TestY::test_z[param]`` → ``TestY.test_z``), a mutant by the
file and qualified name of its factory. Each is hashed with its decorators, normalised
like an anchor (:func:`pytest_fak.symbols.source_hash`). A source that cannot be found
when the report is written (a lambda, a generated test) is recorded with a ``null`` hash
and not checked.
"""

from __future__ import annotations

import ast
import hashlib
import inspect
from pathlib import Path
from typing import Any

from pytest_fak.symbols import source_hash

__all__ = ["changed", "def_sha256", "file_sha256", "locate", "mutant_source", "record"]

_PKG_PARENT = Path(__file__).resolve().parent.parent  # the bundled pack's files


def locate(rel: str, root: Path) -> Path:
    """``rel`` under ``root``, else under the installed package's parent (the pack)."""
    p = Path(rel)
    if p.is_absolute():
        return p
    here = root / p
    return here if here.exists() else _PKG_PARENT / p


def _rel(path: Path, root: Path) -> str:
    p = path.resolve()
    for base in (root.resolve(), _PKG_PARENT):
        try:
            return p.relative_to(base).as_posix()
        except ValueError:
            continue
    return p.as_posix()


def def_sha256(path: Path, qualname: str) -> str | None:
    """The hash of the ``def`` (or ``class``) ``qualname`` in ``path`` with its decorators;
    ``None`` when the file or the definition is not there."""
    try:
        text = path.read_text(encoding="utf-8")
        tree = ast.parse(text)
    except (OSError, SyntaxError, ValueError):
        return None
    Def = ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef
    body: list[ast.stmt] = tree.body
    node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | None = None
    for part in qualname.split("."):
        node = next((n for n in body if isinstance(n, Def) and n.name == part), None)
        if node is None:
            return None
        body = node.body
    if node is None:
        return None
    start = min([d.lineno for d in node.decorator_list] + [node.lineno])
    lines = text.splitlines()[start - 1 : node.end_lineno]
    return source_hash("\n".join(lines))


def file_sha256(path: Path) -> str | None:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return None


def mutant_source(factory: Any) -> tuple[str, str] | None:
    """(absolute file, qualified name) of a mutant factory, if it has a findable def."""
    try:
        path = inspect.getsourcefile(factory)
    except TypeError:
        return None
    qual = getattr(factory, "__qualname__", "")
    if not path or not qual or "<" in qual:
        return None
    return path, qual


def _witness(nodeid: str, root: Path) -> tuple[str, str]:
    path, _, rest = nodeid.partition("::")
    qual = rest.split("[", 1)[0].replace("::", ".")  # a parameter id may hold "::"
    return _rel(root / path, root), qual


def record(
    nodeids: list[str],
    mutants: dict[str, tuple[str, str] | None],
    depends_on: tuple[str, ...],
    root: Path,
) -> dict[str, Any]:
    """The ``inputs`` of one theorem's record in ``verdicts.json``."""
    witnesses = []
    for n in sorted(nodeids):  # its file and qualified name are read off the node id
        rel, qual = _witness(n, root)
        witnesses.append({"nodeid": n, "sha256": def_sha256(locate(rel, root), qual)})
    muts = []
    for mid, where in sorted(mutants.items()):
        if where is None:
            muts.append({"id": mid, "file": None, "qualname": None, "sha256": None})
            continue
        rel = _rel(Path(where[0]), root)
        sha = def_sha256(locate(rel, root), where[1])
        muts.append({"id": mid, "file": rel, "qualname": where[1], "sha256": sha})
    files = [{"path": p, "sha256": file_sha256(root / p)} for p in depends_on]
    return {"witnesses": witnesses, "mutants": muts, "files": files}


def changed(inputs: dict[str, Any], root: Path) -> list[str]:
    """Why a verdict with these recorded ``inputs`` no longer matches the files."""
    out: list[str] = []
    for kind, key in (("witness", "nodeid"), ("mutant", "id")):
        for r in inputs.get(kind + "es" if kind == "witness" else "mutants", []):
            if not r.get("sha256"):
                continue
            if kind == "witness" and "file" not in r:
                rel, qual = _witness(r["nodeid"], root)
                r = {**r, "file": rel, "qualname": qual}
            now = def_sha256(locate(r["file"], root), r["qualname"])
            if now is None:
                out.append(f"{kind} {r[key]} is no longer in {r['file']}")
            elif now != r["sha256"]:
                out.append(f"the source of {kind} {r[key]} changed")
    for f in inputs.get("files", []):
        now = file_sha256(root / f["path"])
        if now != f.get("sha256"):
            what = "appeared" if f.get("sha256") is None else "changed"
            out.append(f"the file {f['path']} it depends on {what if now else 'is gone'}")
    return out
