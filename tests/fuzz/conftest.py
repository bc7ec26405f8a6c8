"""Fuzz tests record how many generated cases ran (``record_property("fuzz_cases", n)``);
this prints the tally at the end of the run, from the reports, so it also works under
pytest-xdist (user properties travel back to the controller with each report).

It also undoes a global side effect of schemathesis: the first time it builds a strategy it
swaps Hypothesis' example printer (``hypothesis.core.RepresentationPrinter``) for one that
prints nothing, for the whole process, so every later Hypothesis failure in the same worker
(our kernel properties, the proof run's counterexamples) would report ``x=,`` instead of
its falsifying example. The real printer is put back after every test here.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest


def restore_hypothesis_printer() -> None:
    import hypothesis.core
    from hypothesis.vendor import pretty

    hypothesis.core.RepresentationPrinter = pretty.RepresentationPrinter  # type: ignore[misc]


@pytest.fixture(autouse=True)
def _hypothesis_printer() -> Iterator[None]:
    yield
    restore_hypothesis_printer()


PROPERTY = "fuzz_cases"
_tally: dict[str, int] = {}


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.when != "call":
        return
    for name, value in report.user_properties:
        if name == PROPERTY and isinstance(value, int):
            _tally[report.nodeid.split("::", 1)[-1]] = value


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if not _tally:
        return
    tr = terminalreporter
    tr.section("fuzz cases run")
    width = max(len(k) for k in _tally)
    for name in sorted(_tally):
        tr.write_line(f"{name:<{width}}  {_tally[name]:>6}")
    tr.write_line(f"{'total':<{width}}  {sum(_tally.values()):>6}")
