"""The hooks a downstream ``conftest.py`` or plugin implements to extend ``pytest_fak``.

Mark each implementation ``@pytest.hookimpl(optionalhook=True)``: the specs exist only
while the plugin is loaded, so without the marker ``pytest -p no:fak`` stops with
"unknown hook"; with it pytest ignores the hook when the plugin is off::

    import pytest

    @pytest.hookimpl(optionalhook=True)
    def pytest_fak_make_kernel(config):
        ...
"""

from __future__ import annotations

from typing import Any

import pytest

__all__ = [
    "pytest_fak_make_kernel",
    "pytest_fak_modify_report",
    "pytest_fak_theorem_dirs",
]


@pytest.hookspec(firstresult=True)
def pytest_fak_make_kernel(config: pytest.Config) -> Any:
    """Build the kernel the ``fak_kernel`` fixture and the bundled theorem pack test.

    Called once per test that asks for ``fak_kernel`` (so witnesses never share state);
    the first non-``None`` result wins. Without an implementation the default
    ``fak_core.Kernel()`` is used. Example, in a downstream ``conftest.py``::

        import pytest
        from fak_core import Kernel, Verdict, load_policy

        @pytest.hookimpl(optionalhook=True)
        def pytest_fak_make_kernel(config):
            kernel = Kernel(load_policy("airline-policy.json"))
            kernel.add_adjudicator(BaggageLimit(max_bags=3), 50, name="baggage")
            kernel.register_tool("book_reservation", book, schema=BOOKING_SCHEMA)
            return kernel
    """


def pytest_fak_theorem_dirs(config: pytest.Config) -> list[str]:  # type: ignore[empty-body]
    """Return extra directories of theorem documents (every implementation's list is used).

    They are added to ``--fak-theorems-dir`` and the ``fak_theorems_dirs`` ini value.
    Example, a plugin shipping its own theorems::

        from pathlib import Path

        @pytest.hookimpl(optionalhook=True)
        def pytest_fak_theorem_dirs(config):
            return [str(Path(__file__).parent / "theorems")]
    """


def pytest_fak_modify_report(config: pytest.Config, report: dict[str, Any]) -> None:
    """Change the verdict report (a plain JSON dict) before it is written.

    Runs on the controller only, after every verdict is computed. Example, stamping a
    CI build id into the report::

        import os

        @pytest.hookimpl(optionalhook=True)
        def pytest_fak_modify_report(config, report):
            report["environment"]["ci_build"] = os.environ.get("BUILD_ID", "local")
    """
