"""The seven steps: what passes, what fails where, and what a failure leaves behind."""

from __future__ import annotations

import hashlib
from typing import Any

import pytest

from fak_core.flow import (
    STEPS,
    ExistingFlow,
    GeneratedFlow,
    GenerationContext,
    Manifest,
    RequirementSpec,
    digest,
    flow_from_dict,
    preflight,
)

from .flowdata import EXAMPLE, example_flow_doc, example_workspace_doc, workspace

REPO = "https://git.example.com/acme/reports.git"
SYSTEM_PROMPT = (
    "You are the ACME platform agent. Internal policy text that never leaves the platform."
)


def run(
    flow_doc: dict[str, Any] | None = None,
    ws: dict[str, Any] | None = None,
    who: str = "alice",
    task: str = "t1",
) -> Any:
    flow = flow_from_dict(flow_doc if flow_doc is not None else example_flow_doc())
    return preflight(ExistingFlow(flow, "v3"), identity=who, workspace=workspace(ws), task_id=task)


def failed_at(outcome: Any) -> tuple[str, set[str]]:
    assert not outcome.ok
    assert outcome.manifest is None
    (step,) = [s for s in outcome.steps if s.status == "failed"]
    return step.step, {f.code for f in step.findings}


def test_example_passes_and_records_every_step() -> None:
    out = run()
    assert out.ok, out.to_dict()
    assert [s.step for s in out.steps] == list(STEPS)
    assert all(s.status == "passed" for s in out.steps)
    assert all(s.checks for s in out.steps)
    body = out.manifest.body
    assert out.manifest.digest == digest(body)
    assert body["repository"] == {
        "url": "https://git.example.com/acme/reports.git",
        "baseline_branch": "main",
    }
    assert [r["name"] for r in body["requirements"]] == ["product", "acceptance"]
    data = (EXAMPLE / "requirements" / "product.md").read_bytes()
    assert body["requirements"][0]["revision"] == "sha256:" + hashlib.sha256(data).hexdigest()
    assert body["snapshot"]["origin"]["kind"] == "existing"
    assert body["snapshot"]["origin"]["version"] == "v3"
    assert [n["id"] for n in body["nodes"]] == ["plan", "implement", "review"]
    review = body["nodes"][2]
    assert review["approval_required"] is True
    assert review["extensions"] == ["issue-tracker@3.1.0"]
    lock = {(e["kind"], e["name"]): e["version"] for e in body["lock"]}
    assert lock[("skill", "planning")] == "1.4.2"  # not the newer 1.5.0
    assert out.private.credentials == {"implement": ("vault://acme/reports/deploy-key",)}


@pytest.mark.fak_theorem("F1.1")
def test_same_inputs_give_the_same_manifest_and_digest() -> None:
    assert run().manifest == run().manifest
    assert run(task="t2").manifest.digest != run().manifest.digest


def test_progress_is_reported_as_steps_run() -> None:
    seen: list[tuple[int, str, str]] = []
    preflight(
        ExistingFlow(flow_from_dict(example_flow_doc())),
        identity="alice",
        workspace=workspace(),
        task_id="t",
        on_progress=lambda n, s, st: seen.append((n, s, st)),
    )
    assert seen[0] == (1, "resolve-inputs", "running")
    assert seen[-1] == (7, "digest", "passed")
    assert len(seen) == 14


def breakages() -> dict[str, tuple[str, str, Any]]:
    """name -> (expected failing step, expected code, mutation of (flow, ws, who))."""

    def flow(f: Any) -> Any:
        return lambda fl, ws, who: (f(fl) or fl, ws, who)

    def wsm(f: Any) -> Any:
        return lambda fl, ws, who: (fl, f(ws) or ws, who)

    def node(i: int, **kw: Any) -> Any:
        return flow(lambda fl: fl["nodes"][i].update(kw))

    def set_versions(name: str, **kw: Any) -> Any:
        def mut(ws: Any) -> None:
            for c in ws["capabilities"]:
                if c["name"] == name:
                    for v in c["versions"]:
                        v.update(kw)

        return wsm(mut)

    return {
        "unknown-user": ("resolve-inputs", "UNKNOWN_USER", lambda fl, ws, who: (fl, ws, "mallory")),
        "unknown-repo": (
            "resolve-inputs",
            "UNKNOWN_REPOSITORY",
            flow(lambda fl: fl["repository"].update(url="https://evil.example/x.git")),
        ),
        "unknown-branch": (
            "resolve-inputs",
            "UNKNOWN_BRANCH",
            flow(lambda fl: fl["repository"].update(baseline_branch="dev")),
        ),
        "missing-requirement": (
            "resolve-inputs",
            "UNKNOWN_REQUIREMENT_SOURCE",
            flow(lambda fl: fl["requirements"][0].update(location="requirements/gone.md")),
        ),
        "unreadable-requirement": (
            "resolve-inputs",
            "REQUIREMENT_NOT_READABLE",
            flow(lambda fl: fl["requirements"][0].update(location="/etc/hostname")),
        ),
        "cycle": (
            "compile",
            "CYCLE",
            node(
                0,
                inputs=[
                    {
                        "name": "product",
                        "sources": ["review.verdict"],
                        "type": "review",
                        "required": True,
                    }
                ],
            ),
        ),
        "illegal-rework": ("compile", "ILLEGAL_REWORK_TARGET", node(0, rework_targets=["review"])),
        "unqualified": (
            "compile",
            "UNQUALIFIED_REFERENCE",
            flow(lambda fl: fl["nodes"][1]["inputs"][0].update(sources=["plan"])),
        ),
        "floating-latest": (
            "reauthorise",
            "FLOATING_REFERENCE",
            node(0, skills=["planning@latest"]),
        ),
        "floating-bare": ("reauthorise", "FLOATING_REFERENCE", node(0, tools=["read_file"])),
        "floating-range": ("reauthorise", "FLOATING_REFERENCE", node(0, skills=["planning@^1.4"])),
        "withdrawn": (
            "reauthorise",
            "VERSION_WITHDRAWN",
            set_versions("python-testing", withdrawn=True),
        ),
        "unknown-version": ("reauthorise", "UNKNOWN_VERSION", node(0, skills=["planning@9.9.9"])),
        "unknown-digest": (
            "reauthorise",
            "UNKNOWN_DIGEST",
            node(0, skills=["planning@sha256:" + "0" * 64]),
        ),
        "unknown-capability": ("reauthorise", "UNKNOWN_CAPABILITY", node(0, tools=["shell@1.0.0"])),
        "revoked-grant": (
            "reauthorise",
            "NOT_AUTHORISED",
            wsm(lambda ws: ws["users"]["alice"].update(grants=["skill:*"])),
        ),
        "repo-access-revoked": (
            "reauthorise",
            "REPOSITORY_NOT_AUTHORISED",
            wsm(lambda ws: ws["users"]["alice"].update(repositories=[])),
        ),
        "model-not-allowed": (
            "reauthorise",
            "MODEL_NOT_ALLOWED",
            node(2, model="some-other-model"),
        ),
        "incompatible": (
            "reauthorise",
            "INCOMPATIBLE_CAPABILITY",
            set_versions("issue-tracker", models=["claude-sonnet-4-5"]),
        ),
        "over-budget": (
            "reauthorise",
            "BUDGET_EXCEEDED",
            flow(lambda fl: fl["policy"]["budget"].update(max_tokens=1000)),
        ),
        "over-workspace-budget": (
            "reauthorise",
            "BUDGET_EXCEEDED",
            wsm(lambda ws: ws["budget"].update(max_tokens=100)),
        ),
        "unbounded": ("reauthorise", "BUDGET_UNBOUNDED", node(1, runtime={"image": "x"})),
        "secret-in-prompt": (
            "freeze",
            "SECRET_IN_MANIFEST",
            node(0, prompt="Read {{product}} with key sk-" + "A1b2" * 8),
        ),
        "secret-key-in-runtime": (
            "freeze",
            "SECRET_IN_MANIFEST",
            node(0, runtime={"max_tokens": 1, "timeout_s": 1, "env": {"GITHUB_TOKEN": "x"}}),
        ),
        "system-prompt-copied": ("freeze", "SECRET_IN_MANIFEST", node(1, prompt=SYSTEM_PROMPT)),
        "gateway-copied": (
            "freeze",
            "SECRET_IN_MANIFEST",
            node(
                1,
                runtime={
                    "max_tokens": 1,
                    "timeout_s": 1,
                    "proxy": "https://mcp.acme.internal/issue-tracker",
                },
            ),
        ),
    }


@pytest.mark.fak_theorem("F1.3")
@pytest.mark.parametrize("name", sorted(breakages()))
def test_each_breakage_fails_at_its_step_and_later_steps_do_not_run(name: str) -> None:
    step, code, mutate = breakages()[name]
    fl, ws, who = mutate(example_flow_doc(), example_workspace_doc(), "alice")
    out = run(fl, ws, who)
    got_step, codes = failed_at(out)
    assert (got_step, code in codes) == (step, True), out.to_dict()
    index = STEPS.index(step)
    assert all(s.status == "passed" for s in out.steps[:index])
    assert all(s.status == "skipped" for s in out.steps[index + 1 :])
    assert out.repair is not None
    assert out.repair.step == step
    assert out.repair.changes
    assert all(":" in c for c in out.repair.changes)


@pytest.mark.fak_theorem("F1.3")
def test_floating_reference_is_never_resolved_nor_substituted() -> None:
    fl = example_flow_doc()
    fl["nodes"][0]["skills"] = ["planning@latest"]
    out = run(fl)
    (finding,) = [f for f in out.steps[4].findings if f.code == "FLOATING_REFERENCE"]
    assert finding.path == "nodes[0].skills[0]"
    assert "1.5.0" not in str(out.to_dict())
    assert "1.4.2" not in str(out.to_dict())


def test_a_digest_reference_locks_its_version() -> None:
    fl = example_flow_doc()
    ws = example_workspace_doc()
    planning = next(c for c in ws["capabilities"] if c["name"] == "planning")
    dig = planning["versions"][1]["digest"]
    fl["nodes"][0]["skills"] = [f"planning@{dig}"]
    out = run(fl, ws)
    assert out.ok
    (entry,) = [e for e in out.manifest.body["lock"] if e["name"] == "planning"]
    assert (entry["version"], entry["digest"]) == ("1.5.0", dig)


def test_lock_holds_exactly_what_the_flow_names() -> None:
    out = run()
    fl = flow_from_dict(example_flow_doc())
    named = {(r.kind, r.name) for n in fl.nodes for r in n.capability_refs()}
    assert {(e["kind"], e["name"]) for e in out.manifest.body["lock"]} == named


def test_risk_explains_but_never_blocks() -> None:
    fl = example_flow_doc()
    ws = example_workspace_doc()
    ws["capabilities"].append(
        {
            "kind": "tool",
            "name": "shell_exec",
            "versions": [{"version": "1.0.0", "digest": "sha256:" + "1" * 64, "risk": "critical"}],
        }
    )
    ws["users"]["alice"]["grants"].append("tool:shell_exec")
    fl["nodes"][1]["tools"].append("shell_exec@1.0.0")
    out = run(fl, ws)
    assert out.ok
    risk = out.manifest.body["risk"]
    assert risk["level"] == "critical"
    assert risk["approval_required"] is True
    implement = next(n for n in risk["nodes"] if n["node"] == "implement")
    assert implement["approval_required"]
    assert implement["confidence"] == 0.9  # 4 of 5 levels declared
    assert out.manifest.node("implement")["approval_required"] is True
    assert out.manifest.node("plan")["approval_required"] is False


def _generated(hook: Any, repo: str = REPO) -> GeneratedFlow:
    reqs = flow_from_dict(example_flow_doc()).requirements
    return GeneratedFlow("planner-agent", hook, repo, "main", reqs)


def test_generated_flow_records_its_origin_and_sees_only_resolved_inputs() -> None:
    contexts: list[GenerationContext] = []

    def hook(ctx: GenerationContext) -> dict[str, Any]:
        contexts.append(ctx)
        return example_flow_doc()

    out = preflight(_generated(hook), identity="alice", workspace=workspace(), task_id="g")
    assert out.ok
    assert out.manifest.body["snapshot"]["origin"]["kind"] == "generated"
    assert out.manifest.body["snapshot"]["origin"]["generator"] == "planner-agent"
    (ctx,) = contexts
    assert ctx.identity == "alice"
    assert ctx.baseline_branch == "main"
    assert "skill:planning" in ctx.capabilities


@pytest.mark.parametrize(
    ("hook", "code"),
    [
        (lambda ctx: 1 / 0, "GENERATOR_FAILED"),
        (lambda ctx: {"name": "x"}, "FLOW_INVALID"),
        (lambda ctx: {**example_flow_doc(), "requirements": []}, "FLOW_INPUT_MISMATCH"),
        (
            lambda ctx: {
                **example_flow_doc(),
                "repository": {"url": REPO, "baseline_branch": "rc"},
            },
            "FLOW_INPUT_MISMATCH",
        ),
    ],
)
def test_generator_problems_fail_step_two(hook: Any, code: str) -> None:
    out = preflight(_generated(hook), identity="alice", workspace=workspace(), task_id="g")
    assert failed_at(out) == ("determine-flow", {code})


def test_workspace_and_flow_files_that_do_not_load_fail_step_one(tmp_path: Any) -> None:
    bad = tmp_path / "ws.yaml"
    bad.write_text("name: acme\nusers: [1, 2]\n")
    out = preflight(
        ExistingFlow(EXAMPLE / "flow.yaml"), identity="alice", workspace=bad, task_id="t"
    )
    assert failed_at(out) == ("resolve-inputs", {"WORKSPACE_INVALID"})
    bad_flow = tmp_path / "f.json"
    bad_flow.write_text('{"name": "x", "repository": 3}')
    ws_file = EXAMPLE / "workspace.yaml"
    out = preflight(ExistingFlow(bad_flow), identity="alice", workspace=ws_file, task_id="t")
    step, codes = failed_at(out)
    assert (step, codes) == ("resolve-inputs", {"FLOW_INVALID"})
    assert out.repair.reason.startswith(str(bad_flow) + ": ")  # names the file, then the path


def test_manifest_round_trips_through_its_file_form() -> None:
    m = run().manifest
    again = Manifest.from_json(m.to_json())
    assert again == m
    assert again.computed_digest() == m.digest


def test_requirement_spec_is_part_of_the_generated_context() -> None:
    reqs = (RequirementSpec("product", "requirements/product.md", "requirements", "markdown"),)
    seen: list[tuple[RequirementSpec, ...]] = []

    def hook(ctx: GenerationContext) -> dict[str, Any]:
        seen.append(ctx.requirements)
        doc = example_flow_doc()
        doc["requirements"] = doc["requirements"][:1]
        doc["nodes"][2]["inputs"] = doc["nodes"][2]["inputs"][:1]
        doc["nodes"][2]["prompt"] = "Review {{patch}}."
        return doc

    gen = GeneratedFlow("g", hook, "https://git.example.com/acme/reports.git", "main", reqs)
    out = preflight(gen, identity="alice", workspace=workspace(), task_id="g")
    assert out.ok, out.to_dict()
    assert seen == [reqs]
