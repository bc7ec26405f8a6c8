"""What a proof run ran on: the git commit and whether the work tree differs from it, and
the versions of the tools that made the verdicts.

The report never claims a state it did not check: the dirty flag is ``True`` or ``False``
only when ``git status`` answered; a failed git call is recorded as unknown (``None``)
with the error, never as clean. The status covers the whole work tree (from its top, so
a project in a subfolder of a larger repository sees changes anywhere in it), less the
report's own files and the mutant cache when they lie inside it, wherever the report
directory is.
"""

from __future__ import annotations

import platform
import subprocess
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

__all__ = ["PACKAGES", "git_info", "versions"]

PACKAGES = ("pytest-fak", "pytest", "hypothesis", "coverage", "pytest-xdist", "pytest-cov")
_NOT_A_REPO = "not a git repository"


def _git(root: Path, *args: str) -> tuple[str | None, str]:
    """``(stdout, "")`` when ``git args`` succeeded in ``root``, else ``(None, why)``."""
    try:
        out = subprocess.run(
            ["git", *args], cwd=root, capture_output=True, text=True, timeout=30, check=False
        )
    except (OSError, subprocess.SubprocessError) as exc:
        return None, f"git {args[0]}: {exc}"
    if out.returncode != 0:
        err = " ".join(out.stderr.split()) or f"exit status {out.returncode}"
        return None, f"git {' '.join(args[:2])}: {err}"
    return out.stdout, ""


def _excludes(top: Path, paths: tuple[Path | None, ...]) -> list[str]:
    """Pathspecs leaving out each of ``paths`` that lies strictly inside ``top``."""
    specs: list[str] = []
    for p in paths:
        if p is None:
            continue
        try:
            rel = p.resolve().relative_to(top)
        except ValueError:
            continue  # outside the work tree: git cannot see it anyway
        if rel.parts:
            specs.append(f":(top,exclude){rel.as_posix()}")
    return specs


def git_info(root: Path, *exclude: Path | None) -> dict[str, Any]:
    """``{"commit", "dirty", "error"}`` of the work tree holding ``root``.

    ``exclude``: files or folders the run itself writes (the report's files, the mutant
    cache); left out of the status only where they are inside the work tree.
    ``commit`` is ``None`` outside a git checkout; ``dirty`` is ``None`` whenever it was
    not measured, and ``error`` then says why (``None`` for "not a git checkout").
    """
    head, why = _git(root, "rev-parse", "HEAD")
    if head is None:
        if _NOT_A_REPO in why:
            return {"commit": None, "dirty": None, "error": None}
        return {"commit": None, "dirty": None, "error": why}
    top_out, why = _git(root, "rev-parse", "--show-toplevel")
    if top_out is None:
        return {"commit": head.strip(), "dirty": None, "error": why}
    top = Path(top_out.strip()).resolve()
    status, why = _git(root, "status", "--porcelain", "--", ":(top)", *_excludes(top, exclude))
    if status is None:
        return {"commit": head.strip(), "dirty": None, "error": why}
    return {"commit": head.strip(), "dirty": bool(status.strip()), "error": None}


def versions() -> dict[str, str | None]:
    """The installed version of each of :data:`PACKAGES` (``None``: not installed)."""
    out: dict[str, str | None] = {}
    for name in PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


def python() -> dict[str, str]:
    return {
        "python": platform.python_version(),
        "implementation": sys.implementation.name,
        "platform": platform.platform(terse=True),
    }
