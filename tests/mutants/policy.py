"""Mutants for the policy loader (D2.3, a policy means one thing or is refused): each puts
back one way the loader read, or could plausibly read, a document it should refuse."""

from __future__ import annotations

import importlib
from typing import Any

from pytest_fak import mutant
from tests.mutants.sourcepatch import edited

_policy = importlib.import_module("fak_core.policy")


@mutant("D2.3/null-means-absent")
def null_means_absent() -> Any:
    """A JSON ``null`` written for ``rate_limit`` or ``screen`` reads as the table left out
    (no rate limit, the default screen) instead of being refused as a wrong type (the bug:
    every other key refused a null)."""
    return edited(
        _policy.parse_policy,
        (
            'if "rate_limit" in doc else None',
            'if doc.get("rate_limit") is not None else None',
        ),
        ('if "screen" in doc else None', 'if doc.get("screen") is not None else None'),
    )


@mutant("D2.3/null-page-out-absent")
def null_page_out_absent() -> Any:
    """A JSON ``null`` for a tool's ``page_out_bytes`` in the screen table reads as left
    out (the screen's size) instead of being refused (the bug)."""
    return edited(
        _policy._tool_screen,
        ('if page is None and "page_out_bytes" in t:', "if False:"),
    )


@mutant("D2.3/window-unbounded")
def window_unbounded() -> Any:
    """A rate limit's window is any number > 0, as before the bug was fixed: ``inf``
    (TOML), ``Infinity`` or ``1e400`` (JSON) is read as a window that never ends, and a JSON
    integer beyond any double escapes the loader as ``OverflowError``."""
    return edited(
        _policy._rate_limit,
        ("if not 0 < seconds < math.inf:", "if not 0 < seconds:"),
        ("except OverflowError:", "except ZeroDivisionError:"),
    )
