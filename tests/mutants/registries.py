"""Mutants for A8's registries: a registration that is not checked the way A8 states."""

from __future__ import annotations

from typing import Any

from fak_core.verdicts import KindRegistry
from pytest_fak import mutant
from tests.mutants.sourcepatch import edited


@mutant("A8/kind-name-unchecked")
def kind_name_unchecked() -> Any:
    """An extension kind's name is not checked: an empty one is accepted and renders as an
    unknown kind's ``KIND_<n>``, a lower-case one goes on the wire as written (the bug)."""
    check = 'if not name or not name.replace("_", "").isalnum() or name.upper() != name:'
    return edited(KindRegistry.register, (check, "if False:"))
