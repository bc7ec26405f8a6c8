"""Test configuration: pytester, plus modules imported once for all in-process runs.

pytester's in-process runs restore ``sys.modules`` afterwards; coverage's C tracer cannot
be imported a second time in one process, so it is imported here, before any run.
"""

import coverage
import coverage.tracer  # noqa: F401
import hypothesis  # noqa: F401

pytest_plugins = ["pytester"]
