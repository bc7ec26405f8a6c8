"""H1.3 witnesses: a generated mutant's id survives edits that do not touch its code.

Hypothesis draws a function from statements every operator has sites in (comparisons,
arithmetic, boolean operators, conditional expressions, loops, returns, constants), then
an unrelated edit of it: comment lines and blank lines anywhere, the whole function
re-indented, a long expression re-wrapped over lines inside parentheses, statements of
its own added. The function is written as a real module, imported, and its mutants
generated (:func:`pytest_fak.generated.generate`) before and after: every id of before
must be an id of after, and an edit that only changes the layout must change no id.
"""

from __future__ import annotations

import importlib
import sys
import tempfile
import textwrap
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from itertools import count
from pathlib import Path
from typing import Any

import libcst as cst
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pytest_fak.generated import generate

#: statements at the function's top level (``{c}``: a small constant)
POOL = (
    "if x > {c}:\n    y = x - {c}\nelse:\n    y = x + 1",
    "if x == {c}:\n    y = 1\nelif x < -{c}:\n    y = 2",
    "try:\n    y = y // (x - {c})\nexcept ZeroDivisionError:\n    y = -1",
    "for i in range(y):\n    if i > {c}:\n        break\n    if i == 1:\n        continue",
    "s = 'abc{c}' if a else \"\"",
    "y = y * 2 if y < {c} else y",
    "while y > {c}:\n    y -= 3",
    "z = [i for i in range(y) if i % 2 == {c}]",
    "ok = (a and not b) or y >= {c}",
    "if ok and z:\n    return y + {c}",
    "y = y + {c}",
)
#: statements an edit adds: no change of theirs repeats a change of ``POOL``'s
ADDED = ("note{k} = 'n{k}'", "big{k} = x * {k}00 - {k}01", "if y == {k}00:\n    y = {k}01")

_names = count()


@contextmanager
def imported(source: str) -> Iterator[str]:
    """``source`` as a fresh module; its name."""
    name = f"fak_harness_ids_{next(_names)}"
    with tempfile.TemporaryDirectory() as tmp:
        Path(tmp, f"{name}.py").write_text(source, encoding="utf-8")
        sys.path.insert(0, tmp)
        try:
            importlib.import_module(name)
            yield name
        finally:
            sys.path.remove(tmp)
            sys.modules.pop(name, None)


def ids(source: str) -> list[str]:
    """The ids of the generated mutants of ``target`` in ``source``, less the symbol."""
    with imported(source) as name:
        gen = generate(f"{name}:target")
        assert gen.unmutable is None and not gen.problems, gen
        return [m.id.split("/", 1)[1] for m in gen.mutants]


def render(stmts: list[str], indent: str = "    ") -> str:
    body = "y = 0\nz = []\nok = False\n" + "\n".join(stmts) + "\nreturn y\n"
    body = body.replace("    ", indent)
    return "def target(x, a, b):\n" + textwrap.indent(body, indent)


@st.composite
def functions(draw: st.DrawFn) -> list[str]:
    picks = draw(st.lists(st.sampled_from(POOL), min_size=1, max_size=5))
    return [p.format(c=draw(st.integers(0, 9))) for p in picks]


@st.composite
def layout_edits(draw: st.DrawFn, text: str) -> str:
    """``text`` with comments and blank lines put between its lines, and perhaps
    re-indented with another width (its meaning unchanged)."""
    lines = text.splitlines()
    out = [lines[0]]
    for line in lines[1:]:
        indent = line[: len(line) - len(line.lstrip())]
        what = draw(st.sampled_from(["", "", "comment", "blank"]))
        if what == "comment":
            out.append(f"{indent}# a comment: {draw(st.text('abc ', max_size=8))}")
        elif what == "blank":
            out.append("")
        tail = draw(st.sampled_from(["", "", "  # trailing"]))
        out.append(line + tail if not line.rstrip().endswith(":") else line)
    return "\n".join(out) + "\n"


def _ws(indent: str, comment: str | None) -> cst.ParenthesizedWhitespace:
    return cst.ParenthesizedWhitespace(
        first_line=cst.TrailingWhitespace(comment=cst.Comment(comment) if comment else None),
        empty_lines=[],
        indent=True,
        last_line=cst.SimpleWhitespace(indent),
    )


#: nodes a formatter may put in parentheses over several lines
WRAPPABLE = (
    cst.Comparison,
    cst.BinaryOperation,
    cst.BooleanOperation,
    cst.UnaryOperation,
    cst.IfExp,
    cst.Integer,
    cst.SimpleString,
    cst.ListComp,
    cst.Call,
)


class _Wrap(cst.CSTTransformer):
    """Puts the nodes ``choose`` picks in parentheses, broken over lines, perhaps with a
    comment after the opening one."""

    def __init__(self, choose: Callable[[], int]) -> None:
        self.choose = choose

    def on_leave(self, original_node: Any, updated_node: Any) -> Any:
        if isinstance(updated_node, WRAPPABLE):
            how = self.choose()
            if how:
                comment = "# wrapped" if how == 2 else None
                return updated_node.with_changes(
                    lpar=[cst.LeftParen(whitespace_after=_ws("    ", comment)), *updated_node.lpar],
                    rpar=[*updated_node.rpar, cst.RightParen(whitespace_before=_ws("", None))],
                )
        return updated_node


def rewrapped(text: str, choose: Callable[[], int] = lambda: 1) -> str:
    """``text`` with the expressions ``choose`` picks (0: none, 1: wrapped, 2: wrapped
    with a comment) in parentheses broken over lines, as a formatter does."""
    return cst.parse_module(text).visit(_Wrap(choose)).code


@pytest.mark.fak_theorem("H1.3")
@settings(suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(stmts=functions(), data=st.data())
def test_an_edit_of_the_layout_elsewhere_changes_no_mutant_id(
    stmts: list[str], data: st.DataObject
) -> None:
    before = ids(render(stmts))
    assert before and len(set(before)) == len(before)
    width = data.draw(st.sampled_from(["    ", "  ", "\t", "        "]))
    wrapped = rewrapped(render(stmts, width), lambda: data.draw(st.integers(0, 2)))
    edited = data.draw(layout_edits(wrapped))
    assert ids(edited) == before


@pytest.mark.fak_theorem("H1.3")
@settings(suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(stmts=functions(), data=st.data())
def test_statements_added_or_removed_elsewhere_keep_every_other_mutant_id(
    stmts: list[str], data: st.DataObject
) -> None:
    """Statements added at the top level, or at the end of the last block of an ``if``
    without ``else``, an ``elif`` chain, a ``while`` or a ``for`` (whose mutants change
    only tests), keep every id."""
    before = set(ids(render(stmts)))
    added = list(stmts)
    for k in range(data.draw(st.integers(1, 3))):
        new = data.draw(st.sampled_from(ADDED)).format(k=k + 1)
        at = data.draw(st.integers(0, len(added)))
        inside = [
            j
            for j, s in enumerate(added)
            if s in stmts and ":\n" in s and "else:" not in s and not s.startswith("try")
        ]
        if inside and data.draw(st.booleans()):
            j = data.draw(st.sampled_from(inside))
            added[j] += "\n" + textwrap.indent(new, "    ")
        else:
            added.insert(at, new)
    after = set(ids(render(added)))
    assert before <= after  # every waiver of the old function still names a mutant
    assert after - before  # and the added statements brought mutants of their own
    # removing them again gives back exactly the old ids
    assert set(ids(render(stmts))) == before


@pytest.mark.fak_theorem("H1.3")
def test_a_negated_test_keeps_its_id_when_its_body_changes_or_is_rewrapped() -> None:
    """A formatter re-wraps a ``return`` inside an ``if`` body, or a statement is added
    there: the ``if``'s negated test is the same mutant."""
    plain = render(["if ok and z:\n    return y + 1"])
    assert ids(rewrapped(plain)) == ids(plain)
    grown = render(["if ok and z:\n    big1 = x * 100 - 101\n    return y + 1"])
    negated = {i for i in ids(plain) if i.startswith("negate-condition/")}
    assert negated and negated <= set(ids(grown))


@pytest.mark.fak_theorem("H1.3")
def test_the_ids_of_the_reference_function_are_the_committed_ones() -> None:
    """The ids are a format other projects' waivers hold: the reference function's ids
    (a site of every operator, some in a layout the id must see through) are the ones
    committed beside it, and its re-wrapped copy has them too."""
    here = Path(__file__).parent
    want = (here / "harness_reference_ids.txt").read_text(encoding="utf-8").split()
    gen = generate("tests.plugin.harness_reference:reference")
    got = [m.id.split("/", 1)[1] for m in gen.mutants]
    assert got == want
    source = (here / "harness_reference.py").read_text(encoding="utf-8")
    fn = source[source.index("def reference") :].replace("def reference", "def target", 1)
    assert ids("from __future__ import annotations\n\n" + rewrapped(fn)) == want
