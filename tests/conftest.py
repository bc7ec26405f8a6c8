"""Test-wide settings: Hypothesis profiles that keep example counts sane in CI, pytester,
and modules imported once for all in-process runs.

pytester's in-process runs restore ``sys.modules`` afterwards; coverage's C tracer cannot
be imported a second time in one process, so it is imported here, before any run.

schemathesis patches Hypothesis process-wide when its strategy builder is imported (at
collection, under xdist): a printer that prints nothing (every later falsifying example
reads ``x=,``) and a larger example buffer. Every test outside ``tests/fuzz`` gets
Hypothesis as it was before schemathesis was imported.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import coverage
import coverage.tracer  # noqa: F401
import hypothesis.core
import pytest
from hypothesis import HealthCheck, settings
from hypothesis.internal import entropy
from hypothesis.internal.conjecture import engine
from hypothesis.strategies._internal import collections as hyp_collections
from hypothesis.strategies._internal import core as hyp_strategies_core

pytest_plugins = ["pytester"]

settings.register_profile(
    "ci",
    max_examples=60,
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile("dev", max_examples=100, deadline=None)
settings.register_profile("thorough", max_examples=2000, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci" if os.environ.get("CI") else "dev"))

_FUZZ = Path(__file__).parent / "fuzz"
_PRISTINE: list[tuple[Any, str, Any]] = [
    (module, name, getattr(module, name))
    for module, name in (
        (hypothesis.core, "RepresentationPrinter"),
        (hypothesis.core, "BUFFER_SIZE"),
        (engine, "BUFFER_SIZE"),
        (hyp_collections, "BUFFER_SIZE"),
        (hyp_strategies_core, "is_first_param_referenced_in_function"),
        (entropy, "register_random"),
    )
    if hasattr(module, name)
]


@pytest.fixture(autouse=True)
def _pristine_hypothesis(request: pytest.FixtureRequest) -> None:
    if not request.path.is_relative_to(_FUZZ):
        for module, name, value in _PRISTINE:
            setattr(module, name, value)
