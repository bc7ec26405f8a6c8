"""The AgentDojo policies in ``examples/agentdojo`` load, and each approvals variant is its
v2 policy with exactly the two additions ``examples/agentdojo/README.md`` (section 5)
states: ``approve = true`` on every sink, and a tainted-session witness rule for every
sink that declares content. The oracle is the v2 file read with ``tomllib``."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from fak_core.policy import load_policy

HERE = Path(__file__).resolve().parents[2] / "examples" / "agentdojo"
SUITES = ("banking", "slack", "travel", "workspace")


@pytest.mark.parametrize("suite", SUITES)
@pytest.mark.parametrize("variant", [".v1", "", ".approve"])
def test_every_policy_loads(suite: str, variant: str) -> None:
    policy = load_policy(HERE / f"{suite}{variant}.toml")
    assert policy.allow, "a policy that allows nothing measures nothing"


@pytest.mark.parametrize("suite", SUITES)
def test_the_approvals_variant_adds_exactly_the_stated_holds(suite: str) -> None:
    v2 = tomllib.loads((HERE / f"{suite}.toml").read_text(encoding="utf-8"))
    ap = tomllib.loads((HERE / f"{suite}.approve.toml").read_text(encoding="utf-8"))
    sinks = {t for t, d in v2["tools"].items() if d["sink"] != "NONE"}
    expected_tools = {
        t: {**d, "approve": True} if t in sinks else d for t, d in v2["tools"].items()
    }
    assert ap["tools"] == expected_tools
    held = [r for r in ap.get("rules", []) if r not in v2.get("rules", [])]
    assert sorted(r["tool"] for r in held) == sorted(
        t for t in sinks if v2["tools"][t].get("content")
    )
    assert all((r["effect"], r["taint"]) == ("witness", "tainted") for r in held)
    assert set(d for d in v2 if d not in ("tools", "rules")) == set(
        d for d in ap if d not in ("tools", "rules")
    )
    assert all(v2[k] == ap[k] for k in v2 if k not in ("tools", "rules"))
    policy = load_policy(HERE / f"{suite}.approve.toml")
    assert all(policy.tools[t].approve for t in sinks)
