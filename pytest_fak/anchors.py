"""Anchor evidence: which cited functions each witness executed, via the coverage API.

If a coverage measurement is already running (pytest-cov, ``coverage run``), it is
reused: each witness runs under its own dynamic context (or pytest-cov's
``<nodeid>|run`` context when ``--cov-context=test`` is on), so no second tracer ever
pauses the user's, and their totals cannot drop. Otherwise a private, in-memory
``Coverage`` limited to the anchor files is started around each witness only. The lines
are read once, at the end of the session (or of each xdist worker).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from typing import Any

from pytest_fak.theorems import Anchor

__all__ = ["AnchorProbe"]

_QUIET = [
    "no-data-collected",
    "module-not-imported",
    "module-not-measured",
    "no-ctracer",
    "couldnt-parse",
]


class AnchorProbe:
    """Measures anchors per witness; ``mode`` is ``shared``, ``private`` or ``None`` (unused)."""

    def __init__(self, files: Iterable[str], pytest_cov_contexts: bool = False) -> None:
        self.files = sorted({os.path.realpath(f) for f in files})
        self.pytest_cov_contexts = pytest_cov_contexts
        self.mode: str | None = None
        self._cov: Any = None
        self._previous: str = ""
        self._labels: dict[str, str] = {}

    def _ensure(self) -> None:
        if self.mode is not None:
            return
        import coverage

        current = coverage.Coverage.current()
        if current is not None:
            self.mode, self._cov = "shared", current
            return
        cov = coverage.Coverage(data_file=None, include=self.files, config_file=False)
        cov.set_option("run:disable_warnings", _QUIET)
        self.mode, self._cov = "private", cov

    @property
    def measured_nodeids(self) -> set[str]:
        return set(self._labels)

    def begin(self, nodeid: str) -> None:
        """Start attributing executed lines to ``nodeid`` (call right before the test)."""
        self._ensure()
        if self.mode == "shared":
            if self.pytest_cov_contexts:
                self._labels[nodeid] = f"{nodeid}|run"
                return
            label = f"fak:{nodeid}"
            self._previous = self._cov.switch_context(label) or ""
        else:
            label = f"fak:{nodeid}"
            self._cov.start()
            self._cov.switch_context(label)
        self._labels[nodeid] = label

    def end(self, nodeid: str) -> None:
        """Stop attributing to ``nodeid`` (mutant re-runs that follow are not evidence)."""
        if self.mode == "shared":
            if self.pytest_cov_contexts:
                self._cov.switch_context(f"fak-mutants:{nodeid}")
            else:
                self._cov.switch_context(self._previous)
        elif self.mode == "private":
            self._cov.stop()

    def lines(self, nodeid: str) -> dict[str, set[int]] | None:
        """The anchor-file lines ``nodeid`` executed, by real path (None: not measured here).

        Only the private measurement can be read mid-run; a shared one says None."""
        label = self._labels.get(nodeid)
        if self.mode != "private" or label is None:
            return None
        data = self._cov.get_data()
        data.set_query_contexts([r"(^|\|)" + re.escape(label) + "$"])
        try:
            return {os.path.realpath(f): set(data.lines(f) or ()) for f in data.measured_files()}
        finally:
            data.set_query_contexts(None)

    def results(self, wanted: Mapping[str, Iterable[Anchor]]) -> dict[str, dict[str, bool | None]]:
        """For each witness, each anchor: executed (True), not (False), unmeasured (None)."""
        out: dict[str, dict[str, bool | None]] = {}
        if self._cov is None:
            return {n: {a.symbol: None for a in anchors} for n, anchors in wanted.items()}
        data = self._cov.get_data()
        measured = {os.path.realpath(f): f for f in data.measured_files()}
        try:
            for nodeid, anchors in wanted.items():
                label = self._labels.get(nodeid)
                row: dict[str, bool | None] = {}
                if label is not None:
                    data.set_query_contexts([r"(^|\|)" + re.escape(label) + "$"])
                for a in anchors:
                    name = measured.get(os.path.realpath(a.filename))
                    if label is None:
                        row[a.symbol] = None
                    elif name is None:
                        row[a.symbol] = False if self.mode == "private" else None
                    else:
                        lines = set(data.lines(name) or ())
                        row[a.symbol] = bool(lines & a.lines)
                out[nodeid] = row
        finally:
            data.set_query_contexts(None)
        return out
