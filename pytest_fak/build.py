"""The plugin build: which of the plugin's own files a mutant's outcome depends on.

A witness's result under a mutant depends on how the plugin applies the mutant, runs the
witness and reads its outcome: the files named in :data:`BUILD_FILES`. Their digest (with
the version) is the *build*; every cached result is keyed by it, so a change to one of them
re-runs every mutant. The plugin's other modules (the cache, the fingerprints, the report,
the strategies a witness draws from...) are project code like any other when the plugin is
developed inside the project: a witness that runs them has them in its fingerprint
(:mod:`pytest_fak.fingerprint`), and a change to them re-runs exactly its dependents.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

__all__ = ["BUILD_FILES", "build_id", "build_paths"]

#: the plugin's files (in this package) that make a build
BUILD_FILES = (
    "build.py",
    "operators.py",
    "generated.py",
    "mutation.py",
    "proof.py",
    "hyp.py",
    "rebuild.py",
    "crash.py",
)

_HERE = Path(__file__).resolve().parent


def build_paths() -> list[Path]:
    """The real paths of :data:`BUILD_FILES`."""
    return [_HERE / name for name in BUILD_FILES]


def build_id() -> str:
    """This build: the version and a digest of :data:`BUILD_FILES` (a development build
    keeps its version number, so the digest tells two of them apart)."""
    from pytest_fak import __version__

    code = hashlib.sha256()
    for path in build_paths():
        code.update(path.name.encode() + b"\0" + path.read_bytes())
    return f"{__version__} ({code.hexdigest()[:16]})"
