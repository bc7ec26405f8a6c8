"""Runner re-validation, tamper refusal, fail-closed resources, requirements materialised once."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fak_core import Kernel, Reason, ToolCall, VerdictKind
from fak_core.flow import (
    ExistingFlow,
    FileFetcher,
    Manifest,
    ManifestError,
    RecordingResources,
    Runner,
    RunnerRefused,
    flow_from_dict,
    kernel_policy_for,
    launch_task,
    load_verified_manifest,
    preflight,
    revalidate,
)

from .flowdata import EXAMPLE, example_flow_doc, example_workspace_doc, workspace
from .test_preflight import breakages

_GOOD = preflight(
    ExistingFlow(flow_from_dict(example_flow_doc())),
    identity="alice",
    workspace=workspace(),
    task_id="t1",
)
assert _GOOD.manifest is not None
GOOD: Manifest = _GOOD.manifest


def _leaves(doc: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    if isinstance(doc, dict):
        return [p for k, v in doc.items() for p in _leaves(v, (*path, k))] + [path]
    if isinstance(doc, list):
        return [p for i, v in enumerate(doc) for p in _leaves(v, (*path, i))] + [path]
    return [path]


def _tamper(body: dict[str, Any], path: tuple[Any, ...], how: str) -> dict[str, Any]:
    copy = json.loads(json.dumps(body))
    parent = copy
    for p in path[:-1]:
        parent = parent[p]
    key = path[-1]
    old = parent[key]
    if how == "delete" and isinstance(parent, dict):
        del parent[key]
    elif isinstance(old, bool):
        parent[key] = not old
    elif isinstance(old, (int, float)):
        parent[key] = old + 1
    elif isinstance(old, str):
        parent[key] = old + "x"
    elif isinstance(old, list):
        parent[key] = [*old, "extra"]
    elif isinstance(old, dict):
        parent[key] = {**old, "extra": 1}
    else:
        parent[key] = "x"
    return copy


LEAVES = [p for p in _leaves(GOOD.body) if p]


@pytest.mark.fak_theorem("F1.2")
@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(LEAVES), st.sampled_from(["change", "delete"]))
def test_a_tampered_manifest_is_always_refused(path: tuple[Any, ...], how: str) -> None:
    tampered = Manifest(_tamper(GOOD.body, path, how), GOOD.digest)
    codes = {f.code for f in revalidate(tampered)}
    assert "DIGEST_MISMATCH" in codes or "UNCANONICAL" in codes
    runner = Runner(tampered.to_json().encode(), FileFetcher(EXAMPLE))
    with pytest.raises(ManifestError):
        runner.start()


@pytest.mark.fak_theorem("F1.2")
@settings(max_examples=60, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from([p for p in LEAVES if p[0] in ("nodes", "lock", "plan", "snapshot")]))
def test_a_resealed_tamper_is_refused_by_content_or_by_the_expected_digest(
    path: tuple[Any, ...],
) -> None:
    """Even a forger who recomputes the digest is caught: by re-compilation, or by the spec."""
    forged = Manifest.seal(_tamper(GOOD.body, path, "change"))
    assert revalidate(forged, expected_digest=GOOD.digest)
    with pytest.raises(RunnerRefused):
        Runner(forged, FileFetcher(EXAMPLE), expected_digest=GOOD.digest).start()


@pytest.mark.fak_theorem("F1.2")
@pytest.mark.parametrize(
    "edit",
    [
        lambda b: b["task"].update(identity="mallory"),
        lambda b: b["task"].update(id="t2"),
        lambda b: b["snapshot"]["origin"].update(version="v4"),
    ],
)
def test_a_consistent_resealed_forgery_is_refused_by_the_specs_digest(edit: Any) -> None:
    """A forger who changes only what the snapshot cannot contradict, then reseals, is
    still refused: the execution specification carries the digest preflight computed."""
    body = json.loads(json.dumps(GOOD.body))
    edit(body)
    forged = Manifest.seal(body)
    assert revalidate(forged) == ()  # the body alone is self-consistent
    assert {f.code for f in revalidate(forged, GOOD.digest)} == {"DIGEST_MISMATCH"}
    with pytest.raises(RunnerRefused, match="DIGEST_MISMATCH"):
        Runner(forged.to_json().encode(), FileFetcher(EXAMPLE), GOOD.digest).start()


@pytest.mark.fak_theorem("F1.2")
@pytest.mark.parametrize(
    ("edit", "code"),
    [
        (lambda b: b["nodes"][0].update(prompt="Do something else entirely."), "PLAN_MISMATCH"),
        (lambda b: b["plan"]["order"].reverse(), "PLAN_MISMATCH"),
        (lambda b: b["lock"][0].update(version="9.9.9"), "LOCK_MISMATCH"),
        (lambda b: b["lock"].append({**b["lock"][0], "name": "bonus"}), "LOCK_MISMATCH"),
        (
            lambda b: b["snapshot"]["flow"]["nodes"][0].update(skills=["planning@latest"]),
            "FLOATING_REFERENCE",
        ),
        (lambda b: b["nodes"][0]["runtime"].update(api_key="x"), "SECRET_IN_MANIFEST"),
        (
            lambda b: b["snapshot"]["flow"]["nodes"][1].update(rework_targets=["review"]),
            "ILLEGAL_REWORK_TARGET",
        ),
    ],
)
def test_resealed_content_changes_are_named(edit: Any, code: str) -> None:
    body = json.loads(json.dumps(GOOD.body))
    edit(body)
    findings = revalidate(Manifest.seal(body))
    assert code in {f.code for f in findings}


_SNAP = ("snapshot", "flow", "nodes")
_AT = "manifest.snapshot.flow.nodes"
# Resealed edits and exactly the findings (code, path) they must give, written by hand from
# what each edit breaks (the oracle does not run the runner's code).
RESEALED: dict[str, tuple[Any, set[tuple[str, str]]]] = {
    "repository": (
        lambda b: b["repository"].update(url="https://evil.example/r.git"),
        {("PLAN_MISMATCH", "manifest.repository")},
    ),
    "policy": (
        lambda b: b["policy"].update(max_rework=9),
        {("PLAN_MISMATCH", "manifest.policy")},
    ),
    "requirement-location": (
        lambda b: b["requirements"][0].update(location="requirements/acceptance.md"),
        {("PLAN_MISMATCH", "manifest.requirements")},
    ),
    "requirement-dropped": (
        lambda b: b["requirements"].pop(),
        {("PLAN_MISMATCH", "manifest.requirements")},
    ),
    "plan": (lambda b: b["plan"]["order"].reverse(), {("PLAN_MISMATCH", "manifest.plan")}),
    "node-prompt": (
        lambda b: b["nodes"][0].update(prompt="rm -rf /"),
        {("PLAN_MISMATCH", "manifest.nodes")},
    ),
    "risk-not-an-object": (
        lambda b: (b.update(risk="x"), b["nodes"][0].update(prompt="rm -rf /")),
        {("MALFORMED_MANIFEST", "manifest.risk")},
    ),
    "risk-a-list": (
        lambda b: (b.update(risk=[]), b["nodes"][2].update(approval_required=False)),
        {("MALFORMED_MANIFEST", "manifest.risk")},
    ),
    "approval-dropped": (
        lambda b: (
            b["risk"]["nodes"][2].update(approval_required=False),
            b["nodes"][2].update(approval_required=False),
        ),
        {("PLAN_MISMATCH", "manifest.nodes")},
    ),
    "lock-version": (
        lambda b: b["lock"][1].update(version="9.9.9"),
        {("LOCK_MISMATCH", "manifest.lock[1]"), ("LOCK_MISMATCH", f"{_AT}[0].skills[0]")},
    ),
    "lock-extra": (
        lambda b: b["lock"].append({**b["lock"][0], "name": "bonus"}),
        {("LOCK_MISMATCH", "manifest.lock[7]")},
    ),
    "lock-not-a-list": (lambda b: b.update(lock=5), {("MALFORMED_MANIFEST", "manifest.lock")}),
    "lock-entry-not-an-object": (
        lambda b: b["lock"].append("x"),
        {("MALFORMED_MANIFEST", "manifest.lock")},
    ),
    "plan-missing": (lambda b: b.pop("plan"), {("MALFORMED_MANIFEST", "manifest")}),
    "snapshot-missing": (lambda b: b.pop("snapshot"), {("MALFORMED_MANIFEST", "manifest")}),
    "snapshot-flow-invalid": (
        lambda b: b["snapshot"]["flow"].update(nodes="x"),
        {("MALFORMED_MANIFEST", "manifest.snapshot.flow")},
    ),
    "risk-nodes-not-a-list": (
        lambda b: b["risk"].update(nodes=5),
        {("MALFORMED_MANIFEST", "manifest")},
    ),
    "floating-then-unlocked": (
        lambda b: (
            b["snapshot"]["flow"]["nodes"][0].update(skills=["planning@latest"]),
            b["snapshot"]["flow"]["nodes"][2].update(tools=["read_file@1.2.1"]),
        ),
        {
            ("FLOATING_REFERENCE", f"{_AT}[0].skills[0]"),
            ("LOCK_MISMATCH", f"{_AT}[2].tools[0]"),
            ("LOCK_MISMATCH", "manifest.lock[1]"),
            ("PLAN_MISMATCH", "manifest.nodes"),
        },
    ),
    "secret": (
        lambda b: b["nodes"][0]["runtime"].update(api_key="x"),
        {
            ("PLAN_MISMATCH", "manifest.nodes"),
            ("SECRET_IN_MANIFEST", "manifest.nodes[0].runtime.api_key"),
        },
    ),
}


@pytest.mark.fak_theorem("F1.2")
@pytest.mark.parametrize("name", sorted(RESEALED))
def test_each_resealed_change_gives_exactly_its_findings(name: str, tmp_path: Path) -> None:
    edit, expected = RESEALED[name]
    body = json.loads(json.dumps(GOOD.body))
    edit(body)
    forged = Manifest.seal(body)
    findings = revalidate(forged)
    assert {(f.code, f.path) for f in findings} == expected
    assert all(f.message for f in findings)
    # under the digest the specification names, the forgery is also a digest mismatch
    extra = set(revalidate(forged, GOOD.digest)) - set(findings)
    assert [(f.code, f.path) for f in extra] == [("DIGEST_MISMATCH", "digest")]
    assert all(f.message for f in extra)
    # the refusals name the first finding, in sorted order, and count the rest
    first = min(findings)
    with pytest.raises(RunnerRefused) as info:
        Runner(forged.to_json().encode(), FileFetcher(EXAMPLE)).start()
    assert str(info.value) == f"refusing to start: {first.code} at {first.path}"
    assert info.value.findings == findings
    path = tmp_path / "m.json"
    path.write_text(forged.to_json())
    with pytest.raises(RunnerRefused) as info:
        load_verified_manifest(path)
    more = f" (and {len(findings) - 1} more)" if len(findings) > 1 else ""
    assert str(info.value) == (
        f"{path}: refusing the manifest: {first.code} at {first.path}: {first.message}{more}"
    )


@pytest.mark.fak_theorem("F1.2")
@pytest.mark.parametrize(
    ("name", "start"),
    [
        ("plan-missing", "missing part 'plan'"),
        ("snapshot-missing", "missing part 'snapshot'"),
        ("snapshot-flow-invalid", "manifest.snapshot.flow: nodes: "),
    ],
)
def test_a_malformed_part_is_named_in_the_message(name: str, start: str) -> None:
    body = json.loads(json.dumps(GOOD.body))
    RESEALED[name][0](body)
    (finding,) = revalidate(Manifest.seal(body))
    assert finding.message.startswith(start), finding


@pytest.mark.fak_theorem("F1.2")
def test_two_digest_mismatches_are_two_findings() -> None:
    body = json.loads(json.dumps(GOOD.body))
    body["task"]["id"] = "t2"
    tampered = Manifest(body, GOOD.digest)  # body changed under its old digest
    other = "sha256:" + "0" * 64
    findings = revalidate(tampered, other)
    assert [f.code for f in findings] == ["DIGEST_MISMATCH", "DIGEST_MISMATCH"]
    assert {f.path for f in findings} == {"digest"}
    assert all(f.message for f in findings) and findings[0].message != findings[1].message


@pytest.mark.fak_theorem("F1.2")
@pytest.mark.parametrize("bad", [float("nan"), float("inf"), 2**53, "\ud800"])
def test_a_body_with_no_canonical_form_is_uncanonical(bad: Any) -> None:
    body = json.loads(json.dumps(GOOD.body))
    body["policy"]["max_rework"] = bad
    findings = revalidate(Manifest(body, GOOD.digest))
    assert [(f.code, f.path) for f in findings] == [("UNCANONICAL", "manifest")]
    assert findings[0].message
    with pytest.raises(RunnerRefused, match=r"^refusing to start: UNCANONICAL at manifest$"):
        Runner(Manifest(body, GOOD.digest), FileFetcher(EXAMPLE)).start()


@pytest.mark.fak_theorem("F1.2")
def test_a_runner_starts_once_and_keeps_what_it_verified() -> None:
    fetcher = FileFetcher(EXAMPLE)
    runner = Runner(GOOD.to_json().encode(), fetcher, GOOD.digest)
    started = runner.start()
    assert started == GOOD and runner.manifest is started
    assert sorted(r.name for r in runner.requirements.values()) == ["acceptance", "product"]
    calls = fetcher.calls
    assert runner.start() is started and fetcher.calls == calls
    with pytest.raises(ManifestError, match=r"^mounted: not a JSON manifest"):
        Runner(b"{not json", fetcher).start()


@pytest.mark.fak_theorem("F1.2")
def test_the_untouched_manifest_passes_and_file_round_trip_verifies(tmp_path: Path) -> None:
    assert revalidate(GOOD, GOOD.digest) == ()
    path = tmp_path / "m.json"
    path.write_text(GOOD.to_json())
    assert load_verified_manifest(path, GOOD.digest) == GOOD
    reformatted = tmp_path / "m2.json"
    reformatted.write_text(json.dumps({"manifest": GOOD.body, "digest": GOOD.digest}))
    assert load_verified_manifest(reformatted) == GOOD


@pytest.mark.fak_theorem("F1.2")
def test_load_verified_manifest_refuses_tampering_with_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "m.json"
    path.write_text(GOOD.to_json().replace("implementation plan", "deletion plan"))
    with pytest.raises(RunnerRefused, match=r"m\.json: refusing the manifest: DIGEST_MISMATCH"):
        load_verified_manifest(path)
    path.write_text("{not json")
    with pytest.raises(ManifestError, match="not a JSON manifest"):
        load_verified_manifest(path)
    with pytest.raises(ManifestError, match="cannot read manifest"):
        load_verified_manifest(tmp_path / "absent.json")


# -- failing closed --------------------------------------------------------------------


def _launch(fl: Any, ws: Any, who: str, resources: RecordingResources, **kw: Any) -> Any:
    return launch_task(
        ExistingFlow(flow_from_dict(fl)),
        identity=who,
        workspace=workspace(ws),
        task_id="task-1",
        resources=resources,
        fetcher=FileFetcher(EXAMPLE),
        **kw,
    )


BREAKS = breakages()


@pytest.mark.fak_theorem("F1.3")
@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from(sorted(BREAKS)), max_size=3, unique=True))
def test_no_failing_preflight_creates_a_resource(names: list[str]) -> None:
    fl, ws, who = example_flow_doc(), example_workspace_doc(), "alice"
    for name in names:
        fl, ws, who = BREAKS[name][2](fl, ws, who)
    resources = RecordingResources()
    record = _launch(fl, ws, who, resources)
    if names:
        assert record.status == "preflight-failed"
        assert resources.created == []
        assert record.repair is not None
        assert record.preflight.steps  # the structured results are kept
    else:
        assert record.status == "running"
        assert {r.kind for r in resources.created} == {"sandbox", "task-secret", "service"}


def test_resources_hold_the_frozen_manifest_and_the_credentials_stay_private() -> None:
    resources = RecordingResources()
    record = _launch(example_flow_doc(), example_workspace_doc(), "alice", resources)
    assert record.status == "running"
    mounted = resources.mounted["task-1"]
    assert Manifest.from_json(mounted).digest == record.spec.manifest_digest
    assert resources.secrets["task-1"] == ("vault://acme/reports/deploy-key",)
    assert b"vault://" not in mounted


@pytest.mark.fak_theorem("F1.2", "F1.3")
def test_a_manifest_altered_in_transit_stops_the_runner_and_releases_resources() -> None:
    resources = RecordingResources()
    altered = GOOD.to_json().replace("Review {{patch}}", "Approve {{patch}}").encode()
    record = _launch(
        example_flow_doc(), example_workspace_doc(), "alice", resources, mounted=altered
    )
    assert record.status == "runner-refused"
    assert "DIGEST_MISMATCH" in {f.code for f in record.refusal}
    assert resources.created
    assert resources.live() == []


# -- requirements ------------------------------------------------------------------------


def _copy_example(tmp_path: Path) -> Path:
    (tmp_path / "requirements").mkdir()
    for f in (EXAMPLE / "requirements").iterdir():
        (tmp_path / "requirements" / f.name).write_bytes(f.read_bytes())
    return tmp_path


def test_requirements_are_materialised_once_and_reused_by_every_attempt(tmp_path: Path) -> None:
    root = _copy_example(tmp_path)
    fetcher = FileFetcher(root)
    runner = Runner(GOOD.to_json().encode(), fetcher, GOOD.digest)
    runner.start()
    assert fetcher.calls == 2
    assert set(runner.requirements) == {
        (r["location"], r["revision"]) for r in GOOD.body["requirements"]
    }
    first = runner.requirement_inputs("implement")
    assert set(first) == {"product"}
    (root / "requirements" / "product.md").write_text("changed mid-run")
    for attempt in (2, 3):  # retries and rework read the same local copy
        again = runner.requirement_inputs("implement", attempt)
        assert again["product"] is first["product"]
    assert runner.requirement_inputs("plan")["product"] is first["product"]
    assert b"changed" not in first["product"].content
    assert fetcher.calls == 2
    with pytest.raises(RunnerRefused, match="changed since preflight") as info:
        Runner(GOOD, FileFetcher(root), GOOD.digest).start()
    assert info.value.findings[0].code == "REQUIREMENT_CHANGED"


# -- the kernel policy -------------------------------------------------------------------


def _decide(kernel: Kernel, tool: str, args: dict[str, Any]) -> Any:
    return kernel.decide(ToolCall(tool, json.dumps(args), "trace"))


@pytest.mark.fak_theorem("F1.6")
def test_the_lock_compiles_into_each_nodes_kernel_policy() -> None:
    plan = Kernel(kernel_policy_for(GOOD, "plan"))
    assert _decide(plan, "read_file", {"path": "src/app.py"}).kind == VerdictKind.ALLOW
    assert _decide(plan, "search_code", {"q": "export"}).kind == VerdictKind.ALLOW
    for tool in ("write_file", "run_tests", "read_secrets", "get_user_details"):
        v = _decide(plan, tool, {"path": "x"})
        assert v.kind == VerdictKind.DENY, tool  # not locked here, and no built-in prefixes
    bad = _decide(plan, "read_file", {"file": "x"})  # the locked version's schema applies
    assert (bad.kind, bad.reason) == (VerdictKind.DENY, Reason.MALFORMED)
    implement = Kernel(kernel_policy_for(GOOD, "implement"))
    assert _decide(implement, "write_file", {"path": "src/export.py"}).kind == VerdictKind.ALLOW
    assert _decide(implement, "write_file", {"path": "fak_core/kernel.py"}).kind == VerdictKind.DENY
    policy = kernel_policy_for(GOOD, "review")
    assert policy.allow == ("read_file",)
    assert policy.allow_prefix == ()
    assert policy.posture == "fail_closed"
    with pytest.raises(KeyError, match="no node 'ghost'"):
        kernel_policy_for(GOOD, "ghost")
