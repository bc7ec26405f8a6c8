"""Mutants of ``theorems/adoption.md`` (issue 31): each puts back what a downstream user
met before: a misspelt hook ignored in silence, any number taken as a deadline or an
example budget, a failing explicit ``@example`` left out of the report, and generated
mutants started without libcst (a traceback instead of the install to run).

Each edits the plugin's source for the duration of a witness re-run
(:func:`tests.mutants.sourcepatch.edited`).
"""

from __future__ import annotations

from typing import Any

from pytest_fak import extras, hyp, kernelhook, mutant, plugin
from tests.mutants.sourcepatch import edited

__all__: list[str] = []


@mutant("H2.1/near-miss-ignored")
def near_miss_ignored() -> Any:
    """No name is a near miss: pytest ignores a misspelt ``optionalhook`` in silence."""
    return edited(kernelhook.near_misses, ("found.append((name, HOOKS[best]))", "pass"))


@mutant("H2.2/any-deadline")
def any_deadline() -> Any:
    """Any float is a deadline (``type=float``): -1, 0 and nan are taken."""
    return edited(plugin._seconds, ("if not math.isfinite(value) or value <= 0:", "if False:"))


@mutant("H2.2/any-budget")
def any_budget() -> Any:
    """Any whole number is an example budget (``type=int``): 0 and -1 are taken."""
    return edited(plugin._whole, ("if value < 1:", "if False:"))


@mutant("H2.3/explicit-not-recorded")
def explicit_not_recorded() -> Any:
    """A failing explicit ``@example`` leaves no falsifying example in the report."""
    return edited(
        hyp.explicit_failure,
        ("if isinstance(note, str) and note.startswith(_EXPLICIT):", "if False:"),
    )


@mutant("H2.4/libcst-assumed")
def libcst_assumed() -> Any:
    """Generated mutants go ahead without libcst (its import fails later, a traceback)."""
    return edited(extras.require_mutate, ("if not found:", "if False:"))
