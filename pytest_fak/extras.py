"""The plugin's optional dependencies: each is looked for only when a feature asks for it.

The base install (``pip install pytest-fak``) runs ``pytest --fak-theorems`` with declared
mutants. Generated mutants (``--fak-mutate``, ``--fak-shard``) rewrite anchors with libcst,
which comes with the ``mutate`` extra; :func:`require_mutate` turns its absence into a
one-line pytest usage error naming the install, before anything imports it.
"""

from __future__ import annotations

import importlib.util

import pytest

__all__ = ["MUTATE_INSTALL", "require_mutate"]

#: what installs the generated-mutant machinery
MUTATE_INSTALL = "pip install 'pytest-fak[mutate]'"


def require_mutate(feature: str) -> None:
    """Raise :class:`pytest.UsageError` unless libcst can be imported; ``feature`` names
    the option that asked for it (``--fak-mutate=incremental``)."""
    try:
        found = importlib.util.find_spec("libcst") is not None
    except (ImportError, ValueError):
        found = False
    if not found:
        raise pytest.UsageError(
            f"{feature} generates mutants with libcst, which is not installed: {MUTATE_INSTALL}"
        )
