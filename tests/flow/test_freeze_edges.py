"""Freezing at its edges: what a passed preflight records and freezes, every reference of
the snapshot (sub-agents' included) re-checked by the runner, parts of the body that are
missing, files that are not manifests, and the resolve and determine steps' failures.

The oracles are this file's own: the example flow and workspace documents, SHA-256 of the
requirement files, the RFC 8785 serialiser written in ``test_canonical``, and hand-written
codes, paths and messages.
"""

from __future__ import annotations

import copy
import hashlib
import json
import tempfile
from pathlib import Path
from typing import Any

import pytest

from fak_core.flow import (
    STEPS,
    ExistingFlow,
    GeneratedFlow,
    GenerationContext,
    Manifest,
    ManifestError,
    Runner,
    RunnerRefused,
    flow_from_dict,
    load_verified_manifest,
    preflight,
    revalidate,
)
from fak_core.flow.secretscan import FORBIDDEN_KEY_WORDS, scan

from .flowdata import EXAMPLE, example_flow_doc, example_workspace_doc, workspace
from .test_canonical import independent

REPO = "https://git.example.com/acme/reports.git"
MANIFEST_KEYS = {
    "format", "task", "repository", "requirements", "policy", "snapshot", "plan", "lock",
    "risk", "nodes",
}  # fmt: skip


def _sha(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def _jcs_digest(doc: Any) -> str:
    return _sha(independent(doc).encode("utf-8"))


def _run(flow_doc: dict[str, Any], ws: dict[str, Any] | None = None, task: str = "t1") -> Any:
    flow = flow_from_dict(flow_doc)
    return preflight(
        ExistingFlow(flow, "v3"), identity="alice", workspace=workspace(ws), task_id=task
    )


def _failed(outcome: Any) -> tuple[str, list[tuple[str, str]]]:
    assert not outcome.ok and outcome.manifest is None
    (step,) = [s for s in outcome.steps if s.status == "failed"]
    return step.step, sorted((f.code, f.path) for f in step.findings)


def _requirements(doc: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        {**r, "revision": _sha((EXAMPLE / r["location"]).read_bytes())} for r in doc["requirements"]
    ]


# ---------------------------------------------------------------------------------- F1.1
@pytest.mark.fak_theorem("F1.1")
@pytest.mark.parametrize("task", ["t1", "another task"])
def test_the_frozen_body_holds_exactly_the_documented_parts(task: str) -> None:
    doc = example_flow_doc()
    out = _run(doc, task=task)
    assert out.ok, out.to_dict()
    body = out.manifest.body
    assert set(body) == MANIFEST_KEYS
    assert body["format"] == "fak-flow-manifest/v1"
    assert body["task"] == {"id": task, "identity": "alice", "workspace": "acme"}
    assert body["repository"] == {"url": REPO, "baseline_branch": "main"}
    assert body["requirements"] == _requirements(doc)
    assert body["snapshot"]["origin"] == {
        "kind": "existing",
        "version": "v3",
        "source_digest": _jcs_digest(doc),
    }
    assert out.manifest.digest == _jcs_digest(body)


# ---------------------------------------------------------------------------------- F1.2
def _subagent_flow() -> dict[str, Any]:
    """The example with a sub-agent that holds tools and a skill of its own only."""
    doc = example_flow_doc()
    plan = doc["nodes"][0]
    plan["tools"] = ["read_file@1.2.0"]
    plan["skills"] = []
    plan["subagents"] = [
        {
            "name": "code-scout",
            "inherits": ["model"],
            "skills": ["planning@1.4.2"],
            "tools": ["search_code@1.0.3"],
        }
    ]
    return doc


def _ref_paths(snapshot: dict[str, Any]) -> list[tuple[str, tuple[Any, ...]]]:
    """(manifest path, key path in the body) of every capability reference of the snapshot."""
    out: list[tuple[str, tuple[Any, ...]]] = []
    for i, n in enumerate(snapshot["nodes"]):
        for field in ("skills", "extensions", "tools"):
            for k, _ in enumerate(n.get(field, [])):
                out.append((f"nodes[{i}].{field}[{k}]", ("nodes", i, field, k)))
        for j, s in enumerate(n.get("subagents", [])):
            for field in ("skills", "tools"):
                for k, _ in enumerate(s.get(field, [])):
                    where = ("nodes", i, "subagents", j, field, k)
                    out.append((f"nodes[{i}].subagents[{j}].{field}[{k}]", where))
    return out


def _set(doc: Any, path: tuple[Any, ...], value: Any) -> None:
    for p in path[:-1]:
        doc = doc[p]
    doc[path[-1]] = value


def _get(doc: Any, path: tuple[Any, ...]) -> Any:
    for p in path:
        doc = doc[p]
    return doc


def _resealed(body: dict[str, Any], edit: Any) -> Manifest:
    copy_ = json.loads(json.dumps(body))
    edit(copy_)
    return Manifest.seal(copy_)


_SUB = _run(_subagent_flow())
assert _SUB.ok, _SUB.to_dict()
SUB: Manifest = _SUB.manifest


@pytest.mark.fak_theorem("F1.2")
@pytest.mark.parametrize("selector", ["@9.9.9", "@sha256:" + "e" * 64, "", "@latest"])
def test_every_reference_of_the_snapshot_is_checked_against_the_lock(selector: str) -> None:
    """Each reference (a node's or a sub-agent's), changed to a version or digest the lock
    does not hold or to a floating one and resealed, is refused at its path."""
    assert revalidate(SUB, SUB.digest) == ()
    refs = _ref_paths(SUB.body["snapshot"]["flow"])
    assert any("subagents" in p for p, _ in refs)
    for path, where in refs:
        name = str(_get(SUB.body["snapshot"]["flow"], where)).partition("@")[0]

        def edit(b: dict[str, Any], where: tuple[Any, ...] = where, name: str = name) -> None:
            _set(b["snapshot"]["flow"], where, name + selector)

        found = {(f.code, f.path) for f in revalidate(_resealed(SUB.body, edit))}
        code = "FLOATING_REFERENCE" if selector in ("", "@latest") else "LOCK_MISMATCH"
        assert (code, f"manifest.snapshot.flow.{path}") in found, (path, found)


@pytest.mark.fak_theorem("F1.2")
@pytest.mark.parametrize("node", ["plan", "implement"])
def test_a_node_the_recorded_risk_does_not_assess_needs_approval(node: str) -> None:
    """A resealed body that drops a node from the risk must keep that node's approval."""
    body = SUB.body
    i = [n["id"] for n in body["nodes"]].index(node)

    def drop(approval: bool) -> Any:
        def edit(b: dict[str, Any]) -> None:
            b["risk"]["nodes"] = [n for n in b["risk"]["nodes"] if n["node"] != node]
            b["nodes"][i]["approval_required"] = approval

        return edit

    refused = {(f.code, f.path) for f in revalidate(_resealed(body, drop(False)))}
    assert ("PLAN_MISMATCH", "manifest.nodes") in refused
    assert revalidate(_resealed(body, drop(True))) == ()


@pytest.mark.fak_theorem("F1.2")
@pytest.mark.parametrize("part", ["requirements", "repository", "policy"])
def test_a_resealed_body_missing_a_part_the_snapshot_gives_is_refused(part: str) -> None:
    def edit(b: dict[str, Any]) -> None:
        del b[part]

    found = {(f.code, f.path) for f in revalidate(_resealed(SUB.body, edit))}
    assert ("PLAN_MISMATCH", f"manifest.{part}") in found


def _file_cases() -> dict[str, tuple[Any, str]]:
    good = json.loads(SUB.to_json())

    def with_(**kw: Any) -> dict[str, Any]:
        return {**copy.deepcopy(good), **kw}

    other_format = copy.deepcopy(good["manifest"])
    other_format["format"] = "fak-flow-manifest/v2"
    big = copy.deepcopy(good["manifest"])
    big["nodes"][0]["runtime"]["seed"] = 2**60
    nan = json.dumps(with_(manifest={**good["manifest"], "extra": float("nan")}))
    return {
        "not-json": (b"{not json", "not a JSON manifest"),
        "list": ([good], "exactly digest and manifest"),
        "extra-member": (with_(note="hi"), "exactly digest and manifest"),
        "missing-digest": ({"manifest": good["manifest"]}, "exactly digest and manifest"),
        "body-not-object": (with_(manifest=[good["manifest"]]), "manifest must be an object"),
        "digest-not-string": (with_(digest=7), "digest a string"),
        "other-format": (
            with_(manifest=other_format, digest=Manifest.seal(other_format).digest),
            "manifest.format",
        ),
        "huge-integer": (with_(manifest=big), "no canonical JSON form"),
        "nan": (nan.encode(), "no canonical JSON form"),
    }


FILE_CASES = _file_cases()


@pytest.mark.fak_theorem("F1.2")
@pytest.mark.parametrize("name", sorted(FILE_CASES))
def test_a_file_that_is_not_a_manifest_is_refused_before_revalidation(
    name: str, tmp_path: Path
) -> None:
    doc, problem = FILE_CASES[name]
    data = doc if isinstance(doc, bytes) else json.dumps(doc).encode()
    path = tmp_path / "m.json"
    path.write_bytes(data)
    with pytest.raises(ManifestError) as err:
        load_verified_manifest(path)
    assert not isinstance(err.value, RunnerRefused), err.value
    assert problem in str(err.value) and str(path) in str(err.value)


# ---------------------------------------------------------------------------------- F1.3
def _expected_details(doc: dict[str, Any], out: Any, origin: dict[str, Any]) -> list[Any]:
    ws = example_workspace_doc()
    body = out.manifest.body
    return [
        {
            "identity": "alice",
            "workspace": "acme",
            "repository": REPO,
            "baseline_branch": "main",
            "requirements": [
                {"name": r["name"], "location": r["location"], "revision": r["revision"]}
                for r in _requirements(doc)
            ],
            "capabilities_available": len(ws["capabilities"]),
        },
        {"origin": origin, "flow": doc["name"]},
        {"order": [n["id"] for n in doc["nodes"]]},
        None,  # the risk step's result: not claimed here
        None,  # the re-authorisation result: witnessed in test_reauthorise
        {"nodes": len(doc["nodes"]), "locked": len(body["lock"])},
        {"digest": _jcs_digest(body)},
    ]


def _check_record(out: Any, doc: dict[str, Any], origin: dict[str, Any]) -> None:
    assert out.ok, out.to_dict()
    assert [(s.number, s.step, s.status) for s in out.steps] == [
        (i, name, "passed") for i, name in enumerate(STEPS, start=1)
    ]
    for step, want in zip(out.steps, _expected_details(doc, out, origin), strict=True):
        if want is not None:
            assert step.detail == want, step.step
    assert out.manifest.body["snapshot"]["origin"] == origin


@pytest.mark.fak_theorem("F1.3")
def test_a_passed_preflight_records_each_steps_result() -> None:
    doc = example_flow_doc()
    origin = {"kind": "existing", "version": "v3", "source_digest": _jcs_digest(doc)}
    _check_record(_run(doc), doc, origin)


def _generated(hook: Any, repo: str = REPO, branch: str = "main") -> GeneratedFlow:
    reqs = flow_from_dict(example_flow_doc()).requirements
    return GeneratedFlow("planner-agent", hook, repo, branch, reqs)


def _gen(hook: Any, **kw: Any) -> Any:
    return preflight(_generated(hook, **kw), identity="alice", workspace=workspace(), task_id="g")


@pytest.mark.fak_theorem("F1.3")
@pytest.mark.parametrize("as_flow", [False, True])
def test_a_generated_flow_records_its_generator(as_flow: bool) -> None:
    doc = example_flow_doc()
    seen: list[GenerationContext] = []

    def hook(ctx: GenerationContext) -> Any:
        seen.append(ctx)
        return flow_from_dict(doc) if as_flow else copy.deepcopy(doc)

    origin = {"kind": "generated", "generator": "planner-agent", "source_digest": _jcs_digest(doc)}
    _check_record(_gen(hook), doc, origin)
    assert len(seen) == 1


def _with(**kw: Any) -> dict[str, Any]:
    return {**example_flow_doc(), **kw}


GENERATOR_CASES: dict[str, tuple[Any, list[tuple[str, str]], str]] = {
    "raises": (lambda ctx: 1 / 0, [("GENERATOR_FAILED", "generator")], "ZeroDivisionError"),
    "invalid": (lambda ctx: {"name": "x"}, [("FLOW_INVALID", "")], ""),
    "other-branch": (
        lambda ctx: _with(repository={"url": REPO, "baseline_branch": "release-2.4"}),
        [("FLOW_INPUT_MISMATCH", "repository")],
        "repository or baseline branch",
    ),
    "other-requirements": (
        lambda ctx: _with(requirements=[]),
        [("FLOW_INPUT_MISMATCH", "requirements")],
        "requirement sources",
    ),
    "both": (
        lambda ctx: _with(
            requirements=[], repository={"url": REPO, "baseline_branch": "release-2.4"}
        ),
        [("FLOW_INPUT_MISMATCH", "repository"), ("FLOW_INPUT_MISMATCH", "requirements")],
        "repository or baseline branch",
    ),
}


@pytest.mark.fak_theorem("F1.3")
@pytest.mark.parametrize("name", sorted(GENERATOR_CASES))
def test_a_generated_flow_that_fails_fails_step_two_with_every_finding(name: str) -> None:
    hook, findings, message = GENERATOR_CASES[name]
    out = _gen(hook)
    step, found = _failed(out)
    assert step == "determine-flow"
    if name == "invalid":
        assert [c for c, _ in found] == ["FLOW_INVALID"]
    else:
        assert found == findings
    assert message in out.repair.reason
    assert [s.status for s in out.steps[2:]] == ["skipped"] * 5


@pytest.mark.fak_theorem("F1.3")
def test_a_flow_with_no_canonical_form_fails_step_two_not_the_process() -> None:
    doc = example_flow_doc()
    doc["nodes"][0]["runtime"]["seed"] = 2**60
    out = _run(doc)
    assert _failed(out) == ("determine-flow", [("UNCANONICAL", "flow")])
    out = _gen(lambda ctx: copy.deepcopy(doc))
    assert _failed(out) == ("determine-flow", [("UNCANONICAL", "flow")])


@pytest.mark.fak_theorem("F1.3")
def test_a_locked_schema_with_no_canonical_form_fails_the_digest_step() -> None:
    ws = example_workspace_doc()
    (read_file,) = [c for c in ws["capabilities"] if c["name"] == "read_file"]
    read_file["versions"][0]["schema"]["maxProperties"] = 2**60
    assert _failed(_run(example_flow_doc(), ws)) == ("digest", [("UNCANONICAL", "manifest")])


RESOLVE_CASES: dict[str, tuple[Any, list[tuple[str, str]]]] = {
    "unknown-repository": (
        lambda fl: fl["repository"].update(url="https://git.example.com/acme/other.git"),
        [("UNKNOWN_REPOSITORY", "repository.url")],
    ),
    "unknown-branch": (
        lambda fl: fl["repository"].update(baseline_branch="gone"),
        [("UNKNOWN_BRANCH", "repository.baseline_branch")],
    ),
    "two-bad-requirements": (
        lambda fl: (
            fl["requirements"][0].update(location="secret/product.md"),
            fl["requirements"][1].update(location="requirements/nothing.md"),
        ),
        [
            ("REQUIREMENT_NOT_READABLE", "requirements[0].location"),
            ("UNKNOWN_REQUIREMENT_SOURCE", "requirements[1].location"),
        ],
    ),
    "everything": (
        lambda fl: (
            fl["repository"].update(baseline_branch="gone"),
            fl["requirements"][0].update(location="secret/product.md"),
            fl["requirements"][1].update(location="secret/acceptance.md"),
        ),
        [
            ("REQUIREMENT_NOT_READABLE", "requirements[0].location"),
            ("REQUIREMENT_NOT_READABLE", "requirements[1].location"),
            ("UNKNOWN_BRANCH", "repository.baseline_branch"),
        ],
    ),
}


@pytest.mark.fak_theorem("F1.3")
@pytest.mark.parametrize("name", sorted(RESOLVE_CASES))
def test_resolution_reports_every_input_that_fails(name: str) -> None:
    change, findings = RESOLVE_CASES[name]
    doc = example_flow_doc()
    change(doc)
    assert _failed(_run(doc)) == ("resolve-inputs", findings)


@pytest.mark.fak_theorem("F1.3")
def test_files_that_do_not_load_fail_step_one_at_their_path(tmp_path: Path) -> None:
    bad = tmp_path / "ws.json"
    bad.write_text(json.dumps({**example_workspace_doc(), "users": [1, 2]}))
    out = preflight(
        ExistingFlow(EXAMPLE / "flow.yaml"), identity="alice", workspace=bad, task_id="t"
    )
    assert _failed(out) == ("resolve-inputs", [("WORKSPACE_INVALID", "users")])
    bad_flow = tmp_path / "f.json"
    bad_flow.write_text('{"name": "x", "repository": 3}')
    out = preflight(
        ExistingFlow(bad_flow), identity="alice", workspace=EXAMPLE / "workspace.yaml", task_id="t"
    )
    step, found = _failed(out)
    assert step == "resolve-inputs" and [c for c, _ in found] == ["FLOW_INVALID"]


@pytest.mark.fak_theorem("F1.3")
def test_references_by_digest_and_sub_agents_references_are_reauthorised() -> None:
    ws = example_workspace_doc()
    (planning,) = [c for c in ws["capabilities"] if c["name"] == "planning"]
    dig = planning["versions"][1]["digest"]
    doc = _subagent_flow()
    doc["nodes"][0]["subagents"][0]["skills"] = [f"planning@{dig}"]
    out = _run(doc, ws)
    assert out.ok, out.to_dict()
    (entry,) = [e for e in out.manifest.body["lock"] if e["name"] == "planning"]
    assert (entry["version"], entry["digest"]) == ("1.5.0", dig)
    sub = "nodes[0].subagents[0]"
    doc["nodes"][0]["subagents"][0]["skills"] = ["planning@sha256:" + "0" * 64]
    doc["nodes"][0]["subagents"][0]["tools"] = ["search_code"]
    assert _failed(_run(doc, ws)) == (
        "reauthorise",
        [("FLOATING_REFERENCE", f"{sub}.tools[0]"), ("UNKNOWN_DIGEST", f"{sub}.skills[0]")],
    )


# ---------------------------------------------------------------------------------- F1.4
SPLIT_KEYS = sorted(
    {
        word[:i] + sep + word[i:]
        for word in FORBIDDEN_KEY_WORDS
        for i in range(1, len(word))
        for sep in ("_", "-", "__", "_-")
    }
)


@pytest.mark.fak_theorem("F1.4")
def test_a_forbidden_key_word_is_refused_however_it_is_split() -> None:
    """``sys_prompt``, ``o-auth``, ``pass_word``: a forbidden word spelled with separators
    inside it is still that word."""
    missed = [k for k in SPLIT_KEYS if not scan({"runtime": {k: "x"}}, path="manifest")]
    assert not missed, missed[:10]
    found = scan({"runtime": {"sys_prompt": "x", "model": "m"}}, path="manifest")
    assert [(f.code, f.path) for f in found] == [
        ("SECRET_IN_MANIFEST", "manifest.runtime.sys_prompt")
    ]


# ------------------------------------------------------------------- F1.2: requirements
class CountingFetcher:
    """Reads requirement files under ``root`` and counts each location it is asked for."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.asked: list[str] = []

    def fetch(self, location: str) -> bytes:
        self.asked.append(location)
        return (self.root / location).read_bytes()


def _shared_requirement_flow() -> dict[str, Any]:
    """The example plus a requirement at the same location as ``product``, between the two."""
    doc = example_flow_doc()
    doc["requirements"].insert(
        1,
        {"name": "spec", "location": "requirements/product.md", "type": "requirements",
         "format": "markdown"}
    )  # fmt: skip
    doc["nodes"][2]["inputs"].append(
        {"name": "spec", "sources": ["requirement:spec"], "type": "requirements",
         "format": "markdown"}
    )  # fmt: skip
    return doc


_SHARED = _run(_shared_requirement_flow())
assert _SHARED.ok, _SHARED.to_dict()
SHARED: Manifest = _SHARED.manifest


def _root(tmp_path: Path) -> Path:
    root = Path(tempfile.mkdtemp(dir=tmp_path))
    (root / "requirements").mkdir()
    for f in (EXAMPLE / "requirements").iterdir():
        (root / "requirements" / f.name).write_bytes(f.read_bytes())
    return root


@pytest.mark.fak_theorem("F1.2")
def test_a_started_runner_fetches_each_source_once_and_serves_every_node_from_it(
    tmp_path: Path,
) -> None:
    root = _root(tmp_path)
    fetcher = CountingFetcher(root)
    runner = Runner(SHARED.to_json().encode(), fetcher, SHARED.digest)
    with pytest.raises(RuntimeError):
        runner.requirements  # noqa: B018 - nothing is materialised before the start
    assert runner.start() == SHARED
    doc = _shared_requirement_flow()
    locations = {r["location"] for r in doc["requirements"]}
    assert sorted(fetcher.asked) == sorted(locations)  # each source once
    content = {r["name"]: (root / r["location"]).read_bytes() for r in doc["requirements"]}
    assert set(runner.requirements) == {(loc, _sha((root / loc).read_bytes())) for loc in locations}
    for name, data in content.items():
        got = runner.requirements.named(name)
        assert (got.name, got.content, got.revision) == (name, data, _sha(data))
    for f in (root / "requirements").iterdir():
        f.write_text("changed mid-run")
    for node in doc["nodes"]:
        want = {
            i["name"]: content[src.removeprefix("requirement:")]
            for i in node["inputs"]
            for src in i["sources"]
            if src.startswith("requirement:")
        }
        for attempt in (1, 2):  # every attempt reads the copy materialised at the start
            inputs = runner.requirement_inputs(node["id"], attempt)
            assert {k: v.content for k, v in inputs.items()} == want, node["id"]
    assert runner.start() == SHARED
    assert sorted(fetcher.asked) == sorted(locations)


@pytest.mark.fak_theorem("F1.2")
@pytest.mark.parametrize("how", ["changed", "gone"])
@pytest.mark.parametrize("which", ["product.md", "acceptance.md"])
def test_a_source_that_changed_or_is_gone_refuses_the_start(
    tmp_path: Path, how: str, which: str
) -> None:
    root = _root(tmp_path)
    target = root / "requirements" / which
    if how == "changed":
        target.write_bytes(target.read_bytes() + b"\n")
    else:
        target.unlink()
    runner = Runner(SHARED, CountingFetcher(root), SHARED.digest)
    with pytest.raises(RunnerRefused) as err:
        runner.start()
    first = [r["location"] for r in SHARED.body["requirements"]].index(f"requirements/{which}")
    code = "REQUIREMENT_CHANGED" if how == "changed" else "REQUIREMENT_UNAVAILABLE"
    assert [(f.code, f.path) for f in err.value.findings] == [
        (code, f"manifest.requirements[{first}]")
    ]
    assert runner.manifest is None
