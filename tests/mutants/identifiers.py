"""Mutants for policy v2 identifiers (C4.9): each puts back one plausible way a declared
result field could ground more, or less, than its whole value."""

from __future__ import annotations

import importlib
from types import SimpleNamespace
from typing import Any
from unittest import mock

from fak_core.grounding import GroundingStore
from fak_core.redis_stores import RedisGroundingStore
from pytest_fak import mutant
from tests.mutants.sourcepatch import edited

_kernel = importlib.import_module("fak_core.kernel")
_grounding = importlib.import_module("fak_core.grounding")
_identifiers = importlib.import_module("fak_core.identifiers")
_real_values = _identifiers.identifier_values


@mutant("C4.9/identifier-words")
def identifier_words() -> Any:
    """Identifier values are recorded as trusted text, so every word of one is grounded
    (``Alice`` by the sender ``Alice Smith``)."""

    def record(self: GroundingStore, trace_id: str, values: list[str], origin: str) -> None:
        if values:
            self.record_trusted(trace_id, "\n".join(values), origin)

    return mock.patch.object(GroundingStore, "record_identifiers", record)


@mutant("C4.9/whole-result")
def whole_result() -> Any:
    """The pointers are ignored: every string or number in the result is an identifier
    (a name written in a message body grounds)."""

    def values(payload: str, pointers: tuple[str, ...]) -> list[str]:
        return _real_values(payload, ("/*/*", "/*/*/*", "/*")) if pointers else []

    return mock.patch.object(_kernel, "identifier_values", values)


@mutant("C4.9/first-element-only")
def first_element_only() -> Any:
    """``*`` is read as ``0``: only the first record's field grounds."""

    def values(payload: str, pointers: tuple[str, ...]) -> list[str]:
        return _real_values(payload, tuple(p.replace("*", "0") for p in pointers))

    return mock.patch.object(_kernel, "identifier_values", values)


@mutant("C4.9/keys-as-values")
def keys_as_values() -> Any:
    """``~keys`` is read as ``*``: a sharing list grounds its permissions, not the
    addresses it is keyed by."""

    def values(payload: str, pointers: tuple[str, ...]) -> list[str]:
        return _real_values(payload, tuple(p.replace("~keys", "*") for p in pointers))

    return mock.patch.object(_kernel, "identifier_values", values)


@mutant("C4.9/ambiguous-digest")
def ambiguous_digest() -> Any:
    """The set of identifiers a chunk holds is named by its keys joined with ``\\0`` (the
    original bug): a value holding the separator (``ann\\0ident:bo lee``) names the same
    set as two others, so a later result of one tool holding it reads as already recorded
    and its identifier grounds nothing."""
    joined = SimpleNamespace(dumps=lambda keys: "\0".join(f"{k}:{c}" for k, c in keys))
    return mock.patch.object(_grounding, "json", joined)


@mutant("C4.9/evicted-identifiers-stay")
def evicted_identifiers_stay() -> Any:
    """Each identifier's count in the session's index is taken twice, so when its result
    leaves the trusted context the identifier is still indexed: forgotten reads as grounded."""
    real = GroundingStore.record_identifiers

    def record(self: GroundingStore, trace_id: str, values: list[str], origin: str) -> None:
        real(self, trace_id, values, origin)
        s = self._sessions.get(trace_id)
        if s is not None and s.trusted:
            for key in s.trusted[-1].specials:
                s.specials[key] = s.specials.get(key, 0) + 1

    return mock.patch.object(GroundingStore, "record_identifiers", record)


@mutant("C4.9/identifiers-replica-local")
def identifiers_replica_local() -> Any:
    """The shared grounding store records identifiers as the in-memory store does, in its
    own process (the original bug): with ``--state`` they ground on no replica."""
    return mock.patch.object(
        RedisGroundingStore, "record_identifiers", GroundingStore.record_identifiers
    )


@mutant("C4.9/non-ascii-index")
def non_ascii_index() -> Any:
    """An array index is any string ``str.isdigit`` accepts (the original): ``/list/``
    and ARABIC-INDIC DIGIT ONE reads the second element, where RFC 6901 takes ASCII digits
    only, and ``/list/`` and SUPERSCRIPT TWO makes ``int`` raise, so every admission of
    the tool fails."""
    return edited(_identifiers._step, ("token.isascii() and token.isdigit()", "token.isdigit()"))
