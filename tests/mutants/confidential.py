"""Mutants for policy v2 confidential values (C4.10): each puts back one plausible way the
check could let a secret through."""

from __future__ import annotations

import importlib
import unicodedata
from typing import Any
from unittest import mock

from fak_core.confidential import ConfidentialStore
from pytest_fak import mutant

_conf = importlib.import_module("fak_core.confidential")
_real_carried = ConfidentialStore.carried
_real_record = ConfidentialStore.record


@mutant("C4.10/separators-kept")
def separators_kept() -> Any:
    """Values are compared case-folded but with their separators, so a card number
    written in groups of four passes."""

    def compact(text: str) -> str:
        return unicodedata.normalize("NFKC", text).casefold()

    return mock.patch.object(_conf, "compact", compact)


@mutant("C4.10/top-level-only")
def top_level_only() -> Any:
    """Only the string arguments themselves are read, not what lists and tables hold."""

    def texts(value: Any) -> list[str]:
        return [value] if type(value) is str else []

    return mock.patch.object(_conf, "_texts", texts)


@mutant("C4.10/overflow-open")
def overflow_open() -> Any:
    """A session that dropped values carries on with the ones it kept (fail-open)."""

    def carried(self: ConfidentialStore, trace_id: str, args: Any) -> Any:
        s = self._sessions.get(trace_id)
        if s is not None and s.refused == _conf._DROPPED:
            s.refused = ""
        return _real_carried(self, trace_id, args)

    return mock.patch.object(ConfidentialStore, "carried", carried)


@mutant("C4.10/evicted-reads-clean")
def evicted_reads_clean() -> Any:
    """A session the store evicted reads as one that never held a value (fail-open)."""

    def carried(self: ConfidentialStore, trace_id: str, args: Any) -> Any:
        if trace_id not in self._sessions:
            return None
        return _real_carried(self, trace_id, args)

    return mock.patch.object(ConfidentialStore, "carried", carried)


@mutant("C4.10/replica-confidential-local")
def replica_confidential_local() -> Any:
    """A replica with shared state keeps confidential values in its own process and
    answers from them: a value recorded on another replica is never seen."""
    return mock.patch.object(_conf.UnsharedConfidential, "carried", _real_carried)


@mutant("C4.10/raw-cut")
def raw_cut() -> Any:
    """As first written: each value cut to 512 characters *before* it is compacted, so a
    value whose letters and digits start later (or whose last kept letter composes with
    the mark after the cut) is not kept or not matched, and NFKC can grow a kept value
    18-fold past any bound in bytes."""

    def record(
        self: ConfidentialStore, trace_id: str, values: list[str], origin: str, whole: bool = True
    ) -> None:
        cut = [_conf.compact(v[:512]) for v in values]
        kept = [c for c in cut if len(c) >= _conf.MIN_CHARS]
        if whole and not kept:
            return
        with self._lock:
            s = self._sessions.get(trace_id)
            if s is None:
                marked = self._forgotten[_conf._bucket(trace_id)]
                s = self._sessions[trace_id] = _conf._Session(
                    refused=_conf._FORGOTTEN if marked else ""
                )
                while len(self._sessions) > self.max_sessions:
                    gone, _ = self._sessions.popitem(last=False)
                    self._forgotten[_conf._bucket(gone)] = 1
            self._sessions.move_to_end(trace_id)
            for c in kept:
                if c in s.values:
                    continue
                if len(s.values) >= _conf.MAX_VALUES:
                    s.refused = _conf._DROPPED
                    break
                s.values[c] = origin
            if not whole:
                s.refused = _conf._DROPPED

    return mock.patch.object(ConfidentialStore, "record", record)


@mutant("C4.10/recorded-again-reads-clean")
def recorded_again_reads_clean() -> Any:
    """A session recorded again after it was evicted starts clean: the values it held
    before are forgotten and read as never recorded (the forgotten bucket is asked only
    for a session not kept)."""

    def record(
        self: ConfidentialStore, trace_id: str, values: list[str], origin: str, whole: bool = True
    ) -> None:
        new = trace_id not in self._sessions
        _real_record(self, trace_id, values, origin, whole)
        s = self._sessions.get(trace_id)
        if new and s is not None and s.refused == _conf._FORGOTTEN:
            s.refused = ""

    return mock.patch.object(ConfidentialStore, "record", record)


@mutant("C4.10/partial-reading-open")
def partial_reading_open() -> Any:
    """A result read only in part (the reading stopped at its bound on values or on
    length) is taken for all its values: a secret past the bound passes."""

    def record(
        self: ConfidentialStore, trace_id: str, values: list[str], origin: str, whole: bool = True
    ) -> None:
        _real_record(self, trace_id, values, origin)

    return mock.patch.object(ConfidentialStore, "record", record)
