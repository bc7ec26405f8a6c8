"""The persisted risk assessment against a model written here from its stated rules.

Each node's level is the highest of its capabilities' levels: the workspace's declared
level for that exact version when it declares one, otherwise one inferred from the kind
and the name (the expected level of every name used here is written by hand). Confidence
is 0.5 plus half the share of declared levels; approval follows the node's own request or
the flow's threshold; the flow takes the highest level, the lowest confidence and any
approval. The assessment never fails preflight on its own.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fak_core.flow import ExistingFlow, flow_from_dict, preflight
from fak_core.flow.risk import assess

from .flowdata import example_flow_doc, example_workspace_doc, workspace

LEVELS = ("low", "medium", "high", "critical")

#: tool name -> the level the theorem's inference rule gives it (by hand, from the rule).
TOOLS = {
    "shell_tool": "high",  # an EXEC sink
    "spawn_job": "high",  # an EXEC sink
    "purge_cache": "high",  # a DESTRUCTIVE sink
    "notify_team": "medium",  # an EGRESS sink
    "rename_doc": "medium",  # write-shaped
    "list_docs": "low",  # reads
}
#: skill name -> version available (skills infer low); the extension infers medium.
SKILLS = {"planning": "1.4.2", "python-testing": "2.0.1", "style-guide": "1.0.0"}
EXTENSION = ("issue-tracker", "3.1.0")


def _workspace(declared: dict[str, str | None]) -> dict[str, Any]:
    ws = example_workspace_doc()
    for i, name in enumerate(TOOLS):
        version: dict[str, Any] = {"version": "1.0.0", "digest": "sha256:" + f"{i:x}" * 64}
        ws["capabilities"].append({"kind": "tool", "name": name, "versions": [version]})
    ws["capabilities"].append(
        {
            "kind": "skill",
            "name": "style-guide",
            "versions": [{"version": "1.0.0", "digest": "sha256:" + "a" * 64}],
        }
    )
    for cap in ws["capabilities"]:
        for v in cap["versions"]:
            key = f"{cap['kind']}:{cap['name']}@{v['version']}"
            if key in declared:
                v.pop("risk", None)
                if declared[key] is not None:
                    v["risk"] = declared[key]
    ws["users"]["alice"]["grants"] += [f"tool:{n}" for n in TOOLS]
    return ws


def _declared_in(ws: dict[str, Any]) -> dict[str, str]:
    out = {}
    for cap in ws["capabilities"]:
        for v in cap["versions"]:
            if "risk" in v:
                out[f"{cap['kind']}:{cap['name']}@{v['version']}"] = v["risk"]
    return out


def _refs(node: dict[str, Any]) -> list[tuple[str, str]]:
    """(kind, name@version) of every reference of the node and its sub-agents, in order."""
    kinds = (("skills", "skill"), ("extensions", "extension"), ("tools", "tool"))
    out = [(kind, r) for field, kind in kinds for r in node.get(field, [])]
    for s in node.get("subagents", []):
        out += [
            (kind, r) for field, kind in kinds if field != "extensions" for r in s.get(field, [])
        ]
    return out


def _inferred(kind: str, name: str) -> str:
    if kind == "tool":
        return TOOLS.get(name) or {"read_file": "low", "search_code": "low"}.get(name, "medium")
    return "medium" if kind == "extension" else "low"


def expected_risk(doc: dict[str, Any], ws: dict[str, Any]) -> dict[str, Any]:
    declared = _declared_in(ws)
    threshold = doc["policy"]["approval_threshold"]
    nodes = []
    reasons: list[tuple[int, bool, bool, str]] = []
    for node in doc["nodes"]:
        levels, n_declared = [], 0
        for kind, ref in _refs(node):
            name = ref.partition("@")[0]
            d = declared.get(f"{kind}:{ref}")
            n_declared += d is not None
            levels.append(d if d is not None else _inferred(kind, name))
        level = max(levels, key=LEVELS.index) if levels else "low"
        confidence = round(0.5 + 0.5 * n_declared / len(levels), 4) if levels else 1.0
        asks = bool(node.get("approval_required", False))
        approval = asks or LEVELS.index(level) >= LEVELS.index(threshold)
        nodes.append((node["id"], level, confidence, approval))
        reasons.append((len(levels), asks, approval, threshold))
    return {
        "level": max((n[1] for n in nodes), key=LEVELS.index, default="low"),
        "confidence": min((n[2] for n in nodes), default=1.0),
        "approval_required": any(n[3] for n in nodes),
        "nodes": nodes,
        "reasons": reasons,
    }


TOOL_REFS = st.lists(st.sampled_from(sorted(TOOLS)), max_size=3).map(
    lambda names: [f"{n}@1.0.0" for n in names]
)
SKILL_REFS = st.lists(st.sampled_from(sorted(SKILLS)), max_size=2).map(
    lambda names: [f"{n}@{SKILLS[n]}" for n in names]
)
DECLARED_KEYS = (
    [f"tool:{n}@1.0.0" for n in TOOLS]
    + [f"skill:{n}@{v}" for n, v in SKILLS.items()]
    + [f"extension:{EXTENSION[0]}@{EXTENSION[1]}", "tool:read_file@1.2.0"]
)


@st.composite
def cases(draw: st.DrawFn) -> tuple[dict[str, Any], dict[str, str | None]]:
    doc = example_flow_doc()
    doc["policy"]["approval_threshold"] = draw(st.sampled_from(LEVELS))
    for node in doc["nodes"]:
        node["tools"] = draw(TOOL_REFS) + draw(st.sampled_from([[], ["read_file@1.2.0"]]))
        node["skills"] = draw(SKILL_REFS)
        node["extensions"] = [f"{EXTENSION[0]}@{EXTENSION[1]}"] if draw(st.booleans()) else []
        node["approval_required"] = draw(st.booleans())
        if node.get("subagents"):
            node["subagents"][0]["tools"] = draw(TOOL_REFS)
    declared = draw(
        st.dictionaries(st.sampled_from(DECLARED_KEYS), st.none() | st.sampled_from(LEVELS))
    )
    return doc, declared


@pytest.mark.fak_theorem("F1.3")
@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases())
def test_the_persisted_risk_follows_its_rules(case: tuple[dict[str, Any], Any]) -> None:
    doc, declared = case
    ws = _workspace(declared)
    out = preflight(
        ExistingFlow(flow_from_dict(doc)), identity="alice", workspace=workspace(ws), task_id="r"
    )
    assert out.ok, out.to_dict()  # the risk never blocks on its own
    assert out.manifest is not None
    risk = out.manifest.body["risk"]
    want = expected_risk(doc, ws)
    got = [(n["node"], n["level"], n["confidence"], n["approval_required"]) for n in risk["nodes"]]
    assert got == want["nodes"]
    assert (risk["level"], risk["confidence"], risk["approval_required"]) == (
        want["level"],
        want["confidence"],
        want["approval_required"],
    )
    assert out.steps[3].detail == risk
    for node, (n_refs, asks, approval, threshold) in zip(
        risk["nodes"], want["reasons"], strict=True
    ):
        why = node["reasons"]
        assert len(why) == n_refs + approval  # one per capability, then why approval
        if asks:
            assert why[-1] == "the node asks for approval"
        elif approval:
            assert why[-1] == f"level {node['level']} reaches the approval threshold {threshold}"
    for node, (_, _, _, approval) in zip(out.manifest.body["nodes"], want["nodes"], strict=True):
        assert node["approval_required"] is approval


@pytest.mark.fak_theorem("F1.3")
def test_a_flow_or_node_without_capabilities_is_low_and_certain() -> None:
    doc = example_flow_doc()
    for node in doc["nodes"]:
        for field in ("skills", "extensions", "tools", "subagents"):
            node[field] = []
        node["approval_required"] = False
    doc["policy"]["approval_threshold"] = "low"
    flow = flow_from_dict(doc)
    risk = assess(flow).to_dict()
    assert [(n["level"], n["confidence"], n["approval_required"]) for n in risk["nodes"]] == [
        ("low", 1.0, True)
    ] * 3
    empty = assess(dataclasses.replace(flow, nodes=())).to_dict()
    assert empty == {"level": "low", "confidence": 1.0, "approval_required": False, "nodes": []}
