"""The ``fak-hooks`` pytest entry point: the plugin's hook specifications on their own.

pytest refuses a hook implementation whose specification is unknown (unless marked
``optionalhook``). Registered apart from the ``fak`` plugin, this keeps the
specifications of :mod:`pytest_fak.hookspecs` known under ``pytest -p no:fak``, so a
conftest implementing ``pytest_fak_make_kernel`` starts either way (the hooks are then
never called). Imports nothing but the specifications.
"""

from __future__ import annotations

import pytest

from pytest_fak import hookspecs

__all__: list[str] = []


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    hookspecs.add_to(pluginmanager)
