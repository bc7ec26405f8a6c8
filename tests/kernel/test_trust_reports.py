"""C4.2: what the source registry and the metadata check report about trust.

``SourceRegistry.trusted_tools`` lists, sorted, exactly the tools whose last registration
is trusted_local (a dict written here is the oracle), and ``claims_self_trust`` reports a
metadata entry whose key names provenance, trust or taint and whose value names trust, in
any case (a regular expression written here is the oracle), while such a claim leaves
the session TAINTED.
"""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fak_core import Kernel, Policy, Result, Status, ToolCall
from fak_core.provenance import Source, SourceRegistry, claims_self_trust
from fak_core.taint import Taint

TOOLS = ("Read", "cat", "fetch", "notes", "", "Write")

_KEY = re.compile("provenance|trust|taint", re.IGNORECASE)
_VALUE = re.compile("trust", re.IGNORECASE)


@pytest.mark.fak_theorem("C4.2")
@given(st.lists(st.tuples(st.sampled_from(TOOLS), st.sampled_from(list(Source))), max_size=8))
def test_trusted_tools_lists_the_trusted_classes(table: list[tuple[str, Source]]) -> None:
    model: dict[str, Source] = {}  # nothing is trusted before it is registered
    reg = SourceRegistry()
    for tool, src in table:
        model[tool] = src
        reg.register(tool, src)
    wanted = sorted(t for t, s in model.items() if s == Source.TRUSTED_LOCAL)
    assert list(reg.trusted_tools()) == wanted


WORDS = ("provenance", "PROVENANCE", "Trust", "trusted", "taint", "TAINT", "x", "", "trus", "t")


@pytest.mark.fak_theorem("C4.2")
@given(
    st.dictionaries(
        st.lists(st.sampled_from(WORDS), max_size=3).map("_".join),
        st.lists(st.sampled_from(WORDS), max_size=3).map(" ".join),
        max_size=3,
    )
)
def test_a_metadata_claim_of_trust_is_reported_and_not_honoured(meta: dict[str, str]) -> None:
    call = ToolCall.make("Read", "{}", "t", meta=meta)
    wanted = any(_KEY.search(k) and _VALUE.search(v) for k, v in meta.items())
    assert claims_self_trust(call) is wanted, meta
    k = Kernel(Policy(allow=("Read",)))
    k.admit(call, Result.make(Status.OK, "text"))
    assert k.taint("t") is Taint.TAINTED


@pytest.mark.fak_theorem("C4.2")
@pytest.mark.parametrize(
    ("meta", "wanted"),
    [
        ({"provenance": "trusted_local"}, True),
        ({"X-Trust-Level": "TRUSTED"}, True),
        ({"taint": "Untrusted"}, True),
        ({"x": "trusted"}, False),
        ({"provenance": "local"}, False),
        ({"note": "hello", "Taint": "trust me"}, True),
        ({}, False),
    ],
)
def test_hand_picked_trust_claims(meta: dict[str, str], wanted: bool) -> None:
    assert claims_self_trust(ToolCall.make("fetch", "{}", meta=meta)) is wanted
