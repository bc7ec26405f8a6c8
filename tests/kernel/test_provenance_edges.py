"""Who is trusted (C4.2): the source registry's classes and the taint join, with oracles
written here (the built-in list copied from the theorem, the lattice as a maximum)."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fak_core import Kernel, Policy, Result, Status, ToolCall
from fak_core.provenance import Source, SourceRegistry
from fak_core.taint import Taint, join

#: The read-only tools the theorem names as trusted by default.
BUILT_IN = ("Read", "Grep", "Glob", "LS", "NotebookRead", "read_file", "cat")
OTHERS = ("fetch", "Write", "read", "READ_FILE", "", "cat ")


@pytest.mark.fak_theorem("C4.2")
def test_the_built_in_sources() -> None:
    with_builtins, without = SourceRegistry(), SourceRegistry(builtins=False)
    for tool in BUILT_IN:
        assert with_builtins.source(tool) is Source.TRUSTED_LOCAL, tool
        assert without.source(tool) is Source.UNTRUSTED, tool
    for tool in OTHERS:
        assert with_builtins.source(tool) is Source.UNTRUSTED, tool


@pytest.mark.fak_theorem("C4.2")
@given(
    st.lists(
        st.tuples(st.sampled_from(BUILT_IN[:2] + OTHERS[:2]), st.sampled_from(list(Source))),
        max_size=6,
    ),
    st.booleans(),
)
def test_the_last_registration_of_a_tool_decides(
    table: list[tuple[str, Source]], builtins: bool
) -> None:
    wanted = {t: Source.TRUSTED_LOCAL for t in BUILT_IN} if builtins else {}
    wanted.update(dict(table))
    given_table = SourceRegistry(dict(table), builtins=builtins)
    registered = SourceRegistry(builtins=builtins)
    for tool, src in table:
        registered.register(tool, src.value)  # the policy's spelling: a string
    for tool in BUILT_IN + OTHERS:
        expected = wanted.get(tool, Source.UNTRUSTED)
        assert given_table.source(tool) is expected, tool
        assert registered.source(tool) is expected, tool


@pytest.mark.fak_theorem("C4.2")
def test_join_is_the_higher_label() -> None:
    for a, b in itertools.product(Taint, repeat=2):
        assert join(a, b) is Taint(max(int(a), int(b))), (a, b)


@pytest.mark.fak_theorem("C4.2")
@pytest.mark.parametrize("producer", list(Taint))
def test_a_policy_source_decides_what_a_result_carries(producer: Taint) -> None:
    """A producer's label joined with the policy's class for the tool: a policy may take
    trust away from a built-in, and give it to a tool of its own."""
    k = Kernel(
        Policy(allow=("Read", "notes"), sources={"Read": "untrusted", "notes": "trusted_local"})
    )
    for tool, src in (("Read", Taint.TAINTED), ("notes", Taint.TRUSTED), ("Grep", Taint.TRUSTED)):
        out, _ = k.admit(ToolCall(tool, "{}", tool), Result(Status.OK, "text", taint=producer))
        wanted = Taint(max(int(producer), int(src)))
        assert out.taint is wanted and k.taint(tool) is wanted, (tool, producer)
