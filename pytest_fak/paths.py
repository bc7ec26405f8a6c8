"""Where the plugin's bundled files live: the theorem pack and the report's JSON Schema.

A leaf module (it imports nothing of the package), so the pytest entry point, proof mode
and the report can all read it without importing each other.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["PACK_DIR", "VERDICTS_SCHEMA"]

PACK_DIR = Path(__file__).parent / "pack"
#: The JSON Schema every ``verdicts.json`` the plugin writes is validated against.
VERDICTS_SCHEMA = Path(__file__).parent / "verdicts.schema.json"
