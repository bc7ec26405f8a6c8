"""Test-wide settings: Hypothesis profiles that keep example counts sane in CI, pytester,
and modules imported once for all in-process runs.

pytester's in-process runs restore ``sys.modules`` afterwards; coverage's C tracer cannot
be imported a second time in one process, so it is imported here, before any run.
"""

from __future__ import annotations

import os

import coverage
import coverage.tracer  # noqa: F401
from hypothesis import HealthCheck, settings

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
