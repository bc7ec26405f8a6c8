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
        if s is not None:
            s.overflow = False
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


@mutant("C4.10/evicted-restarts-clean")
def evicted_restarts_clean() -> Any:
    """A session the store evicted that keeps a value again starts afresh (the bug before
    2026-12-01): the values it kept before read as never kept."""

    def fresh(self: ConfidentialStore, trace_id: str) -> Any:
        return _conf._Session()

    return mock.patch.object(ConfidentialStore, "_fresh", fresh)


@mutant("C4.10/replica-confidential-local")
def replica_confidential_local() -> Any:
    """A replica with shared state keeps confidential values in its own process and
    answers from them: a value recorded on another replica is never seen."""
    return mock.patch.object(_conf.UnsharedConfidential, "carried", _real_carried)
