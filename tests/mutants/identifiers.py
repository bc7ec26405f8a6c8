"""Mutants for policy v2 identifiers (C4.9): each puts back one plausible way a declared
result field could ground more, or less, than its whole value."""

from __future__ import annotations

import importlib
from typing import Any
from unittest import mock

from fak_core.grounding import GroundingStore
from pytest_fak import mutant

_kernel = importlib.import_module("fak_core.kernel")
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
