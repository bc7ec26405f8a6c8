"""Hypothesis evidence: the ``fak`` settings profiles and the per-witness example counter.

The counter uses Hypothesis's public observability callbacks and only touches
Hypothesis when the witness's module already imported it.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from types import TracebackType
from typing import Any

__all__ = [
    "MUTANT_PROFILE",
    "PROFILE",
    "OVERRIDES",
    "ExampleCounter",
    "describe",
    "explicit_failure",
    "load_profile",
    "mutant_settings",
    "register_profiles",
]

PROFILE = "fak"
MUTANT_PROFILE = "fak-mutant"
#: what the ``fak`` profile sets over the profile it inherits from: a verdict must not
#: depend on the machine's speed, an example database, or a random seed
OVERRIDES: dict[str, Any] = {
    "derandomize": True,
    "database": None,
    "deadline": None,
    "print_blob": True,
}


def _suppressed() -> list[Any]:
    from hypothesis import HealthCheck

    return [HealthCheck.too_slow]


def describe(parent: str) -> str:
    """The profile a proof run's witnesses get, said in full: ``fak`` over ``parent``."""
    if parent in (PROFILE, MUTANT_PROFILE, "default"):
        return repr(PROFILE)
    sets = ", ".join(f"{k}={v}" for k, v in OVERRIDES.items())
    return f"{PROFILE!r} over {parent!r} (fak sets {sets}; the rest is {parent!r}'s)"


def register_profiles(
    mutant_examples: int, max_examples: int | None = None, parent: str = "default"
) -> None:
    """Register ``fak`` (derandomised, no database, blob printed) and ``fak-mutant``.

    ``fak`` inherits what it does not set (``max_examples`` when not given) from the
    profile named ``parent``, the one active before the plugin's, never from whatever
    profile happens to be loaded now: a run in the same process (pytester) that left its
    own ``fak`` loaded must not hand its example count to the next."""
    from hypothesis import Phase, settings

    if parent in (PROFILE, MUTANT_PROFILE):
        parent = "default"
    base = settings.get_profile(parent)
    extra: dict[str, Any] = {"max_examples": max_examples} if max_examples else {}
    settings.register_profile(
        PROFILE,
        base,
        **extra,
        **OVERRIDES,
        # the health checks the user's profile suppresses stay suppressed
        suppress_health_check=list(dict.fromkeys([*base.suppress_health_check, *_suppressed()])),
    )
    settings.register_profile(
        MUTANT_PROFILE,
        settings.get_profile(PROFILE),
        max_examples=max(1, mutant_examples),
        phases=[Phase.explicit, Phase.reuse, Phase.generate],
        print_blob=False,
    )


def load_profile(name: str) -> None:
    from hypothesis import settings

    settings.load_profile(name)


@contextlib.contextmanager
def capped_settings(test: Any, max_examples: int, phases: Any = None) -> Iterator[None]:
    """Run ``test`` (a ``@given`` test) with at most ``max_examples`` (and ``phases``).

    Hypothesis binds a test's settings when ``@given`` decorates it, so loading a profile
    later does not reach a test with its own ``@settings``; this swaps the bound settings
    for capped ones (never more than the test's own) and restores them.
    """
    current = getattr(test, "_hypothesis_internal_use_settings", None)
    if current is None or "hypothesis" not in sys.modules:
        yield
        return
    from hypothesis import settings

    extra: dict[str, Any] = {} if phases is None else {"phases": phases, "print_blob": False}
    test._hypothesis_internal_use_settings = settings(
        current, max_examples=min(current.max_examples, max(1, max_examples)), **extra
    )
    try:
        yield
    finally:
        test._hypothesis_internal_use_settings = current


def mutant_settings(test: Any) -> contextlib.AbstractContextManager[None]:
    """Run ``test`` under the ``fak-mutant`` profile's example budget and phases."""
    from hypothesis import settings

    if "hypothesis" not in sys.modules:
        return contextlib.nullcontext()
    profile = settings.get_profile(MUTANT_PROFILE)
    return capped_settings(test, profile.max_examples, profile.phases)


#: how Hypothesis notes a failing explicit example (today's wording, then 6.151's)
_EXPLICIT = ("Failing explicit example: ", "Falsifying explicit example: ")


def explicit_failure(exc: BaseException) -> dict[str, Any]:
    """The explicit ``@example`` a failure came from, as Hypothesis notes it on the
    exception (its observability does not report it as a failed test case): a
    ``falsifying_example`` like a generated one's, marked ``explicit``; else empty. In an
    exception group (several failures) the first such note as the tree reads: an
    exception's own notes, then its sub-exceptions', depth first, left to right."""
    pending = [exc]
    while pending:
        e = pending.pop()
        for note in getattr(e, "__notes__", None) or ():
            if isinstance(note, str) and note.startswith(_EXPLICIT):
                return {"falsifying_example": note.partition(": ")[2], "explicit": True}
        if isinstance(e, BaseExceptionGroup):
            pending += reversed(e.exceptions)
    return {}


class ExampleCounter:
    """Counts the test cases Hypothesis reports for the running witness."""

    def __init__(self) -> None:
        self.counts: dict[str, int] = {}
        self.failure: dict[str, str] = {}
        self._active = False

    def _observe(self, obs: Any) -> None:
        if getattr(obs, "type", None) != "test_case":
            return
        status = str(obs.status)
        self.counts[status] = self.counts.get(status, 0) + 1
        if status == "failed":
            self.failure["falsifying_example"] = str(obs.representation)
            repro = getattr(obs.metadata, "reproduction_decorator", None)
            if repro:
                self.failure["reproduction"] = str(repro)

    @property
    def examples(self) -> int | None:
        return sum(self.counts.values()) if self._active and self.counts else None

    def __enter__(self) -> ExampleCounter:
        if "hypothesis" in sys.modules:
            from hypothesis.internal.observability import add_observability_callback

            add_observability_callback(self._observe)
            self._active = True
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._active:
            from hypothesis.internal.observability import remove_observability_callback

            remove_observability_callback(self._observe)
