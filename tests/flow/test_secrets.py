"""Secret-freedom: generated secrets never survive into a manifest, a projection or a finding."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fak_core.flow import (
    PRIVATE_LAYER_NOTE,
    ExistingFlow,
    Manifest,
    ManifestError,
    flow_from_dict,
    preflight,
    project,
    scan,
)

from .flowdata import example_flow_doc, example_workspace_doc, workspace

SECRETS = st.one_of(
    st.from_regex(r"sk-[A-Za-z0-9]{24,32}", fullmatch=True),
    st.from_regex(r"AKIA[0-9A-Z]{16}", fullmatch=True),
    st.from_regex(r"ghp_[A-Za-z0-9]{36}", fullmatch=True),
    st.from_regex(r"xoxb-[A-Za-z0-9]{12,20}", fullmatch=True),
    st.from_regex(r"vault://[a-z]{3,8}/[a-z]{3,8}/[a-z]{3,8}", fullmatch=True),
    st.from_regex(r"Bearer [A-Za-z0-9]{20,30}", fullmatch=True),
    st.from_regex(
        r"eyJ[A-Za-z0-9]{10,16}\.eyJ[A-Za-z0-9]{10,16}\.[A-Za-z0-9_]{10,16}", fullmatch=True
    ),
    st.from_regex(r"https://bot:[a-z0-9]{8,12}@git\.example\.com/x", fullmatch=True),
)
SECRET_KEYS = st.sampled_from(
    ["api_key", "GITHUB_TOKEN", "password", "auth", "gateway_url", "system_prompt", "clientSecret"]
)

# Where a secret is put: in the flow (must make preflight refuse) or in the private layer
# (credential references, extension auth, gateway, system prompt: must pass, never copied).
REFUSED = ("prompt", "runtime-value", "runtime-key", "subagent-name", "output-format")
PRIVATE = ("credentials", "workspace-auth", "workspace-gateway", "system-prompt")


def place(where: str, secret: str, key: str, node: int) -> tuple[Any, Any]:
    fl, ws = example_flow_doc(), example_workspace_doc()
    n = fl["nodes"][node]
    if where == "prompt":
        n["prompt"] += " Use " + secret
    elif where == "runtime-value":
        n["runtime"]["note"] = secret
    elif where == "runtime-key":
        n["runtime"][key] = "value-of-the-field"
    elif where == "subagent-name":
        n["subagents"] = [{"name": secret, "inherits": ["model"]}]
    elif where == "output-format":
        n["outputs"][0]["format"] = secret
        for other in fl["nodes"]:
            for inp in other["inputs"]:
                if inp["sources"] == [f"{n['id']}.{n['outputs'][0]['name']}"]:
                    inp["format"] = secret
    elif where == "credentials":
        n["credentials"] = [secret]
    elif where == "workspace-auth":
        cap = next(c for c in ws["capabilities"] if c["kind"] == "extension")
        cap["auth"] = {"type": "token", "value": secret}
    elif where == "workspace-gateway":
        next(c for c in ws["capabilities"] if c["kind"] == "extension")["gateway"] = secret
    else:
        ws["platform"]["system_prompt"] = "Platform rules. " + secret
    return fl, ws


@pytest.mark.fak_theorem("F1.4")
@settings(max_examples=120, deadline=None)
@given(SECRETS, st.sampled_from(REFUSED + PRIVATE), SECRET_KEYS, st.integers(0, 2))
def test_generated_secrets_never_survive(secret: str, where: str, key: str, node: int) -> None:
    fl, ws = place(where, secret, key, node)
    out = preflight(
        ExistingFlow(flow_from_dict(fl)), identity="alice", workspace=workspace(ws), task_id="t"
    )
    report = json.dumps(out.to_dict())
    assert secret not in report  # findings name the path and the kind, never the value
    if where in PRIVATE:
        assert out.ok, out.to_dict()
        assert out.manifest is not None
        text = out.manifest.to_json()
        assert secret not in text
        assert secret not in json.dumps(project(out.manifest))
    else:
        assert not out.ok
        failed = [s for s in out.steps if s.status == "failed"]
        assert [s.step for s in failed] == ["freeze"]
        assert {f.code for f in failed[0].findings} == {"SECRET_IN_MANIFEST"}


@pytest.mark.fak_theorem("F1.4")
def test_projection_shows_agent_evidence_and_only_a_note_for_the_private_layer() -> None:
    out = preflight(
        ExistingFlow(flow_from_dict(example_flow_doc())),
        identity="alice",
        workspace=workspace(),
        task_id="t",
    )
    assert out.manifest is not None
    view = project(out.manifest)
    plan, implement, review = view["nodes"]
    assert plan["main_agent"]["model"] == "claude-sonnet-4-5"
    assert plan["main_agent"]["runtime"]["image"] == "python:3.12-slim"
    assert plan["prompt"] == "Read {{product}} and write an implementation plan."
    assert plan["subagents"] == [
        {"name": "code-scout", "inherits": ["model", "tools"], "skills": [], "tools": []}
    ]
    assert [(s["name"], s["version"]) for s in plan["skills"]] == [("planning", "1.4.2")]
    assert all(s["digest"].startswith("sha256:") for s in plan["skills"])
    assert [(e["name"], e["version"]) for e in review["extensions"]] == [("issue-tracker", "3.1.0")]
    assert all(n["private_execution_layer"] == PRIVATE_LAYER_NOTE for n in view["nodes"])
    text = json.dumps(view)
    ws = example_workspace_doc()
    for private in (
        ws["platform"]["system_prompt"],
        ws["platform"]["gateway"],
        "https://mcp.acme.internal/issue-tracker",
        "vault://",
    ):
        assert private not in text
    assert implement["approval_required"] is False
    assert review["approval_required"] is True


@pytest.mark.fak_theorem("F1.4")
def test_projection_refuses_a_manifest_with_a_secret() -> None:
    out = preflight(
        ExistingFlow(flow_from_dict(example_flow_doc())),
        identity="alice",
        workspace=workspace(),
        task_id="t",
    )
    assert out.manifest is not None
    body = json.loads(json.dumps(out.manifest.body))
    body["nodes"][0]["prompt"] = "token=abcdefghijkl"
    with pytest.raises(ManifestError, match="not secret-free"):
        project(Manifest.seal(body))


@pytest.mark.fak_theorem("F1.4")
@pytest.mark.parametrize(
    ("doc", "flagged"),
    [
        ({"max_tokens": 5, "timeout_s": 3, "prompt": "count the tokens"}, False),
        ({"env": {"OPENAI_API_KEY": "x"}}, True),
        ({"privateKey": "x"}, True),
        ({"note": "see vault://team/db"}, True),
        ({"note": "${{ secrets.DEPLOY }}"}, True),
        ({"u": "https://git.example.com/acme/reports.git"}, False),
        ({"u": "https://user:hunter22@git.example.com/r.git"}, True),
        ({"items": ["-----BEGIN RSA PRIVATE KEY-----"]}, True),
    ],
)
def test_scanner_examples(doc: dict[str, Any], flagged: bool) -> None:
    assert bool(scan(doc)) is flagged


def _private_values() -> list[str]:
    ws = example_workspace_doc()
    ext = next(c for c in ws["capabilities"] if c["kind"] == "extension")
    return [ws["platform"]["system_prompt"], ws["platform"]["gateway"], ext["gateway"]]


@pytest.mark.fak_theorem("F1.4")
@settings(max_examples=40, deadline=None)
@given(
    st.sampled_from(_private_values()),
    st.sampled_from(["prompt", "runtime-value", "runtime-nested"]),
    st.integers(0, 2),
)
def test_private_layer_values_copied_into_the_flow_are_refused(
    private: str, where: str, node: int
) -> None:
    """Values only the private execution layer may hold (the platform system prompt, gateway
    addresses) are refused when a flow copies them, though they match no secret shape."""
    assert not scan({"v": private})  # nothing but the private-value list can catch these
    fl = example_flow_doc()
    n = fl["nodes"][node]
    if where == "prompt":
        n["prompt"] += " Context: " + private
    elif where == "runtime-value":
        n["runtime"]["note"] = private
    else:
        n["runtime"]["env"] = {"UPSTREAM": [private]}
    out = preflight(
        ExistingFlow(flow_from_dict(fl)), identity="alice", workspace=workspace(), task_id="t"
    )
    assert not out.ok
    failed = [s for s in out.steps if s.status == "failed"]
    assert [s.step for s in failed] == ["freeze"], out.to_dict()
    assert {f.code for f in failed[0].findings} == {"SECRET_IN_MANIFEST"}
    assert private not in json.dumps(out.to_dict())
