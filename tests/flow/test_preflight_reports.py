"""What a user reads after preflight and launch: the outcome's JSON form (what ``fak flow
preflight`` prints), the repair's changes with the hint for each finding's code, and a task
record's JSON form with the resources a passed preflight gets.

The oracles are this file's own: the keys of each JSON form spelled out from the theorem,
a hand-written table of the hint each reached finding code carries, and the example flow's
node ids and credential reference written out.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from fak_core.flow import (
    STEPS,
    ExistingFlow,
    FileFetcher,
    Finding,
    Manifest,
    RecordingResources,
    StepResult,
    flow_from_dict,
    launch_task,
    preflight,
    repair_hint,
)

from .flowdata import EXAMPLE, example_flow_doc, example_workspace_doc, workspace
from .test_preflight import breakages

#: The hint written for each code the breakages reach (hand-copied, not read from the module).
HINTS = {
    "UNKNOWN_USER": "run preflight as a user listed in the workspace file",
    "UNKNOWN_REPOSITORY": "use a repository the workspace declares, or add it to the workspace",
    "UNKNOWN_BRANCH": "pick a baseline branch the repository has",
    "UNKNOWN_REQUIREMENT_SOURCE": "point the requirement at a location that exists",
    "REQUIREMENT_NOT_READABLE": "ask for read access to the requirement source, or drop it",
    "MISSING_SOURCE": "give the input exactly one source: node_id.output or requirement:name",
    "UNQUALIFIED_REFERENCE": "write the source as node_id.output_name or requirement:name",
    "UNKNOWN_SOURCE": "reference a node output or requirement that the flow declares",
    "CYCLE": "break the dependency cycle; use a rework target to send work back upstream",
    "ILLEGAL_REWORK_TARGET": "a rework target must be a node upstream of this one",
    "TYPE_MISMATCH": "make the input type equal to the type of the artifact it reads",
    "IMPLICIT_DEPENDENCY": "declare the placeholder as an input with a qualified source",
    "UNKNOWN_PLACEHOLDER": "declare an input with that name or remove the placeholder",
    "FLOATING_REFERENCE": "pin an exact version (name@1.2.3) or digest (name@sha256:...)",
    "UNKNOWN_CAPABILITY": "use a capability the workspace provides",
    "UNKNOWN_VERSION": "pin a version the workspace provides",
    "VERSION_WITHDRAWN": "pin a version that has not been withdrawn",
    "UNKNOWN_DIGEST": "pin a digest the workspace lists for this capability",
    "NOT_AUTHORISED": "ask for a grant for this capability, or remove it from the node",
    "REPOSITORY_NOT_AUTHORISED": "ask for access to the repository or use one you may use",
    "MODEL_NOT_ALLOWED": "choose a main agent model the workspace allows",
    "INCOMPATIBLE_CAPABILITY": "choose a capability version that supports the node's model",
    "BUDGET_EXCEEDED": "lower the node token limits or the flow budget to fit the limit",
    "BUDGET_UNBOUNDED": "set runtime.max_tokens and runtime.timeout_s on the node",
    "SECRET_IN_MANIFEST": "remove the secret-shaped value; credentials are injected at run time",
    "GENERATOR_FAILED": "fix the flow generator, or choose an existing flow version",
    "FLOW_INVALID": "fix the flow document at the path named",
    "WORKSPACE_INVALID": "fix the workspace file at the path named",
    "FLOW_INPUT_MISMATCH": "a generated flow must keep the task's repository and requirements",
    "DIGEST_MISMATCH": "the manifest changed after preflight; run preflight again",
}
GENERIC = "see the finding message"
NODES = ["plan", "implement", "review"]  # the example flow's nodes, in plan order
CREDENTIALS = ("vault://acme/reports/deploy-key",)  # the example flow's one credential reference


def _finding_json(f: Finding) -> dict[str, Any]:
    return {"code": f.code, "path": f.path, "message": f.message}


def _step_json(s: StepResult) -> dict[str, Any]:
    return {
        "step": s.step,
        "number": s.number,
        "status": s.status,
        "checks": list(s.checks),
        "findings": [_finding_json(f) for f in s.findings],
        "detail": s.detail,
    }


def _outcome_json(out: Any) -> dict[str, Any]:
    r = out.repair
    return {
        "ok": out.manifest is not None and r is None,
        "digest": out.manifest.digest if out.manifest is not None else None,
        "steps": [_step_json(s) for s in out.steps],
        "repair": None
        if r is None
        else {"step": r.step, "number": r.number, "reason": r.reason, "changes": list(r.changes)},
    }


def _broken(name: str) -> tuple[str, Any]:
    step, _, mutate = breakages()[name]
    fl, ws, who = mutate(example_flow_doc(), example_workspace_doc(), "alice")
    out = preflight(
        ExistingFlow(flow_from_dict(fl), "v3"), identity=who, workspace=workspace(ws), task_id="t"
    )
    return step, out


@pytest.mark.fak_theorem("F1.3")
@pytest.mark.parametrize("name", sorted(breakages()))
def test_a_failed_outcome_reports_every_step_and_the_change_for_each_finding(name: str) -> None:
    step, out = _broken(name)
    assert out.ok is False
    doc = out.to_dict()
    assert doc == _outcome_json(out)
    assert doc["ok"] is False and doc["digest"] is None
    assert json.loads(json.dumps(doc)) == doc  # what the CLI prints is plain JSON
    (failed,) = [s for s in out.steps if s.status == "failed"]
    assert failed.step == step and failed.ok is False
    assert [s.ok for s in out.steps] == [s.status == "passed" for s in out.steps]
    assert set(out.repair.changes) == {
        f"{f.path or step}: {HINTS[f.code]}" for f in failed.findings
    }


@pytest.mark.fak_theorem("F1.3")
def test_a_passed_outcome_reports_its_digest_and_every_step_with_its_result() -> None:
    out = preflight(
        ExistingFlow(flow_from_dict(example_flow_doc()), "v3"),
        identity="alice",
        workspace=workspace(),
        task_id="t",
    )
    assert out.ok is True
    assert all(s.ok for s in out.steps)
    doc = out.to_dict()
    assert doc == _outcome_json(out)
    assert (doc["ok"], doc["digest"], doc["repair"]) == (True, out.manifest.digest, None)
    assert [s["step"] for s in doc["steps"]] == list(STEPS)
    assert json.loads(json.dumps(doc)) == doc


@pytest.mark.fak_theorem("F1.3")
@pytest.mark.parametrize("code", sorted(HINTS))
def test_each_code_has_its_hint_and_an_unknown_one_the_generic_hint(code: str) -> None:
    assert repair_hint(code) == HINTS[code]
    assert repair_hint(code + "_X") == GENERIC
    assert repair_hint("REQUIREMENT_CHANGED") == GENERIC  # a runner's code, never a repair's


def _launch(resources: RecordingResources, **kw: Any) -> Any:
    return launch_task(
        ExistingFlow(flow_from_dict(kw.pop("flow", example_flow_doc()))),
        identity=kw.pop("identity", "alice"),
        workspace=workspace(),
        task_id="task-1",
        resources=resources,
        fetcher=FileFetcher(EXAMPLE),
        **kw,
    )


@pytest.mark.fak_theorem("F1.3")
def test_a_passed_task_gets_its_sandbox_secret_and_one_service_per_node() -> None:
    resources = RecordingResources()
    record = _launch(resources)
    assert record.status == "running"
    manifest = record.preflight.manifest
    assert [(r.kind, r.name) for r in resources.created] == [
        ("sandbox", "sandbox-task-1"),
        ("task-secret", "secret-task-1"),
        *(("service", f"svc-task-1-{n}") for n in NODES),
    ]
    assert Manifest.from_json(resources.mounted["task-1"]) == manifest
    assert resources.secrets["task-1"] == CREDENTIALS
    assert record.repair is None
    assert record.to_dict() == {
        "task_id": "task-1",
        "status": "running",
        "preflight": _outcome_json(record.preflight),
        "spec": {
            "task_id": "task-1",
            "manifest": "manifest://task-1",
            "manifest_digest": manifest.digest,
        },
        "refusal": [],
    }


@pytest.mark.fak_theorem("F1.3")
def test_a_failed_or_refused_task_record_reports_why() -> None:
    record = _launch(RecordingResources(), identity="mallory")
    assert record.repair is record.preflight.repair and record.repair is not None
    assert record.to_dict() == {
        "task_id": "task-1",
        "status": "preflight-failed",
        "preflight": _outcome_json(record.preflight),
        "spec": None,
        "refusal": [],
    }
    good = preflight(
        ExistingFlow(flow_from_dict(example_flow_doc())),
        identity="alice",
        workspace=workspace(),
        task_id="task-1",
    )
    altered = good.manifest.to_json().replace("Review {{patch}}", "Approve {{patch}}")
    record = _launch(RecordingResources(), mounted=altered.encode())
    assert record.status == "runner-refused"
    doc = record.to_dict()
    assert doc["refusal"] == [_finding_json(f) for f in record.refusal]
    assert {f["code"] for f in doc["refusal"]} == {"DIGEST_MISMATCH"}
    assert doc["spec"] == {
        "task_id": "task-1",
        "manifest": "manifest://task-1",
        "manifest_digest": good.manifest.digest,
    }
