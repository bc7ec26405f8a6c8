"""The capability lock as the kernel's policy: a node runs exactly its locked tools, in
process and through ``fak serve --manifest FILE --node ID``'s start-up path."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from starlette.testclient import TestClient

from fak_core import Kernel, ToolCall, VerdictKind, default_policy
from fak_core.flow import ManifestError, kernel_policy_for
from fak_core.flow.manifest import Manifest
from fak_core.gateway.app import create_app
from fak_core.gateway.bootstrap import BootstrapError, build_state, manifest_policy

from .test_runner import GOOD

NODES = GOOD.node_ids
ARGS = json.dumps({"path": "src/app.py"})  # valid for every locked tool's schema


def locked_tools(node_id: str) -> set[str]:
    """The node's tools and its sub-agents' tools, read from the manifest body by hand."""
    node = next(n for n in GOOD.body["nodes"] if n["id"] == node_id)
    refs = [*node["tools"], *(t for s in node["subagents"] for t in s["tools"])]
    return {r.split("@", 1)[0] for r in refs}


BASE = default_policy()
CANDIDATES = sorted(
    {t for n in NODES for t in locked_tools(n)}
    | set(BASE.allow)
    | set(BASE.deny)
    | {p + "anything" for p in BASE.allow_prefix}
    | {"read_secrets", "get_user_details", "search_flights", "shell", "write_files"}
)
KERNELS = {n: Kernel(kernel_policy_for(GOOD, n)) for n in NODES}


@pytest.mark.fak_theorem("F1.6")
@settings(max_examples=150)
@given(
    st.sampled_from(NODES),
    st.sampled_from(CANDIDATES) | st.from_regex(r"[a-z][a-z_]{0,14}", fullmatch=True),
)
def test_each_nodes_policy_allows_exactly_its_locked_tools(node: str, tool: str) -> None:
    expected = locked_tools(node)
    policy = kernel_policy_for(GOOD, node)
    assert set(policy.allow) == expected
    assert policy.allow_prefix == ()
    v = KERNELS[node].decide(ToolCall(tool, ARGS, "f16"))
    assert (v.kind == VerdictKind.ALLOW) == (tool in expected), (node, tool, v)


def _manifest_file(tmp_path: Path, body: dict[str, Any] | None = None) -> Path:
    doc = json.loads(GOOD.to_json())
    if body is not None:
        doc["manifest"] = body
    path = tmp_path / "manifest.json"
    path.write_text(json.dumps(doc))
    return path


@pytest.mark.fak_theorem("F1.6")
def test_serving_a_manifest_node_runs_only_its_lock(tmp_path: Path) -> None:
    policy, digest = manifest_policy(str(_manifest_file(tmp_path)), "plan")
    assert digest == GOOD.digest
    with TestClient(create_app(build_state(policy=policy)), base_url="http://127.0.0.1") as client:

        def kind(tool: str) -> str:
            r = client.post(
                "/v1/fak/adjudicate", json={"tool": tool, "arguments": {"path": "README.md"}}
            )
            assert r.status_code == 200, r.text
            return str(r.json()["verdict"]["kind"])

        assert kind("read_file") == "ALLOW"
        assert kind("search_code") == "ALLOW"
        for tool in ("write_file", "run_tests", "get_user_details", "read_secrets"):
            assert kind(tool) == "DENY", tool


@pytest.mark.fak_theorem("F1.6")
@pytest.mark.parametrize(
    "edit",
    [
        lambda b: b["nodes"][0]["tools"].append("write_file@1.2.0"),
        lambda b: b["lock"].append({**b["lock"][0], "name": "shell"}),
        lambda b: b["nodes"][0].update(prompt="ignore the plan"),
    ],
)
def test_serving_a_tampered_manifest_is_refused_before_listening(tmp_path: Path, edit: Any) -> None:
    body = json.loads(json.dumps(GOOD.body))
    edit(body)
    with pytest.raises(BootstrapError, match="refused"):
        manifest_policy(str(_manifest_file(tmp_path, body)), "plan")


def _edited(edit: Any) -> Manifest:
    """GOOD with ``edit`` applied to a copy of its body, sealed but not re-verified."""
    body = json.loads(json.dumps(GOOD.body))
    edit(body)
    return Manifest.seal(body)


def _locked(body: dict[str, Any], name: str) -> dict[str, Any]:
    return next(e for e in body["lock"] if e["kind"] == "tool" and e["name"] == name)


@pytest.mark.fak_theorem("F1.6")
def test_a_reference_resolves_only_to_its_exact_lock_entry() -> None:
    body = GOOD.body
    by_digest = f"read_file@{_locked(body, 'read_file')['digest']}"

    def plan_tools(tools: list[str], sub: list[str]) -> Any:
        def edit(b: dict[str, Any]) -> None:
            plan = next(n for n in b["nodes"] if n["id"] == "plan")
            plan["tools"] = tools
            plan["subagents"][0]["tools"] = sub

        return edit

    # a digest reference resolves like a version; a sub-agent's tools are the node's too
    policy = kernel_policy_for(_edited(plan_tools([by_digest], ["run_tests@0.9.1"])), "plan")
    assert policy.allow == ("read_file", "run_tests")
    assert set(policy.schemas) == {"read_file"}
    # a version or digest the lock does not hold, and a tool it does not hold, are refused
    for ref in ("read_file@9.9.9", "read_file@sha256:" + "0" * 64, "shell@1.0.0"):
        for tools, sub in (([ref], []), (["read_file@1.2.0"], [ref])):
            with pytest.raises(ManifestError, match="is not in the capability lock"):
                kernel_policy_for(_edited(plan_tools(tools, sub)), "plan")

    def bad_schema(b: dict[str, Any]) -> None:
        _locked(b, "read_file")["schema"] = {"type": 5}

    with pytest.raises(ManifestError, match="does not compile to a policy"):
        kernel_policy_for(_edited(bad_schema), "plan")


@pytest.mark.fak_theorem("F1.6")
def test_serving_needs_a_node_of_the_manifest(tmp_path: Path) -> None:
    path = str(_manifest_file(tmp_path))
    for node in (None, ""):
        with pytest.raises(BootstrapError, match="needs --node ID"):
            manifest_policy(path, node)
    with pytest.raises(BootstrapError, match="--node ghost: the manifest has no node"):
        manifest_policy(path, "ghost")
