"""The manifest as frozen and as written: each node entry against the flow file it came from,
the manifest file's exact text, and the nodes a missing node id is refused with.

The oracles are this file's own: the example flow file as YAML gives it (not the loader's
normalised form), its defaults written out from the theorem, and a JSON pretty-printer
written here (sorted keys, two-space indentation, non-ASCII characters as themselves).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from fak_core.flow import ExistingFlow, Manifest, flow_from_dict, kernel_policy_for, preflight
from fak_core.flow.model import load_document

from .flowdata import EXAMPLE, workspace

ORDER = ["plan", "implement", "review"]  # the example's plan order, written out


def _raw(subagent_refs: bool) -> dict[str, Any]:
    """The example flow file as parsed YAML; optionally the plan node hands its skill and one
    tool to a sub-agent of its own."""
    doc: dict[str, Any] = load_document(EXAMPLE / "flow.yaml")
    if subagent_refs:
        plan = doc["nodes"][0]
        plan["skills"], plan["tools"] = [], ["read_file@1.2.0"]
        plan["subagents"] = [
            {
                "name": "code-scout",
                "inherits": ["model"],
                "skills": ["planning@1.4.2"],
                "tools": ["search_code@1.0.3"],
            }
        ]
    return doc


def _frozen(doc: dict[str, Any], task: str = "t1") -> Manifest:
    out = preflight(
        ExistingFlow(flow_from_dict(doc), "v3"),
        identity="alice",
        workspace=workspace(),
        task_id=task,
    )
    assert out.ok and out.manifest is not None, out.to_dict()
    return out.manifest


def _expected_entry(node: dict[str, Any], approval: bool) -> dict[str, Any]:
    return {
        "id": node["id"],
        "prompt": node["prompt"],
        "model": node["model"],
        "runtime": node.get("runtime", {}),
        "skills": node.get("skills", []),
        "extensions": node.get("extensions", []),
        "tools": node.get("tools", []),
        "subagents": [
            {
                "name": s["name"],
                "inherits": s.get("inherits", []),
                "skills": s.get("skills", []),
                "tools": s.get("tools", []),
            }
            for s in node.get("subagents", [])
        ],
        "approval_required": approval,
        "inputs": sorted(i["name"] for i in node.get("inputs", [])),
        "outputs": sorted(o["name"] for o in node.get("outputs", [])),
        "rework_targets": sorted(node.get("rework_targets", [])),
    }


@pytest.mark.fak_theorem("F1.1")
@pytest.mark.parametrize("subagent_refs", [False, True])
def test_each_node_entry_holds_what_the_flow_file_says(subagent_refs: bool) -> None:
    doc = _raw(subagent_refs)
    body = _frozen(doc).body
    by_id = {n["id"]: n for n in doc["nodes"]}
    risk = {n["node"]: n["approval_required"] for n in body["risk"]["nodes"]}
    assert body["nodes"] == [
        _expected_entry(by_id[i], bool(by_id[i].get("approval_required", False) or risk[i]))
        for i in ORDER
    ]


def _pretty(value: Any, depth: int = 0) -> str:
    """JSON with sorted keys, two spaces per level, non-ASCII characters kept."""
    inner, outer = "  " * (depth + 1), "  " * depth
    if isinstance(value, dict) and value:
        members = [f"{inner}{_pretty(k)}: {_pretty(value[k], depth + 1)}" for k in sorted(value)]
        return "{\n" + ",\n".join(members) + "\n" + outer + "}"
    if isinstance(value, list) and value:
        return "[\n" + ",\n".join(inner + _pretty(v, depth + 1) for v in value) + "\n" + outer + "]"
    return json.dumps(value, ensure_ascii=False)


@pytest.mark.fak_theorem("F1.1")
@pytest.mark.parametrize("task", ["t1", "tâche-ü-1"])
def test_the_manifest_file_is_one_exact_text(task: str) -> None:
    manifest = _frozen(_raw(False), task)
    text = manifest.to_json()
    assert text == _pretty({"digest": manifest.digest, "manifest": manifest.body}) + "\n"
    assert text == _frozen(_raw(False), task).to_json()  # the same inputs, the same file
    assert Manifest.from_json(text) == manifest
    if not task.isascii():
        assert task in text  # written as itself, not escaped


@pytest.mark.fak_theorem("F1.6")
def test_a_node_id_the_manifest_lacks_is_refused_naming_its_nodes() -> None:
    manifest = _frozen(_raw(False))
    assert manifest.node_ids == ORDER
    with pytest.raises(KeyError) as info:
        kernel_policy_for(manifest, "ghost")
    assert str(info.value) == repr(f"the manifest has no node 'ghost'; nodes: {', '.join(ORDER)}")
