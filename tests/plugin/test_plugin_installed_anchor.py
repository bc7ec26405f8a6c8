"""An anchor in installed code is measured though installed code is left out of the rest.

With generated mutants on, the proof run measures the project's code (its fingerprint)
and omits installed code; an anchor there (``fak_core.fold:fold`` of a downstream
project, the pack's anchors) used to be omitted too, and its theorem was VACUOUS ("not
executed by any passing witness") from a wheel install only. End to end:
``tests/packaging/test_downstream_journey.py``.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

from pytest_fak.anchors import AnchorProbe


def _load(path: Path, name: str, text: str) -> ModuleType:
    path.write_text(text)
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def test_an_omitted_anchor_file_is_measured_and_other_omitted_files_are_not(
    tmp_path: Path,
) -> None:
    site = tmp_path / "venv" / "site-packages"
    site.mkdir(parents=True)
    anchored = _load(site / "anchored_lib.py", "anchored_lib", "def f(x):\n    return x + 1\n")
    other = _load(site / "other_lib.py", "other_lib", "def g(x):\n    return x - 1\n")
    try:
        probe = AnchorProbe([str(site / "anchored_lib.py")], [f"{tmp_path}/*"], [f"{site}/*"])
        probe.begin("w")
        try:
            assert anchored.f(1) == 2 and other.g(1) == 0
        finally:
            probe.end("w")
            probe.finish()
        real = str((site / "anchored_lib.py").resolve())
        assert probe.lines("w") == {real: {2}}
        assert str((site / "other_lib.py").resolve()) not in probe.all_lines("w")
    finally:
        del sys.modules["anchored_lib"], sys.modules["other_lib"]
