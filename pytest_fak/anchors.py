"""Anchor evidence: which cited functions each witness executed, via the coverage API.

The plugin always measures anchors itself, with a private in-memory ``Coverage`` started
around each witness, whatever the user's own coverage settings are (pytest-cov with any
``--cov`` source, ``coverage run``).

When the user's measurement is running, coverage nests collectors: starting the private
one pauses theirs, stopping it resumes theirs. So the user's totals stay what they would
be without proof mode, the private measurement also traces every file the user's
measurement would (it asks their ``Coverage`` which files it traces), and when the
witness's own run ends those lines (or arcs, under ``--cov-branch``) are added to the
user's data under their current context. The witness's re-runs under mutants stay inside
the private measurement and are never added: without the plugin they would not run.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from pytest_fak.theorems import Anchor

__all__ = ["AnchorProbe", "unmeasured"]

_QUIET = [
    "no-data-collected",
    "module-not-imported",
    "module-not-measured",
    "no-ctracer",
    "couldnt-parse",
]


def _probe_coverage(
    files: list[str], user: Any, include: list[str] | None = None, omit: list[str] | None = None
) -> Any:
    """A private ``Coverage`` of ``files`` (and of the ``include`` patterns less the
    ``omit`` ones) that also traces what ``user`` traces. ``omit`` never drops one of
    ``files``: an anchor in installed code (left out of the project's own code by
    ``omit``) is still measured."""
    import coverage

    anchors = {os.path.realpath(f) for f in files}

    class _Probe(coverage.Coverage):
        #: canonical file names the user's measurement traces (their lines are replayed)
        user_files: set[str]

        def _should_trace(self, filename: str, frame: Any) -> Any:
            ours = super()._should_trace(filename, frame)
            if (
                not ours.trace
                and ours.file_tracer is None
                and ours.source_filename
                and os.path.realpath(ours.source_filename) in anchors
            ):
                ours.trace, ours.reason = True, ""  # omitted, but an anchor's file
            if user is not None:
                theirs = user._should_trace(filename, frame)
                if theirs.trace and theirs.file_tracer is None:
                    self.user_files.add(theirs.canonical_filename)
                    if not ours.trace:
                        return theirs
            return ours

    branch = bool(user is not None and user.get_option("run:branch"))
    cov = _Probe(
        data_file=None,
        include=[*files, *(include or ())],
        omit=omit or None,
        config_file=False,
        branch=branch,
    )
    cov.user_files = set()
    cov.set_option("run:disable_warnings", _QUIET)
    return cov


@contextlib.contextmanager
def unmeasured(skip: Callable[[], Iterable[str]]) -> Iterator[None]:
    """Run what proof mode alone runs (importing the theorems' mutant modules) inside a
    nested measurement, then give the user's measurement back every line it would have
    recorded except in the files ``skip()`` names (their real paths) after the block."""
    import coverage

    user = coverage.Coverage.current()
    if user is None:
        yield
        return
    cov = _probe_coverage([], user)
    cov.start()
    cov.switch_context("fak-import")
    try:
        yield
    finally:
        cov.stop()
        skipped = {os.path.realpath(f) for f in skip()}
        _replay(cov, user, "fak-import", lambda f: os.path.realpath(f) not in skipped)


def _replay(cov: Any, user: Any, label: str, keep: Callable[[str], bool]) -> None:
    """Add what ``cov`` (a probe) recorded under ``label`` in the user's files to the
    user's data, as their own tracer would have recorded it."""
    files = {f for f in cov.user_files if keep(f)}
    if not files:
        return
    data = cov.get_data()
    data.set_query_contexts(_query(label))
    try:
        read = data.arcs if data.has_arcs() else data.lines
        found = {f: got for f in data.measured_files() if f in files and (got := read(f))}
    finally:
        data.set_query_contexts(None)
    if not found:
        return
    collector = user._collector
    collector.flush_data()  # their own pending lines land under their context first
    mapped = collector.mapped_file_dict(found)
    if data.has_arcs():
        collector.covdata.add_arcs(mapped)
    else:
        collector.covdata.add_lines(mapped)


def _query(label: str) -> list[str]:
    return [r"(^|\|)" + re.escape(label) + "$"]


class AnchorProbe:
    """Measures anchors per witness; ``mode`` is ``private`` (no other measurement),
    ``nested`` (inside the user's, which is paused and given its lines back) or ``None``
    (unused)."""

    def __init__(
        self, files: Iterable[str], include: Iterable[str] = (), omit: Iterable[str] = ()
    ) -> None:
        """``files``: the anchors' files; ``include``/``omit``: coverage patterns of the
        other files whose lines :meth:`all_lines` reports (the project's own code)."""
        self.files = sorted({os.path.realpath(f) for f in files})
        self.include = list(include)
        self.omit = list(omit)
        self.mode: str | None = None
        self._cov: Any = None
        self._user: Any = None
        self._labels: dict[str, str] = {}
        self._setup: set[str] = set()
        self._running = False

    def _ensure(self) -> None:
        if self.mode is not None:
            return
        import coverage

        self._user = coverage.Coverage.current()
        self.mode = "private" if self._user is None else "nested"
        self._cov = _probe_coverage(self.files, self._user, self.include, self.omit)

    @property
    def measured_nodeids(self) -> set[str]:
        return set(self._labels)

    def begin(self, nodeid: str, setup: bool = False) -> None:
        """Start attributing executed lines to ``nodeid`` (call right before the test);
        ``setup``: to its fixtures' set-up instead (a fingerprint's, never an anchor's)."""
        self._ensure()
        label = f"fak-setup:{nodeid}" if setup else f"fak:{nodeid}"
        if not self._running:
            self._cov.start()
            self._running = True
        self._cov.switch_context(label)
        if setup:
            self._setup.add(nodeid)
        else:
            self._labels[nodeid] = label

    def end(self, nodeid: str, setup: bool = False) -> None:
        """Stop attributing to ``nodeid``: what follows (its mutant re-runs) is no evidence.

        Inside a user's measurement the probe keeps running, under a context of its own, so
        theirs stays paused through the mutant re-runs; call :meth:`finish` after them."""
        if not self._running:
            return
        if self.mode == "nested":
            label = f"fak-setup:{nodeid}" if setup else self._labels[nodeid]
            self._cov.switch_context(f"fak-mutants:{nodeid}")
            _replay(self._cov, self._user, label, lambda f: True)
        else:
            self.finish()

    def finish(self) -> None:
        """Stop the private measurement (resuming the user's, if any)."""
        if self._running:
            self._cov.stop()
            self._running = False

    def lines(self, nodeid: str) -> dict[str, set[int]] | None:
        """The anchor-file lines ``nodeid`` executed, by real path (None: not measured)."""
        label = self._labels.get(nodeid)
        if self._cov is None or label is None:
            return None
        data = self._cov.get_data()
        data.set_query_contexts(_query(label))
        anchors = set(self.files)
        try:
            return {
                real: set(data.lines(f) or ())
                for f in data.measured_files()
                if (real := os.path.realpath(f)) in anchors
            }
        finally:
            data.set_query_contexts(None)

    def all_lines(self, nodeid: str) -> dict[str, set[int]]:
        """Every measured line ``nodeid``'s set-up and call executed, by real path."""
        labels = [self._labels[nodeid]] if nodeid in self._labels else []
        if nodeid in self._setup:
            labels.append(f"fak-setup:{nodeid}")
        if self._cov is None or not labels:
            return {}
        data = self._cov.get_data()
        data.set_query_contexts([q for label in labels for q in _query(label)])
        try:
            out: dict[str, set[int]] = {}
            for f in data.measured_files():
                got = data.lines(f)
                if got:
                    out[os.path.realpath(f)] = set(got)
            return out
        finally:
            data.set_query_contexts(None)

    def results(self, wanted: Mapping[str, Iterable[Anchor]]) -> dict[str, dict[str, bool | None]]:
        """For each witness, each anchor: executed (True), not (False), unmeasured (None)."""
        out: dict[str, dict[str, bool | None]] = {}
        for nodeid, anchors in wanted.items():
            got = self.lines(nodeid)
            out[nodeid] = {
                a.symbol: None
                if got is None
                else bool(got.get(os.path.realpath(a.filename), set()) & a.lines)
                for a in anchors
            }
        return out
