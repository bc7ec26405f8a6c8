"""The plugin's in-process pytester runs use plain asserts.

CPython 3.11.7 (this project's CI Python) keeps the AST constructor's recursion depth in
interpreter-wide state (python/cpython#106905, fixed in 3.11.8): an ``ast.parse`` in one
thread while another thread parses (3.11's traceback formatter parses source lines to
place its carets, so any thread logging an exception does) can fail with "SystemError:
AST constructor recursion depth mismatch". Assertion rewriting parses every test module an
in-process run collects, in the middle of a session whose server threads may be logging;
these runs check the plugin's output, not assertion introspection, so they parse nothing.
"""

from __future__ import annotations

from typing import Any

import pytest


@pytest.fixture(autouse=True)
def _plain_asserts_in_process(request: pytest.FixtureRequest) -> None:
    if "pytester" not in request.fixturenames:
        return
    monkeypatch: pytest.MonkeyPatch = request.getfixturevalue("monkeypatch")
    # an inner proof run must not annotate or summarise the outer CI job
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    pytester: pytest.Pytester = request.getfixturevalue("pytester")
    real = pytester.runpytest

    def runpytest(*args: Any, **kwargs: Any) -> pytest.RunResult:
        return real("--assert=plain", *args, **kwargs)

    monkeypatch.setattr(pytester, "runpytest", runpytest)
