"""Which kernel factory a run uses, and conftest functions that nearly name a plugin hook.

The ``fak_kernel`` fixtures build their kernel from ``pytest_fak_make_kernel``, else from
``fak_core.Kernel()``. Marked ``optionalhook=True``, a misspelt implementation is ignored
by pytest without a word, so the witnesses would quietly test the default kernel. So a
proof run names the factory it used (:func:`describe`), a conftest function whose name is
close to one of the plugin's hooks but is none of them is a usage error naming the right
spelling (:func:`near_misses`), and a verdict whose witnesses asked for a kernel fixture
while no factory exists says so (:data:`KERNEL_FIXTURES`, :func:`no_factory_note`).
"""

from __future__ import annotations

import difflib
import inspect
from typing import Any

import pytest

from pytest_fak import hookspecs

__all__ = [
    "CLOSE",
    "DEFAULT_FACTORY",
    "HOOKS",
    "KERNEL_FIXTURES",
    "describe",
    "factories",
    "near_misses",
    "no_factory_note",
]

#: what the fixtures build when no ``pytest_fak_make_kernel`` is implemented
DEFAULT_FACTORY = "fak_core.Kernel() default"
#: the plugin's hooks
HOOKS = tuple(hookspecs.__all__)
#: the similarity from which a name counts as a misspelt hook
CLOSE = 0.8
#: the fixtures whose kernel comes from ``pytest_fak_make_kernel``
KERNEL_FIXTURES = frozenset({"fak_kernel", "fak_kernel_factory", "fak_session_pair", "fak_gateway"})


def factories(config: pytest.Config) -> list[str]:
    """Each ``pytest_fak_make_kernel`` implementation as ``module:function``, in the order
    pytest calls them (the first non-``None`` result wins)."""
    caller = getattr(config.pluginmanager.hook, "pytest_fak_make_kernel", None)
    if caller is None:
        return []
    impls = list(reversed(caller.get_hookimpls()))
    return [f"{i.function.__module__}:{i.function.__qualname__}" for i in impls]


def describe(config: pytest.Config) -> str:
    """The kernel factory of this run: its implementations, or the default."""
    return ", else ".join(factories(config)) or DEFAULT_FACTORY


def no_factory_note(fixtures: set[str]) -> str:
    """The verdict note of a theorem whose witnesses asked for ``fixtures`` (kernel
    fixtures) while no ``pytest_fak_make_kernel`` is implemented."""
    used = ", ".join(sorted(fixtures))
    return (
        f"its witnesses use {used} but no pytest_fak_make_kernel hook is implemented, so "
        f"they tested {DEFAULT_FACTORY}: define the hook in conftest.py (check its spelling)"
    )


def near_misses(plugin: object, manager: pytest.PytestPluginManager) -> list[tuple[str, str]]:
    """``(name, hook)`` for each function of ``plugin`` whose name is close to ``hook``, one
    of the plugin's hooks, but names no hook at all: a ``pytest_fak_`` prefix that is not a
    hook, or a name whose :class:`difflib.SequenceMatcher` ratio to a hook is at least
    :data:`CLOSE` (the score :func:`difflib.get_close_matches` uses)."""
    found = []
    for name, value in sorted(vars(plugin).items()) if hasattr(plugin, "__dict__") else ():
        if not name.startswith("pytest_") or not inspect.isroutine(value):
            continue
        caller: Any = getattr(manager.hook, name, None)
        if caller is not None and caller.spec is not None:
            continue  # a hook: the plugin's, pytest's or another plugin's
        # difflib's similarity (as get_close_matches scores it); the first hook on a tie
        ratios = [difflib.SequenceMatcher(None, name, h).ratio() for h in HOOKS]
        best = max(range(len(HOOKS)), key=ratios.__getitem__)
        if ratios[best] >= CLOSE or name.startswith("pytest_fak_"):
            found.append((name, HOOKS[best]))
    return found
