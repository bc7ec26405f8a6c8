"""Loading flows: three formats, one model; malformed files name the file, path and fix."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import tomli_w
import yaml

from fak_core.flow import FlowSpecError, flow_from_dict, flow_to_dict, load_flow, parse_ref

from .flowdata import EXAMPLE, example_flow_doc


def test_yaml_json_and_toml_load_to_the_same_flow(tmp_path: Path) -> None:
    doc = example_flow_doc()
    (tmp_path / "f.json").write_text(json.dumps(doc))
    (tmp_path / "f.toml").write_text(tomli_w.dumps(doc))
    (tmp_path / "f.yml").write_text(yaml.safe_dump(doc))
    flows = [load_flow(tmp_path / n) for n in ("f.json", "f.toml", "f.yml")]
    assert all(f == load_flow(EXAMPLE / "flow.yaml") for f in flows)
    assert flow_from_dict(flow_to_dict(load_flow(EXAMPLE / "flow.yaml"))) == load_flow(
        EXAMPLE / "flow.yaml"
    )


def _bad(edit: Any) -> dict[str, Any]:
    doc = example_flow_doc()
    edit(doc)
    return doc


@pytest.mark.parametrize(
    ("doc", "path", "expected"),
    [
        (
            _bad(lambda d: d["nodes"][1]["inputs"][0].update(sources=[3])),
            "nodes[1].inputs[0].sources[0]",
            "non-empty string",
        ),
        (_bad(lambda d: d["nodes"][0].update(colour="blue")), "nodes[0].colour", "unknown key"),
        (_bad(lambda d: d["nodes"][0].pop("model")), "nodes[0].model", "required key is missing"),
        (
            _bad(lambda d: d["nodes"][0].update(skills=["bad name@1.0.0"])),
            "nodes[0].skills[0]",
            "bad capability name",
        ),
        (
            _bad(lambda d: d["nodes"][0]["runtime"].update(max_tokens=-1)),
            "nodes[0].runtime.max_tokens",
            "non-negative integer",
        ),
        (
            _bad(lambda d: d["nodes"][0]["subagents"][0].update(inherits=["everything"])),
            "nodes[0].subagents[0].inherits[0]",
            "expected one of",
        ),
        (
            _bad(lambda d: d["policy"].update(approval_threshold="severe")),
            "policy.approval_threshold",
            "expected one of",
        ),
        (_bad(lambda d: d.update(nodes=[])), "nodes", "at least one node"),
        (
            _bad(lambda d: d["nodes"][2].update(approval_required="yes")),
            "nodes[2].approval_required",
            "true or false",
        ),
        (
            _bad(lambda d: d["nodes"][1]["inputs"][0].update(source="plan.plan")),
            "nodes[1].inputs[0]",
            "not both",
        ),
    ],
)
def test_malformed_flows_name_file_path_and_expectation(
    tmp_path: Path, doc: dict[str, Any], path: str, expected: str
) -> None:
    f = tmp_path / "flow.json"
    f.write_text(json.dumps(doc))
    with pytest.raises(FlowSpecError) as info:
        load_flow(f)
    assert info.value.origin == str(f)
    assert info.value.path == path
    assert expected in info.value.expected
    assert str(info.value).startswith(f"{f}: {path}: ")


@pytest.mark.parametrize(
    ("name", "text", "expected"),
    [
        ("f.json", '{"name": "a", "name": "b"}', "duplicate key 'name'"),
        ("f.yaml", "name: a\nname: b\n", "duplicate key 'name'"),
        ("f.json", "{", "expected valid JSON (line 1"),
        ("f.toml", "name = ", "expected valid TOML"),
        ("f.yaml", "a: [", "expected valid YAML"),
        ("f.yaml", "!!python/object:os.system {}", "expected valid YAML"),
        ("f.txt", "{}", "expected a .json, .toml, .yaml or .yml file"),
        ("f.json", "[1, 2]", "expected a table/object, got a list"),
    ],
)
def test_unreadable_documents_are_refused_clearly(
    tmp_path: Path, name: str, text: str, expected: str
) -> None:
    f = tmp_path / name
    f.write_text(text)
    with pytest.raises(FlowSpecError, match=re.escape(str(f))) as info:
        load_flow(f)
    assert expected in str(info.value)


def test_missing_file_is_named() -> None:
    with pytest.raises(FlowSpecError, match=r"absent\.yaml: cannot read the file"):
        load_flow("absent.yaml")


@pytest.mark.parametrize(
    ("text", "exact", "version", "digest"),
    [
        ("planning@1.4.2", True, "1.4.2", None),
        ("planning@1.4.2-rc.1+build.5", True, "1.4.2-rc.1+build.5", None),
        ("planning@sha256:" + "a" * 64, True, None, "sha256:" + "a" * 64),
        ("planning@latest", False, None, None),
        ("planning", False, None, None),
        ("planning@^1.4", False, None, None),
        ("planning@1.4", False, None, None),
        ("planning@01.4.2", False, None, None),
    ],
)
def test_capability_references(
    text: str, exact: bool, version: str | None, digest: str | None
) -> None:
    ref = parse_ref("skill", text)
    assert (ref.exact, ref.floating, ref.version, ref.digest) == (exact, not exact, version, digest)
    assert str(ref) == text


@pytest.mark.parametrize("text", ["", "@1.0.0", "a@b@c", "a@sha256:xyz", "a b", "a@"])
def test_malformed_references_are_refused(text: str) -> None:
    from fak_core.flow import RefError

    with pytest.raises(RefError):
        parse_ref("tool", text)
