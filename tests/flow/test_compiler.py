"""The shared compiler against an independent brute-force checker, plus determinism."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from fak_core.flow import compile_flow, flow_from_dict, flow_to_dict

IDS = ["a", "b", "c", "d", "e"]


def _source_choices(ids: list[str]) -> list[str]:
    return [f"{i}.{o}" for i in ids for o in ("out", "aux")] + [
        "requirement:spec",
        "requirement:nope",
        "zz.out",
        "out",
        "spec",
    ]


@st.composite
def flow_docs(draw: Any, unique_ids: bool = False) -> dict[str, Any]:
    n = draw(st.integers(1, 5))
    if unique_ids:
        ids = draw(st.lists(st.sampled_from(IDS), min_size=n, max_size=n, unique=True))
    else:
        ids = draw(st.lists(st.sampled_from(IDS), min_size=n, max_size=n))
    choices = _source_choices(IDS)
    nodes = []
    for nid in ids:
        outputs = [
            {"name": name, "type": draw(st.sampled_from(["t", "u"]))}
            for name in draw(st.lists(st.sampled_from(["out", "aux"]), max_size=3))
        ]
        inputs = [
            {
                "name": draw(st.sampled_from(["i", "j", "k"])),
                "sources": draw(st.lists(st.sampled_from(choices), max_size=2)),
                "type": draw(st.sampled_from(["t", "u"])),
                "required": draw(st.booleans()),
            }
            for _ in range(draw(st.integers(0, 3)))
        ]
        nodes.append(
            {
                "id": nid,
                "prompt": "do the work",
                "model": "m",
                "inputs": inputs,
                "outputs": outputs,
                "rework_targets": draw(st.lists(st.sampled_from([*IDS, "zz"]), max_size=2)),
            }
        )
    return {
        "name": "gen",
        "repository": {"url": "https://example.com/r.git", "baseline_branch": "main"},
        "requirements": [{"name": "spec", "location": "spec.md", "type": "t"}],
        "policy": {"budget": {"max_tokens": 1, "max_runtime_s": 1}},
        "nodes": nodes,
    }


def brute_force(
    doc: dict[str, Any], edges_out: set[tuple[str, str]] | None = None
) -> set[tuple[str, str]]:
    """Findings by exhaustive, obviously-correct means (no DFS, no topological sort);
    ``edges_out`` receives the dependency edges (producer, consumer)."""
    nodes = doc["nodes"]
    ids = [n["id"] for n in nodes]
    out: set[tuple[str, str]] = set()
    for i in range(len(nodes)):
        if ids[i] in ids[:i]:
            out.add(("DUPLICATE_NODE_ID", f"nodes[{i}].id"))
    produced: dict[tuple[str, str], str] = {}
    for n in nodes:
        for o in n["outputs"]:
            produced.setdefault((n["id"], o["name"]), o["type"])
    reqs = {r["name"]: r["type"] for r in doc["requirements"]}
    edges = edges_out if edges_out is not None else set()
    for i, n in enumerate(nodes):
        for kind, items in (("INPUT", n["inputs"]), ("ARTIFACT", n["outputs"])):
            names = [x["name"] for x in items]
            for j in range(len(names)):
                if names[j] in names[:j]:
                    field = "inputs" if kind == "INPUT" else "outputs"
                    out.add((f"DUPLICATE_{kind}", f"nodes[{i}].{field}[{j}].name"))
        for j, inp in enumerate(n["inputs"]):
            base = f"nodes[{i}].inputs[{j}]"
            if inp["required"] and len(inp["sources"]) == 0:
                out.add(("MISSING_SOURCE", base))
            if len(inp["sources"]) >= 2:
                out.add(("MULTIPLE_SOURCES", base + ".sources"))
            for k, src in enumerate(inp["sources"]):
                path = f"{base}.sources[{k}]"
                if src.startswith("requirement:"):
                    typ = reqs.get(src.split(":", 1)[1])
                elif src.count(".") == 1:
                    owner, name = src.split(".")
                    typ = produced.get((owner, name))
                else:
                    out.add(("UNQUALIFIED_REFERENCE", path))
                    continue
                if typ is None:
                    out.add(("UNKNOWN_SOURCE", path))
                    continue
                if not src.startswith("requirement:"):
                    edges.add((src.split(".")[0], n["id"]))
                if typ != inp["type"]:
                    out.add(("TYPE_MISMATCH", path))
    # reachability by Warshall's algorithm over every id pair
    vs = sorted(set(ids))
    reach = {(a, b): (a, b) in edges for a in vs for b in vs}
    for k, a, b in itertools.product(vs, vs, vs):
        if reach[(a, k)] and reach[(k, b)]:
            reach[(a, b)] = True
    for v in vs:
        if reach[(v, v)]:
            out.add(("CYCLE", f"nodes[{ids.index(v)}]"))
    for i, n in enumerate(nodes):
        for k, t in enumerate(n["rework_targets"]):
            legal = t != n["id"] and t in vs and reach[(t, n["id"])]
            if not legal:
                out.add(("ILLEGAL_REWORK_TARGET", f"nodes[{i}].rework_targets[{k}]"))
    return out


def brute_order(ids: list[str], edges: set[tuple[str, str]]) -> list[str]:
    """The smallest-id-first topological order, by scanning every remaining id each step."""
    order: list[str] = []
    while len(order) < len(ids):
        ready = [i for i in ids if i not in order and all(a in order for a, b in edges if b == i)]
        order.append(min(ready))
    return order


def _check(doc: dict[str, Any]) -> None:
    compiled = compile_flow(flow_from_dict(doc))
    edges: set[tuple[str, str]] = set()
    assert {(f.code, f.path) for f in compiled.findings} == brute_force(doc, edges)
    for f in compiled.findings:  # a duplicate says which kind of name it repeats
        if f.code in ("DUPLICATE_INPUT", "DUPLICATE_ARTIFACT"):
            kind = "input" if f.code == "DUPLICATE_INPUT" else "output"
            assert f.message.startswith(f"{kind} name "), f.message
    if compiled.plan is not None:
        assert compiled.plan["order"] == brute_order(sorted({n["id"] for n in doc["nodes"]}), edges)


def _node(nid: str, source: str | None = None, out: bool = False) -> dict[str, Any]:
    inputs = [{"name": "i", "sources": [source], "type": "t", "required": True}] if source else []
    outputs = [{"name": "out", "type": "t"}] if out else []
    return {
        "id": nid,
        "prompt": "p",
        "model": "m",
        "inputs": inputs,
        "outputs": outputs,
        "rework_targets": [],
    }


# e feeds a and d feeds b: the order is no sorted list (c, d, b, e, a)
BACKWARD = {
    "name": "gen",
    "repository": {"url": "https://example.com/r.git", "baseline_branch": "main"},
    "requirements": [],
    "policy": {"budget": {"max_tokens": 1, "max_runtime_s": 1}},
    "nodes": [
        _node("a", "e.out"),
        _node("b", "d.out"),
        _node("c"),
        _node("d", out=True),
        _node("e", out=True),
    ],
}


@pytest.mark.fak_theorem("F1.5")
@settings(max_examples=250)
@given(flow_docs())
def test_compiler_matches_brute_force(doc: dict[str, Any]) -> None:
    _check(doc)


@pytest.mark.fak_theorem("F1.5")
@settings(max_examples=120)
@given(flow_docs(unique_ids=True))
@example(BACKWARD)
def test_compiler_matches_brute_force_with_unique_ids(doc: dict[str, Any]) -> None:
    _check(doc)
    if doc is BACKWARD:  # the model itself, against the order worked out by hand
        assert compile_flow(flow_from_dict(doc)).plan["order"] == ["c", "d", "b", "e", "a"]  # type: ignore[index]


def test_generators_reach_every_finding_kind() -> None:
    """The property above is only as good as its inputs: every code must be generated."""
    seen: set[str] = set()

    @settings(max_examples=400, database=None)
    @given(flow_docs())
    def collect(doc: dict[str, Any]) -> None:
        seen.update(code for code, _ in brute_force(doc))

    collect()
    assert seen >= {
        "DUPLICATE_NODE_ID",
        "DUPLICATE_INPUT",
        "DUPLICATE_ARTIFACT",
        "MISSING_SOURCE",
        "MULTIPLE_SOURCES",
        "UNQUALIFIED_REFERENCE",
        "UNKNOWN_SOURCE",
        "TYPE_MISMATCH",
        "CYCLE",
        "ILLEGAL_REWORK_TARGET",
    }


@pytest.mark.fak_theorem("F1.5")
@settings(max_examples=100)
@given(flow_docs(unique_ids=True), st.randoms(use_true_random=False))
def test_compilation_is_deterministic(doc: dict[str, Any], rnd: Any) -> None:
    flow = flow_from_dict(doc)
    first = compile_flow(flow)
    assert compile_flow(flow) == first
    assert compile_flow(flow_from_dict(flow_to_dict(flow))) == first
    shuffled = dict(doc, nodes=rnd.sample(doc["nodes"], len(doc["nodes"])))
    again = compile_flow(flow_from_dict(shuffled))
    assert again.ok == first.ok
    assert again.plan == first.plan  # node order in the file never changes the plan


OUT = {"name": "out", "type": "doc", "format": "md"}


def _two_nodes(b_inputs: list[dict[str, Any]], prompt: str = "go") -> dict[str, Any]:
    return {
        "name": "x",
        "repository": {"url": "u", "baseline_branch": "main"},
        "requirements": [{"name": "spec", "location": "s", "type": "doc", "format": "md"}],
        "policy": {"budget": {"max_tokens": 1, "max_runtime_s": 1}},
        "nodes": [
            {"id": "a", "prompt": "p", "model": "m", "outputs": [OUT]},
            {"id": "b", "prompt": prompt, "model": "m", "inputs": b_inputs},
        ],
    }


@pytest.mark.fak_theorem("F1.5")
def test_format_contract_mismatch_is_found() -> None:
    doc = _two_nodes([{"name": "x", "source": "a.out", "type": "doc", "format": "html"}])
    (f,) = compile_flow(flow_from_dict(doc)).findings
    assert (f.code, f.path) == ("FORMAT_MISMATCH", "nodes[1].inputs[0].sources[0]")


@pytest.mark.fak_theorem("F1.5")
def test_placeholders_may_not_create_implicit_edges() -> None:
    ok = _two_nodes([{"name": "x", "source": "a.out", "type": "doc"}], "use {{ x }}")
    assert compile_flow(flow_from_dict(ok)).ok
    implicit = _two_nodes([], "use {{a.out}} too")
    codes = [f.code for f in compile_flow(flow_from_dict(implicit)).findings]
    assert codes == ["IMPLICIT_DEPENDENCY"]
    unknown = _two_nodes([], "use {{ y }}")
    assert [f.code for f in compile_flow(flow_from_dict(unknown)).findings] == [
        "UNKNOWN_PLACEHOLDER"
    ]
    # a declared placeholder before them does not end the scan
    x = [{"name": "x", "source": "a.out", "type": "doc"}]
    for prompt, code in (
        ("use {{ x }} and {{a.out}}", "IMPLICIT_DEPENDENCY"),
        ("use {{ x }} and {{ y }}", "UNKNOWN_PLACEHOLDER"),
    ):
        (f,) = compile_flow(flow_from_dict(_two_nodes(x, prompt))).findings
        assert (f.code, f.path) == (code, "nodes[1].prompt")
        if code == "IMPLICIT_DEPENDENCY":  # the finding says what to do instead
            assert f.message.endswith("only declared inputs may be used"), f.message


@pytest.mark.fak_theorem("F1.5")
def test_plan_lists_edges_requirements_and_rework() -> None:
    doc = _two_nodes(
        [
            {"name": "x", "source": "a.out", "type": "doc"},
            {"name": "s", "source": "requirement:spec", "type": "doc", "format": "md"},
        ]
    )
    doc["nodes"][1]["rework_targets"] = ["a"]
    plan = compile_flow(flow_from_dict(doc)).plan
    assert plan == {
        "order": ["a", "b"],
        "edges": [{"from": "a", "output": "out", "to": "b", "input": "x"}],
        "requirement_inputs": [{"requirement": "spec", "to": "b", "input": "s"}],
        "rework": [{"from": "b", "to": "a"}],
    }


@pytest.mark.fak_theorem("F1.5")
def test_plan_order_does_not_depend_on_file_order() -> None:
    """A diamond (a -> b, a -> c, b and c -> d) plus an independent e, in every file order."""
    inp = [{"name": "x", "source": "a.out", "type": "doc"}]
    nodes = {
        "a": {"id": "a", "prompt": "p", "model": "m", "outputs": [OUT]},
        "b": {"id": "b", "prompt": "p", "model": "m", "inputs": inp, "outputs": [OUT]},
        "c": {"id": "c", "prompt": "p", "model": "m", "inputs": inp, "outputs": [OUT]},
        "d": {
            "id": "d",
            "prompt": "p",
            "model": "m",
            "inputs": [
                {"name": "x", "source": "b.out", "type": "doc"},
                {"name": "y", "source": "c.out", "type": "doc"},
            ],
        },
        "e": {"id": "e", "prompt": "p", "model": "m"},
    }
    base = _two_nodes([])
    plans = set()
    for order in itertools.permutations(nodes):
        plan = compile_flow(flow_from_dict(dict(base, nodes=[nodes[i] for i in order]))).plan
        assert plan is not None
        plans.add(tuple(plan["order"]))
    assert plans == {("a", "b", "c", "d", "e")}
