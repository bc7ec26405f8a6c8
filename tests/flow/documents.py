"""What the document witnesses of F1.7 (flows) and F1.8 (workspaces) share: reaching into a
JSON document by a path of keys, copying one, and checking that a loader refuses a broken
one at the path it names."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from fak_core.flow.model import FlowSpecError


def join(path: str, key: str) -> str:
    """``path.key``, or ``key`` at the top."""
    return f"{path}.{key}" if path else key


def get_at(doc: Any, where: tuple[Any, ...]) -> Any:
    """The part of ``doc`` at the keys and indexes ``where``."""
    for key in where:
        doc = doc[key]
    return doc


def set_at(doc: Any, where: tuple[Any, ...], value: Any) -> None:
    """Put ``value`` at ``where`` in ``doc`` (in place)."""
    get_at(doc, where[:-1])[where[-1]] = value


def copy_doc(value: Any) -> Any:
    """A copy of a JSON document (faster than ``copy.deepcopy``)."""
    if isinstance(value, dict):
        return {k: copy_doc(v) for k, v in value.items()}
    if isinstance(value, list):
        return [copy_doc(v) for v in value]
    return value


def refused_at(load: Callable[[], object], origin: str, path: str, text: str) -> FlowSpecError:
    """``load()`` raises a :class:`FlowSpecError` naming ``origin`` and ``path`` whose
    expectation says ``text``; the error is returned for further checks."""
    with pytest.raises(FlowSpecError) as info:
        load()
    err = info.value
    assert (err.origin, err.path) == (origin, path), err
    assert text in err.expected, err
    return err
