"""Rebuilding a witness's function-scoped fixtures, so a mutant is in force while they are built.

pytest builds a test's fixtures once, before its call phase; a mutant applied after that
would miss every object a fixture built from the code it replaces (a kernel holding the
user's adjudicator, a session pair, a gateway). Before a witness re-runs under a mutant,
:func:`teardown` finishes the item's function-scoped fixtures (their finalizers run, their
cached values are dropped) and :func:`setup` builds them again, inside the mutant.
Fixtures of a wider scope (class, module, package, session) are shared with other tests and
are not rebuilt.
"""

from __future__ import annotations

import pytest

__all__ = ["can_rebuild", "is_built", "setup", "teardown"]

_TORN_DOWN = pytest.StashKey[bool]()


def can_rebuild(item: pytest.Item) -> bool:
    """Whether ``item``'s function-scoped fixtures can be torn down and built again."""
    state = getattr(item.session, "_setupstate", None)
    return (
        isinstance(item, pytest.Function)
        and hasattr(item, "_initrequest")
        and state is not None
        and item in getattr(state, "stack", {})
    )


def teardown(item: pytest.Item) -> None:
    """Finish ``item``'s function-scoped fixtures, last built first (every finalizer runs;
    the first error is raised after all of them)."""
    item.stash[_TORN_DOWN] = True
    state = item.session._setupstate
    finalizers, _ = state.stack[item]
    first: BaseException | None = None
    # index 0 is the item's own teardown, which pytest runs when the test is done
    while len(finalizers) > 1:
        fin = finalizers.pop()
        try:
            fin()
        except (KeyboardInterrupt, SystemExit):
            raise
        except BaseException as exc:
            first = first or exc
    if first is not None:
        raise first


def setup(item: pytest.Item) -> None:
    """Build ``item``'s fixtures again: function-scoped ones anew, wider ones from their
    cache."""
    assert isinstance(item, pytest.Function)
    item._initrequest()
    item.setup()
    item.stash[_TORN_DOWN] = False


def is_built(item: pytest.Item) -> bool:
    """False after :func:`teardown` until a :func:`setup` succeeds."""
    return not item.stash.get(_TORN_DOWN, False)
