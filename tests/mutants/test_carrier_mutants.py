"""Every mutant of D10.4, D10.5 and D10.6 registers, applies and is undone (the tables and the proxy
modules are as before), so a stale mutant cannot pass for a kill."""

from __future__ import annotations

import pytest

import tests.mutants.carriers
from fak_core.gateway import anthropic_proxy, carriers, openai_proxy
from fak_core.gateway.carriers import ANTHROPIC_BLOCKS, OPENAI_ROLES
from pytest_fak.mutants import registry

IDS = sorted(
    mid
    for mid in registry._by_id
    if registry._by_id[mid].where.startswith(tests.mutants.carriers.__name__ + ".")
)


def _snapshot() -> tuple[object, ...]:
    return (
        dict(ANTHROPIC_BLOCKS),
        dict(OPENAI_ROLES),
        *(
            id(obj)  # identity: a patched-in table may compare equal to the real one
            for obj in (
                anthropic_proxy.ANTHROPIC_BLOCKS,
                anthropic_proxy.inbound_results,
                openai_proxy._apply,
                openai_proxy.strip_fak,
                anthropic_proxy.strip_fak,
                openai_proxy.screen_text,
                anthropic_proxy.screen_text,
                openai_proxy.call_name,
                carriers.joined_text,
                openai_proxy.OpenAIProxy.__dict__["_hold_usage"],
            )
        ),
    )


def test_the_module_registers_its_mutants() -> None:
    assert len(IDS) == 11
    assert {i.split("/")[0] for i in IDS} == {"D10.4", "D10.5", "D10.6"}


@pytest.mark.parametrize("mutant_id", IDS)
def test_each_mutant_changes_something_and_is_undone(mutant_id: str) -> None:
    before = _snapshot()
    m = registry.get(mutant_id)
    assert m is not None
    with m.applied():
        assert _snapshot() != before
    assert _snapshot() == before
