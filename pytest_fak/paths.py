"""Where the plugin's bundled files live: the theorem pack and the report's JSON Schema.

A leaf module (it imports nothing of the package), so the pytest entry point, proof mode
and the report can all read it without importing each other.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

__all__ = ["PACK_DIR", "PACK_REF", "VERDICTS_SCHEMA", "dir_ref", "resolve_dir_ref"]

PACK_DIR = Path(__file__).parent / "pack"
#: How a report names the bundled pack's theorem directory: by module, not by path, so
#: ``fak proofs check`` finds it wherever the package is installed (wheel or editable).
PACK_REF = "module:pytest_fak.pack"
#: The JSON Schema every ``verdicts.json`` the plugin writes is validated against.
VERDICTS_SCHEMA = Path(__file__).parent / "verdicts.schema.json"


def dir_ref(path: Path, root: Path) -> str:
    """How the report records theorem directory ``path``: :data:`PACK_REF` for the pack,
    else its path relative to ``root`` (absolute when outside it)."""
    p = path.resolve()
    if p == (PACK_DIR / "theorems").resolve():
        return PACK_REF
    try:
        return p.relative_to(root.resolve()).as_posix()
    except ValueError:
        return p.as_posix()


def resolve_dir_ref(ref: str, root: Path) -> Path:
    """The directory a :func:`dir_ref` names: ``module:<package>`` is that package's
    ``theorems`` folder where it is installed now; a relative path is under ``root``."""
    if ref.startswith("module:"):
        name = ref.removeprefix("module:")
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            spec = None
        locations = list(spec.submodule_search_locations or []) if spec else []
        if not locations:
            raise ValueError(f"theorem directory {ref!r}: no package {name!r} is installed")
        return Path(locations[0]) / "theorems"
    p = Path(ref)
    return p if p.is_absolute() else root / p
