"""A flow document part of the wrong type, where a table or a list is expected, is refused
naming the type it got (a table, a list, a string or a boolean).

The oracle is this file's own table of those four names, written from the theorem.
"""

from __future__ import annotations

from typing import Any

import pytest

from fak_core.flow import flow_from_dict

from .documents import refused_at, set_at
from .flowdata import example_flow_doc

GIVEN: list[tuple[Any, str]] = [({"a": 1}, "a table"), ([1], "a list"), ("x", "a string"),
                                (True, "a boolean"), (False, "a boolean")]  # fmt: skip
#: (where in the document, its path, what is expected there, the type expected there)
PLACES = [
    (("repository",), "repository", "expected a table/object", dict),
    (("policy", "budget"), "policy.budget", "expected a table/object", dict),
    (("nodes", 0, "runtime"), "nodes[0].runtime", "expected a table/object", dict),
    (("nodes",), "nodes", "expected a list", list),
    (("nodes", 1, "tools"), "nodes[1].tools", "expected a list", list),
    (("requirements",), "requirements", "expected a list", list),
]


CASES = [
    (where, path, expected, value, name)
    for where, path, expected, kind in PLACES
    for value, name in GIVEN
    if not isinstance(value, kind)
]


@pytest.mark.fak_theorem("F1.7")
@pytest.mark.parametrize(("where", "path", "expected", "value", "name"), CASES)
def test_a_part_of_the_wrong_type_is_named_by_the_type_it_got(
    where: tuple[Any, ...], path: str, expected: str, value: Any, name: str
) -> None:
    doc = example_flow_doc()
    set_at(doc, where, value)
    err = refused_at(lambda: flow_from_dict(doc, "f.json"), "f.json", path, expected)
    assert err.expected == f"{expected}, got {name}"
