"""F1.3 key by key: what re-authorisation locks, where its budget limits fall, that it
reports every reference that fails (not only the first), that it re-checks the risk and
the repository, and the shape of a failed preflight's record.

The oracles are the flow and workspace documents themselves: the expected lock entries,
budget sums and finding paths are read from them, never from preflight's own output.
"""

from __future__ import annotations

import dataclasses
import importlib
from typing import Any
from unittest import mock

import pytest

from fak_core.flow import STEPS, ExistingFlow, flow_from_dict, preflight

from .flowdata import example_flow_doc, example_workspace_doc, workspace
from .test_preflight import breakages, run

REAUTH = STEPS.index("reauthorise")
preflight_module = importlib.import_module("fak_core.flow.preflight")


def _expected_lock(fl: dict[str, Any], ws: dict[str, Any]) -> list[dict[str, Any]]:
    caps = {(c["kind"], c["name"]): c for c in ws["capabilities"]}
    entries: dict[tuple[str, str, str], dict[str, Any]] = {}
    holders = [*fl["nodes"], *(s for n in fl["nodes"] for s in n.get("subagents", []))]
    for holder in holders:
        for field, kind in (("skills", "skill"), ("extensions", "extension"), ("tools", "tool")):
            for ref in holder.get(field, []):
                name, pin = ref.split("@", 1)
                v = next(
                    v for v in caps[(kind, name)]["versions"] if pin in (v["version"], v["digest"])
                )
                entry = {"kind": kind, "name": name, "version": v["version"], "digest": v["digest"]}
                if kind == "tool" and "schema" in v:
                    entry["schema"] = v["schema"]
                entries[(kind, name, v["version"])] = entry
    return [entries[k] for k in sorted(entries)]


def _sums(fl: dict[str, Any]) -> tuple[int, int]:
    nodes = fl["nodes"]
    return (
        sum(n["runtime"].get("max_tokens", 0) for n in nodes),
        sum(n["runtime"].get("timeout_s", 0) for n in nodes),
    )


@pytest.mark.fak_theorem("F1.3")
@pytest.mark.parametrize("skill_schema", [False, True])
def test_the_lock_is_exactly_the_named_versions_as_the_workspace_lists_them(
    skill_schema: bool,
) -> None:
    fl, ws = example_flow_doc(), example_workspace_doc()
    if skill_schema:  # a schema only ever travels with a tool
        ws["capabilities"][0]["versions"][0]["schema"] = {"type": "object"}
    out = run(fl, ws)
    assert out.ok, out.to_dict()
    lock = _expected_lock(fl, ws)
    assert out.manifest.body["lock"] == lock
    tokens, runtime = _sums(fl)
    assert out.steps[REAUTH].detail == {
        "locked": [f"{e['kind']}:{e['name']}@{e['version']}" for e in lock],
        "budget": {"tokens": tokens, "runtime_s": runtime},
    }


def _budget_case(
    fl: dict[str, Any], ws: dict[str, Any], what: str, flow_off: int, ws_off: int
) -> str:
    key, ws_key = {
        "tokens": ("max_tokens", "max_tokens"),
        "runtime": ("max_runtime_s", "max_runtime_s"),
    }[what]
    used = _sums(fl)[0 if what == "tokens" else 1]
    fl["policy"]["budget"][key] = used + flow_off
    ws["budget"][ws_key] = used + flow_off + ws_off
    return f"policy.budget.{key}"


@pytest.mark.fak_theorem("F1.3")
@pytest.mark.parametrize("what", ["tokens", "runtime"])
@pytest.mark.parametrize(
    ("flow_off", "ws_off", "over"), [(0, 0, 0), (-1, 0, 1), (0, -1, 1), (-1, -1, 2), (5, 0, 0)]
)
def test_budget_limits_are_inclusive(what: str, flow_off: int, ws_off: int, over: int) -> None:
    fl, ws = example_flow_doc(), example_workspace_doc()
    path = _budget_case(fl, ws, what, flow_off, ws_off)
    out = run(fl, ws)
    if not over:
        assert out.ok, out.to_dict()
        return
    findings = out.steps[REAUTH].findings
    assert out.steps[REAUTH].status == "failed"
    assert [(f.code, f.path) for f in findings] == [("BUDGET_EXCEEDED", path)] * over
    label = {"tokens": "tokens", "runtime": "runtime seconds"}[what]
    assert all(f" {label}" in f.message for f in findings), findings


@pytest.mark.fak_theorem("F1.3")
@pytest.mark.parametrize(("key", "index"), [("max_tokens", 0), ("timeout_s", 1)])
@pytest.mark.parametrize("short", [0, 1])
def test_a_node_without_a_limit_is_unbounded_and_counts_nothing(
    key: str, index: int, short: int
) -> None:
    fl, ws = example_flow_doc(), example_workspace_doc()
    del fl["nodes"][1]["runtime"][key]
    limit_key = ("max_tokens", "max_runtime_s")[index]
    fl["policy"]["budget"][limit_key] = _sums(fl)[index] - short  # what the others need
    out = run(fl, ws)
    findings = out.steps[REAUTH].findings
    expected = [("BUDGET_UNBOUNDED", f"nodes[1].runtime.{key}")]
    if short:
        expected.insert(0, ("BUDGET_EXCEEDED", f"policy.budget.{limit_key}"))
    assert [(f.code, f.path) for f in findings] == expected


@pytest.mark.fak_theorem("F1.3")
def test_a_repository_the_user_may_not_use_is_named() -> None:
    ws = example_workspace_doc()
    ws["users"]["alice"]["repositories"] = ["https://git.example.com/other/*"]
    out = run(example_flow_doc(), ws)
    assert [(f.code, f.path) for f in out.steps[REAUTH].findings] == [
        ("REPOSITORY_NOT_AUTHORISED", "repository.url")
    ]


def _set_versions(ws: dict[str, Any], name: str, **kw: Any) -> None:
    for c in ws["capabilities"]:
        if c["name"] == name:
            for v in c["versions"]:
                v.update(kw)


FIRST: dict[str, tuple[Any, tuple[str, str]]] = {
    "floating": (
        lambda fl, ws: fl["nodes"][0].update(skills=["planning@latest"]),
        ("FLOATING_REFERENCE", "nodes[0].skills[0]"),
    ),
    "unknown-capability": (
        lambda fl, ws: fl["nodes"][0].update(tools=["shell@1.0.0", "search_code@1.0.3"]),
        ("UNKNOWN_CAPABILITY", "nodes[0].tools[0]"),
    ),
    "unknown-version": (
        lambda fl, ws: fl["nodes"][0].update(skills=["planning@9.9.9"]),
        ("UNKNOWN_VERSION", "nodes[0].skills[0]"),
    ),
    "unknown-digest": (
        lambda fl, ws: fl["nodes"][0].update(skills=["planning@sha256:" + "0" * 64]),
        ("UNKNOWN_DIGEST", "nodes[0].skills[0]"),
    ),
    "withdrawn": (
        lambda fl, ws: _set_versions(ws, "python-testing", withdrawn=True),
        ("VERSION_WITHDRAWN", "nodes[1].skills[0]"),
    ),
    "not-granted": (
        lambda fl, ws: ws["users"]["alice"]["grants"].remove("tool:search_code"),
        ("NOT_AUTHORISED", "nodes[0].tools[1]"),
    ),
    "incompatible": (
        lambda fl, ws: _set_versions(ws, "planning", models=["gpt-5"]),
        ("INCOMPATIBLE_CAPABILITY", "nodes[0].skills[0]"),
    ),
}


@pytest.mark.fak_theorem("F1.3")
@pytest.mark.parametrize("first", sorted(FIRST))
def test_every_failing_reference_is_reported_not_only_the_first(first: str) -> None:
    fl, ws = example_flow_doc(), example_workspace_doc()
    edit, expected = FIRST[first]
    edit(fl, ws)
    _set_versions(ws, "issue-tracker", withdrawn=True)  # the last reference the step reads
    out = run(fl, ws)
    got = {(f.code, f.path) for f in out.steps[REAUTH].findings}
    assert {expected, ("VERSION_WITHDRAWN", "nodes[2].extensions[0]")} <= got, got
    assert all(f.message for f in out.steps[REAUTH].findings)


@pytest.mark.fak_theorem("F1.3")
@pytest.mark.parametrize("models", [["claude-sonnet-4-5"], []])
def test_a_model_the_workspace_does_not_allow_is_named_with_the_allowed_ones(
    models: list[str],
) -> None:
    fl, ws = example_flow_doc(), example_workspace_doc()
    ws["models"] = models
    _set_versions(ws, "issue-tracker", models=[])
    out = run(fl, ws)
    bad = [f for f in out.steps[REAUTH].findings if f.code == "MODEL_NOT_ALLOWED"]
    assert [f.path for f in bad] == [
        f"nodes[{i}].model" for i, n in enumerate(fl["nodes"]) if n["model"] not in models
    ]
    listed = ", ".join(models) or "(none listed)"
    assert all(f.message.endswith(f"use one of: {listed}") for f in bad)


class _Vanishing:
    """A workspace whose repository (or its baseline branch) is gone by the time
    re-authorisation reads it again (it was there when the inputs were resolved)."""

    def __init__(self, inner: Any, how: str) -> None:
        self._inner, self._how, self._calls = inner, how, 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def repository(self, url: str) -> Any:
        self._calls += 1
        repo = self._inner.repository(url)
        if self._calls == 1 or repo is None:
            return repo
        return None if self._how == "repository" else dataclasses.replace(repo, branches=("other",))


@pytest.mark.fak_theorem("F1.3")
@pytest.mark.parametrize("how", ["repository", "branch"])
def test_a_repository_gone_since_the_inputs_were_resolved_fails_reauthorisation(how: str) -> None:
    out = preflight(
        ExistingFlow(flow_from_dict(example_flow_doc())),
        identity="alice",
        workspace=_Vanishing(workspace(), how),
        task_id="t1",
    )
    assert [(f.code, f.path) for f in out.steps[REAUTH].findings] == [
        ("UNKNOWN_BRANCH", "repository.baseline_branch")
    ]
    assert out.steps[REAUTH].findings[0].message
    out = run()  # and an authorised repository with its branch passes
    assert out.ok


@pytest.mark.fak_theorem("F1.3")
@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ("drop-node", [("RISK_INCOMPLETE", "nodes[1]")]),
        ("confidence-above-1", [("RISK_INCOMPLETE", "nodes[1]")]),
        ("confidence-below-0", [("RISK_INCOMPLETE", "nodes[1]")]),
        ("confidence-0", []),
        ("confidence-1", []),
        ("approval-lost", [("RISK_GATE_MISSING", "nodes[2]")]),
    ],
)
def test_a_risk_assessment_that_lost_a_node_or_a_gate_fails_reauthorisation(
    change: str, expected: list[tuple[str, str]]
) -> None:
    real = preflight_module.assess

    def assess(flow: Any, declared: Any) -> Any:
        risk = real(flow, declared)
        nodes = list(risk.nodes)
        if change == "drop-node":
            del nodes[1]
        elif change.startswith("confidence"):
            value = {"above-1": 1.01, "below-0": -0.01, "0": 0.0, "1": 1.0}[change[11:]]
            nodes[1] = dataclasses.replace(nodes[1], confidence=value)
        else:
            nodes[2] = dataclasses.replace(nodes[2], approval_required=False)
        return dataclasses.replace(risk, nodes=tuple(nodes))

    # patched inside the test (not with the monkeypatch fixture): a mutant re-run of this
    # witness calls the function again, and the patch must be undone each time
    with mock.patch.object(preflight_module, "assess", assess):
        out = run()
    step = out.steps[REAUTH]
    assert [(f.code, f.path) for f in step.findings] == expected
    assert all(f.message for f in step.findings)
    assert step.status == ("failed" if expected else "passed")


@pytest.mark.fak_theorem("F1.3")
@pytest.mark.parametrize("name", sorted(breakages()))
def test_a_failed_preflight_records_every_step_and_a_repair_for_each_finding(name: str) -> None:
    step, _, mutate = breakages()[name]
    fl, ws, who = mutate(example_flow_doc(), example_workspace_doc(), "alice")
    seen: list[tuple[int, str, str]] = []
    out = preflight(
        ExistingFlow(flow_from_dict(fl), "v3"),
        identity=who,
        workspace=workspace(ws),
        task_id="t1",
        on_progress=lambda n, s, status: seen.append((n, s, status)),
    )
    at = STEPS.index(step)
    assert [(s.number, s.step) for s in out.steps] == list(enumerate(STEPS, start=1))
    assert [s.status for s in out.steps] == ["passed"] * at + ["failed"] + ["skipped"] * (
        len(STEPS) - at - 1
    )
    expected: list[tuple[int, str, str]] = []
    for i, s in enumerate(STEPS[: at + 1], start=1):
        expected += [(i, s, "running"), (i, s, "passed" if i <= at else "failed")]
    expected += [(i, s, "skipped") for i, s in enumerate(STEPS, start=1) if i > at + 1]
    assert seen == expected
    findings = out.steps[at].findings
    assert out.repair is not None
    assert (out.repair.step, out.repair.number) == (step, at + 1)
    assert out.repair.reason == min(findings).message
    for f in findings:
        assert any(c.startswith(f"{f.path or step}: ") for c in out.repair.changes), (f, out.repair)
