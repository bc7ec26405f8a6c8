"""F1.4, what the secret-free outputs hold: the projection shows exactly the evidence its
module promises (read field by field from the flow and workspace documents, not from the
projection code), the private layer holds exactly the credential references the flow
names, and every finding points into the document it was found in.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest

from fak_core.flow import (
    PRIVATE_LAYER_NOTE,
    ExistingFlow,
    Manifest,
    ManifestError,
    flow_from_dict,
    preflight,
    project,
)

from .flowdata import EXAMPLE, example_flow_doc, example_workspace_doc, workspace


def _run(fl: dict[str, Any]) -> Any:
    return preflight(
        ExistingFlow(flow_from_dict(fl), "v3"),
        identity="alice",
        workspace=workspace(),
        task_id="t9",
    )


def _exact(ws: dict[str, Any], kind: str, refs: list[str]) -> list[dict[str, str]]:
    caps = {(c["kind"], c["name"]): c for c in ws["capabilities"]}
    out = []
    for ref in refs:
        name, pin = ref.split("@", 1)
        v = next(v for v in caps[(kind, name)]["versions"] if pin in (v["version"], v["digest"]))
        out.append({"name": name, "version": v["version"], "digest": v["digest"]})
    return out


@pytest.mark.fak_theorem("F1.4")
def test_the_projection_is_exactly_the_promised_evidence() -> None:
    fl, ws = example_flow_doc(), example_workspace_doc()
    scout = fl["nodes"][0]["subagents"][0]  # a sub-agent with exact skills and tools too
    scout.update(inherits=["model"], skills=["planning@1.4.2"], tools=["read_file@1.2.0"])
    out = _run(fl)
    assert out.ok, out.to_dict()
    view = project(out.manifest)
    risk = out.manifest.body["risk"]  # persisted by preflight: the one input read as-is
    by_node = {r["node"]: r for r in risk["nodes"]}
    asks = {"review"}  # the example's only node asking for approval (or whose risk does)
    expected_nodes = [
        {
            "id": n["id"],
            "main_agent": {"model": n["model"], "runtime": n["runtime"]},
            "prompt": n["prompt"],
            "subagents": [
                {
                    "name": s["name"],
                    "inherits": s.get("inherits", []),
                    "skills": _exact(ws, "skill", s.get("skills", [])),
                    "tools": _exact(ws, "tool", s.get("tools", [])),
                }
                for s in n.get("subagents", [])
            ],
            "skills": _exact(ws, "skill", n.get("skills", [])),
            "extensions": _exact(ws, "extension", n.get("extensions", [])),
            "tools": _exact(ws, "tool", n.get("tools", [])),
            "approval_required": n["id"] in asks,
            "risk": {
                "level": by_node[n["id"]]["level"],
                "confidence": by_node[n["id"]]["confidence"],
            },
            "private_execution_layer": PRIVATE_LAYER_NOTE,
        }
        for n in fl["nodes"]
    ]
    expected = {
        "task": {"id": "t9", "identity": "alice", "workspace": ws["name"]},
        "digest": out.manifest.digest,
        "origin": out.manifest.body["snapshot"]["origin"],
        "repository": fl["repository"],
        "requirements": [
            {
                "name": q["name"],
                "location": q["location"],
                "revision": "sha256:"
                + hashlib.sha256((EXAMPLE / q["location"]).read_bytes()).hexdigest(),
            }
            for q in fl["requirements"]
        ],
        "risk": {k: risk[k] for k in ("level", "confidence", "approval_required")},
        "nodes": expected_nodes,
    }
    assert view == expected
    assert out.manifest.body["snapshot"]["origin"]["version"] == "v3"
    assert [r["level"] for r in risk["nodes"]] == ["low", "medium", "medium"]
    assert out.steps[5].detail == {"nodes": len(fl["nodes"]), "locked": 7}


@pytest.mark.fak_theorem("F1.4")
def test_the_private_layer_holds_exactly_the_credential_references_the_flow_names() -> None:
    fl = example_flow_doc()
    fl["nodes"][0]["credentials"] = ["vault://acme/x/one", "vault://acme/x/two"]
    out = _run(fl)
    assert out.ok, out.to_dict()
    named = {n["id"]: tuple(n["credentials"]) for n in fl["nodes"] if n.get("credentials")}
    assert out.private.credentials == named
    assert "vault://" not in out.manifest.to_json()


@pytest.mark.fak_theorem("F1.4")
@pytest.mark.parametrize(("node", "key"), [(0, "api_key"), (2, "password"), (1, "GITHUB_TOKEN")])
def test_a_secret_finding_points_into_the_manifest_and_the_projection(node: int, key: str) -> None:
    fl = example_flow_doc()
    fl["nodes"][node]["runtime"][key] = "value"
    out = _run(fl)
    (failed,) = [s for s in out.steps if s.status == "failed"]
    assert failed.step == "freeze"
    assert [(f.code, f.path) for f in failed.findings] == [
        ("SECRET_IN_MANIFEST", f"manifest.nodes[{node}].runtime.{key}"),
        ("SECRET_IN_MANIFEST", f"manifest.snapshot.flow.nodes[{node}].runtime.{key}"),
    ]
    good = _run(example_flow_doc()).manifest
    body = json.loads(json.dumps(good.body))
    body["nodes"][node]["runtime"][key] = "value"
    body["nodes"][0]["prompt"] = "token=abcdefghijkl"
    with pytest.raises(ManifestError) as info:
        project(Manifest.seal(body))
    paths = [f.path for f in info.value.findings]
    assert len(paths) == 2 and all(p.startswith("projection.nodes[") for p in paths), paths
    assert str(info.value) == f"the projection is not secret-free: {paths[0]}"
    assert paths[0] == min(paths)  # the first in document order
