"""Rung 0 at its nesting limit and on repeated keys, against a model built by hand.

Documents are generated as a model (objects as lists of pairs, so a key may repeat), written
out as JSON text by hand, and judged by the model: the depth counts each array and object
from 1 at the top level, a document is accepted exactly when it nests at most the limit and
no object repeats a key, and then its value is what the standard library's ``json`` reads.
String values that hold ``":`` make the cheap colon and key-end counts over-approximate, so
the exact duplicate check is reached with and without a repeat.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fak_core import ArgsError, parse_args
from fak_core.jsonargs import DEFAULT_MAX_DEPTH


@dataclass(frozen=True)
class Obj:
    pairs: tuple[tuple[str, Any], ...]


@dataclass(frozen=True)
class Arr:
    items: tuple[Any, ...]


KEYS = st.sampled_from(["a", "b", "c", "a:", '"', ':"', "\\"])
# strings holding a key's end (a quote, white space, a colon) once written as JSON
SCALARS = st.one_of(
    st.sampled_from(['":', '" :', "x", "", ":", '\\":']),
    st.integers(-3, 3),
    st.booleans(),
    st.none(),
)


def depth(node: Any) -> int:
    """Nesting depth by the documented rule: a container is one more than its deepest child."""
    if isinstance(node, Obj):
        return 1 + max([0, *(depth(v) for _, v in node.pairs)])
    if isinstance(node, Arr):
        return 1 + max([0, *(depth(v) for v in node.items)])
    return 0


def repeats(node: Any) -> bool:
    """Whether any object, at any depth, names a key twice."""
    if isinstance(node, Obj):
        keys = [k for k, _ in node.pairs]
        return len(set(keys)) != len(keys) or any(repeats(v) for _, v in node.pairs)
    if isinstance(node, Arr):
        return any(repeats(v) for v in node.items)
    return False


def write(node: Any, space: str) -> str:
    if isinstance(node, Obj):
        inner = ("," + space).join(
            json.dumps(k) + space + ":" + space + write(v, space) for k, v in node.pairs
        )
        return "{" + space + inner + space + "}"
    if isinstance(node, Arr):
        return "[" + ("," + space).join(write(v, space) for v in node.items) + "]"
    return json.dumps(node)


@st.composite
def small(draw: st.DrawFn, levels: int) -> Any:
    """A scalar or a container at most ``levels`` deep, with few keys that may repeat."""
    if levels == 0 or draw(st.booleans()):
        return draw(SCALARS)
    n = draw(st.integers(0, 3))
    if draw(st.booleans()):
        return Arr(tuple(draw(small(levels - 1)) for _ in range(n)))
    return Obj(tuple((draw(KEYS), draw(small(levels - 1))) for _ in range(n)))


@st.composite
def documents(draw: st.DrawFn) -> tuple[Any, int]:
    """(model of a top-level object, the depth limit to parse it with): a spine of nested
    containers near the limit, each level with small siblings before and after it."""
    limit = draw(st.sampled_from([DEFAULT_MAX_DEPTH, DEFAULT_MAX_DEPTH, 1, 2, 3]))
    spine = draw(st.integers(max(1, limit - 3), limit + 3) | st.integers(1, limit + 3))
    node: Any = None
    for level in range(spine, 0, -1):
        before = draw(st.lists(small(draw(st.integers(0, 2))), max_size=2))
        after = draw(st.lists(small(draw(st.integers(0, 2))), max_size=2))
        children = [*before, *([] if node is None else [node]), *after]
        if level == 1 or draw(st.booleans()):
            node = Obj(tuple((draw(KEYS), child) for child in children))
        else:
            node = Arr(tuple(children))
    return node, limit


CONTAINERS = st.sampled_from([Arr(()), Arr((0,)), Obj(()), Arr((Arr(()),)), ":"])


@st.composite
def flat_documents(draw: st.DrawFn) -> tuple[Any, int]:
    """A small top-level object whose counts sit at the edge of the cheap check: ``r``
    repeated keys and ``c`` container (or colon-holding) values, ``c`` often equal to
    ``r``, so a miscount by the number of containers meets the colon count."""
    repeats = draw(st.integers(0, 3))
    containers = draw(st.one_of(st.just(repeats), st.just(repeats), st.integers(0, 3)))
    keys = [f"k{i}" for i in range(draw(st.integers(max(1, containers - repeats), 4)))]
    keys += [draw(st.sampled_from(keys)) for _ in range(repeats)]
    kind = draw(CONTAINERS)  # one kind per document, so the counts move together
    values: list[Any] = [kind] * min(containers, len(keys))
    values += [0] * (len(keys) - len(values))
    pairs = list(zip(draw(st.permutations(keys)), draw(st.permutations(values)), strict=True))
    return Obj(tuple(pairs)), DEFAULT_MAX_DEPTH


def accepted(raw: str | bytes, limit: int) -> dict[str, Any] | None:
    try:
        return parse_args(raw, max_depth=limit)
    except ArgsError:
        return None


@pytest.mark.fak_theorem("A7.4")
@given(
    doc=documents() | flat_documents(),
    space=st.sampled_from(["", " ", "\n"]),
    as_bytes=st.booleans(),
)
def test_rung0_accepts_exactly_the_shallow_objects_without_repeated_keys(
    doc: tuple[Any, int], space: str, as_bytes: bool
) -> None:
    model, limit = doc
    text = write(model, space)
    raw: str | bytes = text.encode("utf-8") if as_bytes else text
    got = accepted(raw, limit)
    if depth(model) > limit or repeats(model):
        assert got is None, (text, depth(model), limit)
    else:
        assert got is not None, (text, depth(model), limit)
        assert got == json.loads(text)


@pytest.mark.fak_theorem("A7.4")
@pytest.mark.parametrize("kind", ["{", "["])
def test_the_default_limit_is_64_levels_counted_from_one(kind: str) -> None:
    """64 nested containers (the top-level object is level 1) pass; 65 are refused."""
    close = {"{": "}", "[": "]"}[kind]
    inner = {"{": '{"k":', "[": "["}[kind]
    for levels, ok in [(64, True), (65, False)]:
        # the top object, levels - 2 containers, the innermost {}: levels in all
        text = '{"k":' + inner * (levels - 2) + "{}" + close * (levels - 2) + "}"
        assert (accepted(text, DEFAULT_MAX_DEPTH) is not None) is ok, levels


@pytest.mark.fak_theorem("A7.4")
@given(doc=flat_documents(), as_bytes=st.booleans())
def test_the_cheap_duplicate_check_at_its_edge(doc: tuple[Any, int], as_bytes: bool) -> None:
    """Small objects whose colon count meets their key count plus a few repeats: the
    shortcut that compares the two must refuse every repeat and accept every object
    without one, with the value ``json`` reads."""
    model, limit = doc
    text = write(model, "")
    got = accepted(text.encode("utf-8") if as_bytes else text, limit)
    if repeats(model):
        assert got is None, text
    else:
        assert got == json.loads(text), text
