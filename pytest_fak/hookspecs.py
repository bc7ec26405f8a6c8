"""The hooks a downstream ``conftest.py`` or plugin implements to extend ``pytest_fak``.

pytest rejects ("unknown hook") an implementation whose specification no loaded plugin
added, unless it is marked ``@pytest.hookimpl(optionalhook=True)``. These specifications
are added by their own entry point, ``fak-hooks`` (:mod:`pytest_fak.hooks_plugin`), as
well as by the plugin, so ``pytest -p no:fak`` leaves them known and a conftest's
implementation is accepted (and never called) either way; the mark is needed only where
pytest-fak is not installed, or with ``-p no:fak-hooks`` too::

    def pytest_fak_make_kernel(config):
        ...
"""

from __future__ import annotations

import sys
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


def add_to(manager: pytest.PytestPluginManager) -> None:
    """Add these specifications to ``manager`` unless a plugin already did."""
    caller = getattr(manager.hook, "pytest_fak_make_kernel", None)
    if caller is None or caller.spec is None:
        manager.add_hookspecs(sys.modules[__name__])
