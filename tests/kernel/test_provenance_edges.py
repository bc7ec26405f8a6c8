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

#: The read-only tools earlier versions trusted by default: no longer (the theorem).
BUILT_IN = ("Read", "Grep", "Glob", "LS", "NotebookRead", "read_file", "cat")
OTHERS = ("fetch", "Write", "read", "READ_FILE", "", "cat ")


@pytest.mark.fak_theorem("C4.2")
def test_no_tool_is_trusted_unless_registered() -> None:
    bare = SourceRegistry()
    for tool in BUILT_IN + OTHERS:
        assert bare.source(tool) is Source.UNTRUSTED, tool
    assert list(bare.trusted_tools()) == []
    named = SourceRegistry({"read_file": "trusted_local"})
    assert named.source("read_file") is Source.TRUSTED_LOCAL
    assert named.source("cat") is Source.UNTRUSTED


@pytest.mark.fak_theorem("C4.2")
@given(
    st.lists(
        st.tuples(st.sampled_from(BUILT_IN[:2] + OTHERS[:2]), st.sampled_from(list(Source))),
        max_size=6,
    )
)
def test_the_last_registration_of_a_tool_decides(table: list[tuple[str, Source]]) -> None:
    wanted = dict(table)
    given_table = SourceRegistry(dict(table))
    registered = SourceRegistry()
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
    """A producer's label joined with the policy's class for the tool: a policy gives trust
    to the tools it names (and may write ``untrusted`` out); a read tool it does not name
    (Grep) is untrusted."""
    k = Kernel(
        Policy(allow=("Read", "notes"), sources={"Read": "untrusted", "notes": "trusted_local"})
    )
    for tool, src in (("Read", Taint.TAINTED), ("notes", Taint.TRUSTED), ("Grep", Taint.TAINTED)):
        out, _ = k.admit(ToolCall(tool, "{}", tool), Result(Status.OK, "text", taint=producer))
        wanted = Taint(max(int(producer), int(src)))
        assert out.taint is wanted and k.taint(tool) is wanted, (tool, producer)
