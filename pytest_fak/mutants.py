"""The mutant registry: named, reversible breakages a theorem's witnesses must catch.

A mutant is a context-manager factory registered under ``"<theorem id>/<name>"``, the
name the theorem document declares under **MUTANTS.**::

    from unittest import mock
    from pytest_fak import mutant

    @mutant("AIR1.1/no-limit")
    def no_limit():
        return mock.patch.object(BaggageLimit, "limit", 10**9)

In proof mode each passing witness is run again inside every mutant of every theorem it
binds; at least one witness must fail under each mutant, else the theorem is VACUOUS.
Define a mutant in a ``conftest.py``, in the witness's own module, or in a module the
theorem document lists under **MUTANT-MODULES.**; it must exist by the time the
witness's module is collected.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, TypeVar

__all__ = ["Mutant", "MutantRegistry", "mutant", "registry"]

Factory = Callable[[], AbstractContextManager[Any]]
F = TypeVar("F", bound=Factory)


@dataclass(frozen=True, slots=True)
class Mutant:
    """A registered mutant: its id and the factory that enters the breakage."""

    id: str
    factory: Factory
    where: str

    @contextlib.contextmanager
    def applied(self) -> Iterator[None]:
        with self.factory():
            yield


class MutantRegistry:
    """Mutant id → :class:`Mutant`. One id may be registered once per run."""

    def __init__(self) -> None:
        self._by_id: dict[str, Mutant] = {}

    def register(self, mutant_id: str, factory: Factory) -> Mutant:
        theorem_id, sep, name = mutant_id.partition("/")
        if not sep or not theorem_id or not name:
            raise ValueError(
                f"mutant id {mutant_id!r} must be '<theorem id>/<name>', e.g. 'A7.2/keeps-going'"
            )
        where = f"{getattr(factory, '__module__', '?')}.{getattr(factory, '__qualname__', '?')}"
        old = self._by_id.get(mutant_id)
        if old is not None and old.where != where:
            raise ValueError(f"mutant {mutant_id!r} is defined twice: {old.where} and {where}")
        m = Mutant(mutant_id, factory, where)
        self._by_id[mutant_id] = m
        return m

    def get(self, mutant_id: str) -> Mutant | None:
        return self._by_id.get(mutant_id)

    def ids(self) -> list[str]:
        return sorted(self._by_id)

    def clear(self) -> None:
        self._by_id.clear()


#: The process-wide registry the plugin reads (cleared when a pytest run ends).
registry = MutantRegistry()


def mutant(mutant_id: str) -> Callable[[F], F]:
    """Register the decorated context-manager factory as mutant ``mutant_id``."""

    def deco(factory: F) -> F:
        registry.register(mutant_id, factory)
        return factory

    return deco
