"""A flow document means what it says: generated documents against a hand-built flow.

Each generated document comes with the flow it spells, built here field by field from the
generator's own values (the defaults of omitted keys written out from the theorem), and
with its normalised form (every key spelled out). Broken documents are a valid one with a
single part broken at a known place: the loader must refuse it with that place as the path
and the expectation written here. Files are written in JSON, TOML and YAML (suffixes in any
case) by serialisers of the test, one of which can repeat a key at any depth.
"""

from __future__ import annotations

import copy
import json
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import tomli_w
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fak_core.flow.model import (
    Artifact,
    Flow,
    FlowPolicy,
    FlowSpecError,
    InputSpec,
    Node,
    RequirementSpec,
    SubAgent,
    flow_from_dict,
    flow_to_dict,
    load_document,
    load_flow,
)
from fak_core.flow.refs import CapabilityRef
from tests.flow.documents import copy_doc, get_at, join, refused_at, set_at

FAST = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])

TEXT = st.text(alphabet="ab Z9-_./:{}é日", min_size=1, max_size=6).filter(lambda s: s.strip() != "")
IDS = st.sampled_from(["a", "b", "plan", "review", "x-1"])
REF_TEXTS = {
    "skill": ["planning@1.4.2", "planning", "scout@sha256:" + "a" * 64, "s@latest"],
    "extension": ["issues@3.1.0", "issues@^3"],
    "tool": ["read_file@1.2.0", "run_tests@0.9.1-rc.1", "grep", "w@sha256:" + "0" * 64],
}
LEVELS = ("low", "medium", "high", "critical")
INHERITABLE = ("model", "runtime", "skills", "extensions", "tools")
JSON_LEAF = st.one_of(
    st.booleans(), st.integers(-5, 10**6), TEXT, st.sampled_from([0.5, 2.25, -1.5])
)
JSON_VALUE = st.recursive(
    JSON_LEAF,
    lambda inner: st.one_of(
        st.lists(inner, max_size=2),
        st.dictionaries(st.sampled_from(["k", "v", "é"]), inner, max_size=2),
    ),
    max_leaves=4,
)


def ref(kind: str, text: str) -> CapabilityRef:
    """The reference ``text`` spells, read by hand (the refs grammar has its own witness)."""
    name, _, selector = text.partition("@")
    return CapabilityRef(kind, name, selector or None)


@dataclass
class Built:
    """A generated document, the flow it spells and its normalised form."""

    doc: dict[str, Any]
    flow: Flow
    normal: dict[str, Any]


class Draw:
    """Optional keys: present with a drawn value, or absent (the default stands)."""

    def __init__(self, draw: st.DrawFn) -> None:
        self.draw = draw

    def opt(
        self, doc: dict[str, Any], key: str, strategy: st.SearchStrategy[Any], default: Any
    ) -> Any:
        if self.draw(st.booleans()):
            doc[key] = self.draw(strategy)
            return doc[key]
        return default

    def refs(self, doc: dict[str, Any], key: str, kind: str) -> tuple[CapabilityRef, ...]:
        texts = self.opt(doc, key, st.lists(st.sampled_from(REF_TEXTS[kind]), max_size=2), [])
        return tuple(ref(kind, t) for t in texts)


def _input(dr: Draw) -> tuple[dict[str, Any], InputSpec, dict[str, Any]]:
    draw = dr.draw
    doc: dict[str, Any] = {"name": draw(TEXT), "type": draw(TEXT)}
    how = draw(st.sampled_from(["source", "sources", "none"]))
    sources: tuple[str, ...] = ()
    if how == "source":
        doc["source"] = draw(TEXT)
        sources = (doc["source"],)
    elif how == "sources":
        doc["sources"] = draw(st.lists(TEXT, max_size=2))
        sources = tuple(doc["sources"])
    fmt = dr.opt(doc, "format", st.one_of(st.none(), TEXT), None)
    required = dr.opt(doc, "required", st.booleans(), True)
    spec = InputSpec(doc["name"], sources, doc["type"], fmt, required)
    normal = {"name": spec.name, "sources": list(sources), "type": spec.type, "required": required}
    if fmt is not None:
        normal["format"] = fmt
    return doc, spec, normal


def _artifact(dr: Draw) -> tuple[dict[str, Any], Artifact, dict[str, Any]]:
    doc: dict[str, Any] = {"name": dr.draw(TEXT), "type": dr.draw(TEXT)}
    fmt = dr.opt(doc, "format", st.one_of(st.none(), TEXT), None)
    normal = {"name": doc["name"], "type": doc["type"]}
    if fmt is not None:
        normal["format"] = fmt
    return doc, Artifact(doc["name"], doc["type"], fmt), normal


def _subagent(dr: Draw) -> tuple[dict[str, Any], SubAgent, dict[str, Any]]:
    doc: dict[str, Any] = {"name": dr.draw(TEXT)}
    inherits = dr.opt(doc, "inherits", st.lists(st.sampled_from(INHERITABLE), max_size=2), [])
    skills = dr.refs(doc, "skills", "skill")
    tools = dr.refs(doc, "tools", "tool")
    normal = {
        "name": doc["name"],
        "inherits": list(inherits),
        "skills": [str(r) for r in skills],
        "tools": [str(r) for r in tools],
    }
    return doc, SubAgent(doc["name"], tuple(inherits), skills, tools), normal


def _many(
    dr: Draw, doc: dict[str, Any], key: str, part: Callable[[Draw], Any]
) -> tuple[list[Any], list[Any]]:
    """An optional list of parts: (built values, normalised documents)."""
    if not dr.draw(st.booleans()):
        return [], []
    parts = [part(dr) for _ in range(dr.draw(st.integers(0, 2)))]
    doc[key] = [p[0] for p in parts]
    return [p[1] for p in parts], [p[2] for p in parts]


def _runtime(dr: Draw) -> dict[str, Any]:
    runtime: dict[str, Any] = dr.draw(
        st.dictionaries(st.sampled_from(["image", "env", "é"]), JSON_VALUE, max_size=2)
    )
    for key in ("max_tokens", "timeout_s"):
        if dr.draw(st.booleans()):
            runtime[key] = dr.draw(st.integers(0, 10**6))
    return runtime


def _node(dr: Draw) -> tuple[dict[str, Any], Node, dict[str, Any]]:
    draw = dr.draw
    doc: dict[str, Any] = {"id": draw(IDS), "prompt": draw(TEXT), "model": draw(TEXT)}
    runtime = dr.opt(doc, "runtime", st.just(None).map(lambda _: _runtime(dr)), {})
    skills = dr.refs(doc, "skills", "skill")
    extensions = dr.refs(doc, "extensions", "extension")
    tools = dr.refs(doc, "tools", "tool")
    subagents, sub_normal = _many(dr, doc, "subagents", _subagent)
    approval = dr.opt(doc, "approval_required", st.booleans(), False)
    inputs, in_normal = _many(dr, doc, "inputs", _input)
    outputs, out_normal = _many(dr, doc, "outputs", _artifact)
    rework = dr.opt(doc, "rework_targets", st.lists(IDS, max_size=2), [])
    creds = dr.opt(
        doc, "credentials", st.lists(st.sampled_from(["vault://a/b", "env:X"]), max_size=2), []
    )
    node = Node(
        doc["id"], doc["prompt"], doc["model"], copy.deepcopy(runtime), skills, extensions, tools,
        tuple(subagents), approval, tuple(inputs), tuple(outputs), tuple(rework), tuple(creds),
    )  # fmt: skip
    normal = {
        "id": node.id, "prompt": node.prompt, "model": node.model, "runtime": runtime,
        "skills": [str(r) for r in skills], "extensions": [str(r) for r in extensions],
        "tools": [str(r) for r in tools], "subagents": sub_normal, "approval_required": approval,
        "inputs": in_normal, "outputs": out_normal, "rework_targets": list(rework),
        "credentials": list(creds),
    }  # fmt: skip
    return doc, node, normal


def _requirement(dr: Draw) -> tuple[dict[str, Any], RequirementSpec, dict[str, Any]]:
    doc: dict[str, Any] = {"name": dr.draw(TEXT), "location": dr.draw(TEXT)}
    rtype = dr.opt(doc, "type", TEXT, "requirements")
    fmt = dr.opt(doc, "format", st.one_of(st.none(), TEXT), None)
    normal = {"name": doc["name"], "location": doc["location"], "type": rtype}
    if fmt is not None:
        normal["format"] = fmt
    return doc, RequirementSpec(doc["name"], doc["location"], rtype, fmt), normal


@st.composite
def flows(draw: st.DrawFn) -> Built:
    dr = Draw(draw)
    budget = {
        "max_tokens": draw(st.integers(0, 10**9)),
        "max_runtime_s": draw(st.integers(0, 10**5)),
    }
    policy: dict[str, Any] = {"budget": budget}
    max_rework = dr.opt(policy, "max_rework", st.integers(0, 9), 2)
    threshold = dr.opt(policy, "approval_threshold", st.sampled_from(LEVELS), "high")
    repo = {"url": draw(TEXT), "baseline_branch": draw(TEXT)}
    doc: dict[str, Any] = {"name": draw(TEXT), "repository": repo, "policy": policy}
    dr.opt(doc, "version", st.just("fak-flow/v1"), None)
    reqs, req_normal = _many(dr, doc, "requirements", _requirement)
    parts = [_node(dr) for _ in range(draw(st.integers(1, 3)))]
    doc["nodes"] = [p[0] for p in parts]
    flow = Flow(
        doc["name"], repo["url"], repo["baseline_branch"],
        FlowPolicy(budget["max_tokens"], budget["max_runtime_s"], max_rework, threshold),
        tuple(p[1] for p in parts), tuple(reqs), "fak-flow/v1",
    )  # fmt: skip
    normal = {
        "version": "fak-flow/v1",
        "name": doc["name"],
        "repository": dict(repo),
        "requirements": req_normal,
        "policy": {
            "budget": dict(budget),
            "max_rework": max_rework,
            "approval_threshold": threshold,
        },
        "nodes": [p[2] for p in parts],
    }
    return Built(doc, flow, normal)


# ------------------------------------------------------------------------------ meaning
@pytest.mark.fak_theorem("F1.7")
@FAST
@given(built=flows())
def test_a_document_loads_to_the_flow_it_spells(built: Built) -> None:
    before = copy.deepcopy(built.doc)
    flow = flow_from_dict(built.doc, "gen")
    assert flow == built.flow
    assert built.doc == before, "the loader changed the document"
    assert flow_to_dict(flow) == built.normal
    assert flow_from_dict(flow_to_dict(flow)) == flow
    without = copy.deepcopy(built.normal)
    for node in without["nodes"]:
        del node["credentials"]
    assert flow_to_dict(flow, with_credentials=False) == without


# ------------------------------------------------------------------------------ breakage
# (path into the document, kind) of every part a breakage can hit
Site = tuple[tuple[Any, ...], str, str]

TABLES = {  # path kind -> (allowed keys, required keys)
    "flow": (
        ("version", "name", "repository", "requirements", "policy", "nodes"),
        ("name", "repository", "policy", "nodes"),
    ),
    "repository": (("url", "baseline_branch"), ("url", "baseline_branch")),
    "policy": (("budget", "max_rework", "approval_threshold"), ("budget",)),
    "budget": (("max_tokens", "max_runtime_s"), ("max_tokens", "max_runtime_s")),
    "requirement": (("name", "location", "type", "format"), ("name", "location")),
    "node": (
        (
            "id",
            "prompt",
            "model",
            "runtime",
            "skills",
            "extensions",
            "tools",
            "subagents",
            "approval_required",
            "inputs",
            "outputs",
            "rework_targets",
            "credentials",
        ),
        ("id", "prompt", "model"),
    ),
    "subagent": (("name", "inherits", "skills", "tools"), ("name",)),
    "input": (("name", "source", "sources", "type", "format", "required"), ("name", "type")),
    "output": (("name", "type", "format"), ("name", "type")),
}
FIELDS = {  # table kind -> key -> value kind
    "flow": {
        "name": "text",
        "repository": "repository",
        "requirements": "list:requirement",
        "policy": "policy",
        "nodes": "list:node",
        "version": "version",
    },
    "repository": {"url": "text", "baseline_branch": "text"},
    "policy": {"budget": "budget", "max_rework": "int", "approval_threshold": "level"},
    "budget": {"max_tokens": "int", "max_runtime_s": "int"},
    "requirement": {"name": "text", "location": "text", "type": "text", "format": "opttext"},
    "node": {
        "id": "text",
        "prompt": "text",
        "model": "text",
        "runtime": "runtime",
        "skills": "list:ref:skill",
        "extensions": "list:ref:extension",
        "tools": "list:ref:tool",
        "subagents": "list:subagent",
        "approval_required": "bool",
        "inputs": "list:input",
        "outputs": "list:output",
        "rework_targets": "list:text",
        "credentials": "list:text",
    },
    "subagent": {
        "name": "text",
        "inherits": "list:inherit",
        "skills": "list:ref:skill",
        "tools": "list:ref:tool",
    },
    "input": {
        "name": "text",
        "source": "text",
        "sources": "list:text",
        "type": "text",
        "format": "opttext",
        "required": "bool",
    },
    "output": {"name": "text", "type": "text", "format": "opttext"},
}


def sites(value: Any, kind: str, where: tuple[Any, ...] = (), path: str = "") -> Iterator[Site]:
    yield where, kind, path
    if kind in FIELDS:
        for key, sub in FIELDS[kind].items():
            if key in value and value[key] is not None:
                yield from sites(value[key], sub, (*where, key), join(path, key))
    elif kind.startswith("list:"):
        for i, item in enumerate(value):
            yield from sites(item, kind[5:], (*where, i), f"{path}[{i}]")
    elif kind == "runtime":
        yield from _json_sites(value, where, path)


def _json_sites(value: Any, where: tuple[Any, ...], path: str) -> Iterator[Site]:
    if isinstance(value, dict):
        for k, v in value.items():
            yield (*where, k), "json", join(path, k)
            yield from _json_sites(v, (*where, k), join(path, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield (*where, i), "json", f"{path}[{i}]"
            yield from _json_sites(v, (*where, i), f"{path}[{i}]")


# value kind -> [(bad value, expected text)]
BAD_VALUES: dict[str, list[tuple[Any, str]]] = {
    "text": [
        (3, "non-empty string"),
        ("", "non-empty string"),
        (" \t", "non-empty string"),
        (None, "non-empty string"),
    ],
    "int": [
        (-1, "non-negative integer"),
        (True, "non-negative integer"),
        ("3", "non-negative integer"),
        (1.0, "non-negative integer"),
    ],
    "bool": [("yes", "true or false"), (1, "true or false"), (None, "true or false")],
    "level": [
        ("severe", "expected one of low, medium, high, critical"),
        ("High", "expected one of"),
    ],
    "inherit": [("everything", "expected one of model, runtime, skills, extensions, tools")],
    "version": [("fak-flow/v2", "expected 'fak-flow/v1'"), (1, "expected 'fak-flow/v1'")],
    "ref:skill": [
        ("bad name@1.0.0", "bad capability name"),
        ("a@", "bad selector"),
        ("a@b@c", "bad selector"),
        (7, "expected a reference"),
    ],
    "json": [
        ({1, 2}, "expected a JSON value"),
        ((1, 2), "expected a JSON value"),
        (b"x", "expected a JSON value"),
    ],
}
BAD_VALUES["ref:tool"] = BAD_VALUES["ref:extension"] = BAD_VALUES["ref:skill"]
BAD_VALUES["opttext"] = BAD_VALUES["text"][:3]  # a format of null is no format


def breakages(
    doc: dict[str, Any], where: tuple[Any, ...], kind: str, path: str
) -> list[tuple[Callable[[Any], None], str, str]]:
    """Every single break of the part at ``where``: (edit, expected path, expected text)."""
    out: list[tuple[Callable[[Any], None], str, str]] = []
    here = get_at(doc, where)

    def put(value: Any) -> Callable[[Any], None]:
        return lambda d: set_at(d, where, value) if where else None

    if kind in TABLES:
        allowed, required = TABLES[kind]
        out.append(
            (
                lambda d: get_at(d, where).update(zz=1),
                join(path, "zz"),
                "unknown key; valid keys: " + ", ".join(allowed),
            )
        )
        out.append((lambda d: get_at(d, where).update({2: 1}), join(path, "2"), "unknown key"))
        for key in required:
            out.append(
                (
                    lambda d, key=key: get_at(d, where).pop(key),
                    join(path, key),
                    "required key is missing",
                )
            )
        if where:
            out.append((put([here]), path, "expected a table/object, got a list"))
            out.append((put("x"), path, "expected a table/object, got a string"))
        if kind == "input" and "sources" not in here and "source" not in here:
            out.append(
                (lambda d: get_at(d, where).update(source="a.b", sources=["a.b"]), path, "not both")
            )
    elif kind.startswith("list:"):
        out.append((put("x"), path, "expected a list, got a string"))
        out.append((put({"a": 1}), path, "expected a list, got a table"))
        if kind == "list:node":
            out.append((put([]), path, "expected at least one node"))
    elif kind == "runtime":
        out.append((put([here]), path, "expected a table/object, got a list"))
        out.append((lambda d: get_at(d, where).update({3: 1}), path, "expected string keys, got 3"))
        for key in ("max_tokens", "timeout_s"):
            for bad, text in BAD_VALUES["int"]:
                out.append(
                    (
                        lambda d, key=key, bad=bad: get_at(d, where).update({key: bad}),
                        f"{path}.{key}",
                        text,
                    )
                )
        out.append(
            (
                lambda d: get_at(d, where).update(nest={4: "x"}),
                f"{path}.nest",
                "expected string keys",
            )
        )
    for bad, text in BAD_VALUES.get(kind, []):
        if (
            kind == "json"
            and isinstance(get_at(doc, where[:-1]), dict)
            and where[-1] in ("max_tokens", "timeout_s")
            and len(where) == 4
        ):
            continue  # a runtime limit is an integer, checked first
        out.append((put(bad), path, text))
    return out


def every_break(doc: dict[str, Any]) -> Iterator[tuple[dict[str, Any], str, str]]:
    """Every document ``doc`` gives with a single part broken: (document, path, text)."""
    for where, kind, path in list(sites(doc, "flow")):
        for edit, bad_path, text in breakages(doc, where, kind, path):
            copy_ = copy_doc(doc)
            edit(copy_)
            yield copy_, bad_path, text


def check_refused(doc: dict[str, Any], path: str, text: str) -> None:
    err = refused_at(lambda: flow_from_dict(doc, "gen.json"), "gen.json", path, text)
    assert str(err) == (
        f"gen.json: {path}: {err.expected}" if path else f"gen.json: {err.expected}"
    )


@pytest.mark.fak_theorem("F1.7")
@FAST
@given(built=flows())
def test_each_single_broken_part_is_refused_at_its_path(built: Built) -> None:
    for doc, path, text in every_break(built.doc):
        check_refused(doc, path, text)


FULL: dict[str, Any] = {
    "version": "fak-flow/v1",
    "name": "full",
    "repository": {"url": "https://git.example/r.git", "baseline_branch": "main"},
    "requirements": [
        {"name": "p", "location": "req/p.md"},
        {"name": "q", "location": "req/q.md", "type": "spec", "format": "markdown"},
    ],
    "policy": {
        "budget": {"max_tokens": 10, "max_runtime_s": 0},
        "max_rework": 0,
        "approval_threshold": "low",
    },
    "nodes": [
        {
            "id": "a",
            "prompt": "p {{x}}",
            "model": "m",
            "runtime": {
                "image": "i",
                "max_tokens": 0,
                "timeout_s": 5,
                "env": {"k": [1, {"v": None}]},
            },
            "skills": ["s@1.0.0"],
            "extensions": ["e@sha256:" + "b" * 64],
            "tools": ["t@latest", "u"],
            "subagents": [
                {
                    "name": "sa",
                    "inherits": ["model", "tools"],
                    "skills": ["s@1.0.0"],
                    "tools": ["t@2.0.0"],
                },
                {"name": "sb"},
            ],
            "approval_required": True,
            "inputs": [
                {
                    "name": "x",
                    "source": "requirement:p",
                    "type": "requirements",
                    "format": "markdown",
                    "required": False,
                },
                {"name": "y", "sources": ["b.o", "requirement:q"], "type": "t"},
                {"name": "z", "type": "t", "format": None},
            ],
            "outputs": [{"name": "o", "type": "t", "format": "f"}, {"name": "o2", "type": "t"}],
            "rework_targets": ["b"],
            "credentials": ["vault://x/y"],
        },
        {"id": "b", "prompt": "q", "model": "m"},
    ],
}


@pytest.mark.fak_theorem("F1.7")
def test_each_single_broken_part_of_a_full_document_is_refused_at_its_path() -> None:
    seen = 0
    for doc, path, text in every_break(FULL):
        check_refused(doc, path, text)
        seen += 1
    assert seen > 200


@pytest.mark.fak_theorem("F1.7")
def test_a_minimal_document_takes_the_written_defaults() -> None:
    doc = {
        "name": "n",
        "repository": {"url": "u", "baseline_branch": "b"},
        "policy": {"budget": {"max_tokens": 1, "max_runtime_s": 2}},
        "nodes": [
            {
                "id": "a", "prompt": "p", "model": "m",
                "subagents": [{"name": "s"}],
                "inputs": [{"name": "i", "type": "t"}, {"name": "j", "type": "t", "source": "a.o"}],
                "outputs": [{"name": "o", "type": "t"}],
            }
        ],
        "requirements": [{"name": "r", "location": "l"}],
    }  # fmt: skip
    want = Flow(
        "n", "u", "b", FlowPolicy(1, 2, 2, "high"),
        (
            Node(
                "a", "p", "m", {}, (), (), (), (SubAgent("s", (), (), ()),), False,
                (InputSpec("i", (), "t", None, True), InputSpec("j", ("a.o",), "t", None, True)),
                (Artifact("o", "t", None),), (), (),
            ),
        ),
        (RequirementSpec("r", "l", "requirements", None),),
        "fak-flow/v1",
    )  # fmt: skip
    assert flow_from_dict(doc) == want


@pytest.mark.fak_theorem("F1.7")
@pytest.mark.parametrize("doc", [[], "flow", None, 3])
def test_a_document_that_is_not_a_table_is_refused(doc: Any) -> None:
    with pytest.raises(FlowSpecError) as info:
        flow_from_dict(doc, "f")
    assert (info.value.path, str(info.value)[:3]) == ("", "f: ")
    assert "expected a table/object" in info.value.expected


# ------------------------------------------------------------------------------ files
def _json_text(value: Any, dup: tuple[Any, ...] | None, where: tuple[Any, ...] = ()) -> str:
    """JSON text of ``value``; the object at ``dup`` repeats its first key (with value 0)."""
    if isinstance(value, dict):
        items = [
            f"{json.dumps(str(k), ensure_ascii=False)}: {_json_text(v, dup, (*where, k))}"
            for k, v in value.items()
        ]
        if dup == where and value:
            first = next(iter(value))
            items.append(f"{json.dumps(first, ensure_ascii=False)}: 0")
        return "{" + ", ".join(items) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(_json_text(v, dup, (*where, i)) for i, v in enumerate(value)) + "]"
    return json.dumps(value, ensure_ascii=False)


def _objects(value: Any, where: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    if isinstance(value, dict):
        if value:
            yield where
        for k, v in value.items():
            yield from _objects(v, (*where, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _objects(v, (*where, i))


def _no_nulls(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _no_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_no_nulls(v) for v in value]
    return value


SUFFIXES = {
    "json": [".json", ".JSON", ".Json"],
    "toml": [".toml", ".TOML"],
    "yaml": [".yaml", ".yml", ".YML", ".Yaml"],
}


def _write(
    fmt: str, suffix: str, doc: dict[str, Any], dup: tuple[Any, ...] | None, block: bool
) -> Path:
    d = Path(tempfile.mkdtemp())
    f = d / f"flow{suffix}"
    if fmt == "toml":
        f.write_text(tomli_w.dumps(doc), encoding="utf-8")
    elif fmt == "yaml" and block and dup is None:
        f.write_text(yaml.safe_dump(doc, allow_unicode=True), encoding="utf-8")
    else:  # JSON text is also a YAML flow mapping
        f.write_text(_json_text(doc, dup), encoding="utf-8")
    return f


@pytest.mark.fak_theorem("F1.7")
@FAST
@given(built=flows(), fmt=st.sampled_from(["json", "toml", "yaml"]), data=st.data())
def test_a_file_in_any_format_loads_to_the_same_flow(
    built: Built, fmt: str, data: st.DataObject
) -> None:
    doc = _no_nulls(built.doc)
    flow = flow_from_dict(doc)
    suffix = data.draw(st.sampled_from(SUFFIXES[fmt]))
    f = _write(fmt, suffix, doc, None, data.draw(st.booleans()))
    assert load_document(f) == doc
    loaded = load_flow(f)
    assert loaded == flow


@pytest.mark.fak_theorem("F1.7")
@FAST
@given(built=flows(), fmt=st.sampled_from(["json", "yaml"]), data=st.data())
def test_a_key_repeated_at_any_depth_is_refused(
    built: Built, fmt: str, data: st.DataObject
) -> None:
    doc = _no_nulls(built.doc)
    where = data.draw(st.sampled_from(list(_objects(doc))))
    first = next(iter(get_at(doc, where)))
    f = _write(fmt, data.draw(st.sampled_from(SUFFIXES[fmt])), doc, where, False)
    with pytest.raises(FlowSpecError) as info:
        load_flow(f)
    assert (info.value.origin, info.value.path) == (str(f), "")
    assert f"duplicate key {first!r}" in info.value.expected
    assert (
        "expected valid JSON" if fmt == "json" else "expected valid YAML"
    ) in info.value.expected


@pytest.mark.fak_theorem("F1.7")
@pytest.mark.parametrize(
    ("name", "data", "expected"),
    [
        ("f.json", b'{"a": 1, "b": {"c": 1, "c": 2}}', "expected valid JSON (duplicate key 'c')"),
        ("f.yaml", b"a: 1\nb:\n  c: 1\n  c: 2\n", "expected valid YAML: duplicate key 'c'"),
        ("f.toml", b"a = 1\na = 2\n", "expected valid TOML"),
        ("f.json", b'{"a": ', "expected valid JSON (line 1 column 7"),
        ("f.yml", b"a: [", "expected valid YAML"),
        ("f.yaml", b"!!python/object/apply:os.system ['true']", "expected valid YAML"),
        ("f.json", b'{"a": "\xff"}', "expected UTF-8 text"),
        ("f.toml", b"a = '\xc3'", "expected UTF-8 text"),
        ("f.txt", b"{}", "expected a .json, .toml, .yaml or .yml file"),
        ("f", b"{}", "expected a .json, .toml, .yaml or .yml file"),
        ("f.json.bak", b"{}", "expected a .json, .toml, .yaml or .yml file"),
    ],
)
def test_a_file_that_is_not_a_document_is_refused(name: str, data: bytes, expected: str) -> None:
    with tempfile.TemporaryDirectory() as d:
        f = Path(d) / name
        f.write_bytes(data)
        with pytest.raises(FlowSpecError) as info:
            load_document(f)
    assert (info.value.origin, info.value.path) == (str(f), "")
    assert info.value.expected.startswith(expected), info.value.expected


@pytest.mark.fak_theorem("F1.7")
def test_a_missing_or_unreadable_file_is_named() -> None:
    with tempfile.TemporaryDirectory() as d:
        for f in (Path(d) / "absent.json", Path(d)):
            with pytest.raises(FlowSpecError) as info:
                load_document(f)
            assert (info.value.origin, info.value.path) == (str(f), "")
            assert info.value.expected.startswith("cannot read the file: ")
