"""A workspace document means what it says: generated workspaces against hand-built answers.

Each generated workspace comes with the answers a resolver must give for it (name, budget,
models, repositories, users, capabilities and their versions, private values), built here
from the generator's own values with the defaults the theorem writes out. Broken
workspaces are a valid one with one part broken at a known place (the test's own table of
the shapes gives the path), or with a repository, capability or version named twice.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fak_core.flow.model import FlowSpecError
from fak_core.flow.resolver import (
    CapabilityInfo,
    FileWorkspace,
    Repository,
    User,
    VersionInfo,
)
from tests.flow.documents import copy_doc, get_at, join, refused_at, set_at

FAST = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
TEXT = st.text(alphabet="ab Z9-_./:*é", min_size=1, max_size=6)
TEXTS = st.lists(TEXT, max_size=2)
LEVELS = ("low", "medium", "high", "critical")
HEX = "0123456789abcdef"


@dataclass
class Expected:
    doc: dict[str, Any]
    name: str
    budget: tuple[int, int]
    models: tuple[str, ...] = ()
    repos: dict[str, Repository] = field(default_factory=dict)
    users: dict[str, User] = field(default_factory=dict)
    caps: dict[tuple[str, str], CapabilityInfo] = field(default_factory=dict)
    private: list[str] = field(default_factory=list)


def _auth() -> st.SearchStrategy[tuple[Any, list[str]]]:
    """An auth block of any JSON shape, and beside it, built from the same draws, every
    non-empty string it holds in document order: the values that must stay private."""
    text = st.one_of(st.just(""), TEXT).map(lambda t: (t, [t] if t else []))
    other = st.one_of(st.none(), st.booleans(), st.integers()).map(lambda v: (v, []))

    def nest(kids: st.SearchStrategy[tuple[Any, list[str]]]) -> Any:
        lists = st.lists(kids, max_size=2).map(
            lambda xs: ([v for v, _ in xs], [t for _, ts in xs for t in ts])
        )
        tables = st.dictionaries(st.sampled_from(["type", "ref", "key"]), kids, max_size=2).map(
            lambda d: ({k: v for k, (v, _) in d.items()}, [t for _, ts in d.values() for t in ts])
        )
        return st.one_of(lists, tables)

    return st.recursive(st.one_of(text, other), nest, max_leaves=5)


class Gen:
    def __init__(self, draw: st.DrawFn) -> None:
        self.draw = draw

    def maybe(self, doc: dict[str, Any], key: str, strategy: Any, default: Any) -> Any:
        if self.draw(st.booleans()):
            doc[key] = self.draw(strategy)
            return doc[key]
        return default


def _version(g: Gen, ver: str) -> tuple[dict[str, Any], VersionInfo]:
    digest = "sha256:" + g.draw(st.text(alphabet=HEX, min_size=64, max_size=64))
    doc: dict[str, Any] = {"version": ver, "digest": digest}
    withdrawn = g.maybe(doc, "withdrawn", st.booleans(), False)
    models = g.maybe(doc, "models", TEXTS, [])
    risk = g.maybe(doc, "risk", st.one_of(st.none(), st.sampled_from(LEVELS)), None)
    schema = g.maybe(doc, "schema", st.one_of(st.none(), st.just({"type": "object"})), None)
    return doc, VersionInfo(ver, digest, withdrawn, tuple(models), risk, schema)


@st.composite
def workspaces(draw: st.DrawFn) -> Expected:
    g = Gen(draw)
    budget = {
        "max_tokens": draw(st.integers(0, 10**9)),
        "max_runtime_s": draw(st.integers(0, 10**5)),
    }
    doc: dict[str, Any] = {"name": draw(TEXT), "budget": budget}
    g.maybe(doc, "version", st.just("fak-workspace/v1"), None)
    exp = Expected(doc, doc["name"], (budget["max_tokens"], budget["max_runtime_s"]))
    exp.models = tuple(g.maybe(doc, "models", TEXTS, []))
    if draw(st.booleans()):
        urls = draw(st.lists(TEXT, unique=True, max_size=2))
        doc["repositories"] = []
        for url in urls:
            r: dict[str, Any] = {"url": url}
            branches = g.maybe(r, "branches", TEXTS, [])
            doc["repositories"].append(r)
            exp.repos[url] = Repository(url, tuple(branches))
    if draw(st.booleans()):
        doc["users"] = {}
        for uname in draw(st.lists(TEXT, unique=True, max_size=2)):
            u: dict[str, Any] = {}
            grants = g.maybe(u, "grants", TEXTS, [])
            repos = g.maybe(u, "repositories", TEXTS, [])
            reqs = g.maybe(u, "requirements", TEXTS, ["*"])
            doc["users"][uname] = u
            exp.users[uname] = User(uname, tuple(grants), tuple(repos), tuple(reqs))
    if draw(st.booleans()):
        platform: dict[str, Any] = {}
        for key in ("system_prompt", "gateway"):
            value = g.maybe(platform, key, st.one_of(st.just(""), TEXT), "")
            if value:
                exp.private.append(value)
        doc["platform"] = platform
    if draw(st.booleans()):
        doc["capabilities"] = []
        names = draw(
            st.lists(
                st.tuples(st.sampled_from(["skill", "extension", "tool"]), TEXT),
                unique=True,
                max_size=3,
            )
        )
        for kind, name in names:
            c: dict[str, Any] = {"kind": kind, "name": name}
            gateway = g.maybe(c, "gateway", st.one_of(st.just(""), TEXT), "")
            if gateway:
                exp.private.append(gateway)
            if draw(st.booleans()):
                c["auth"], secrets = draw(_auth())
                exp.private.extend(secrets)
            versions: dict[str, VersionInfo] = {}
            if draw(st.booleans()):
                c["versions"] = []
                for ver in draw(st.lists(TEXT, unique=True, max_size=2)):
                    vdoc, info = _version(g, ver)
                    c["versions"].append(vdoc)
                    versions[ver] = info
            doc["capabilities"].append(c)
            exp.caps[(kind, name)] = CapabilityInfo(kind, name, versions)
    return exp


@pytest.mark.fak_theorem("F1.8")
@FAST
@given(exp=workspaces())
def test_a_workspace_answers_what_it_says(exp: Expected) -> None:
    ws = FileWorkspace(exp.doc, "ws.yaml")
    assert ws.name == exp.name
    assert ws.budget() == exp.budget
    assert ws.models() == exp.models
    for url, repo in exp.repos.items():
        assert ws.repository(url) == repo
    assert ws.repository("absent:" + "".join(exp.repos)) is None
    for uname, user in exp.users.items():
        assert ws.user(uname) == user
    assert ws.user("absent:" + "".join(exp.users)) is None
    for (kind, name), cap in exp.caps.items():
        assert ws.capability(kind, name) == cap
    assert ws.capabilities() == tuple(exp.caps[k] for k in sorted(exp.caps))
    assert ws.private_values() == tuple(dict.fromkeys(exp.private))


# ------------------------------------------------------------------------------ breakage
TABLES = {  # table kind -> allowed keys
    "top": (
        "version",
        "name",
        "budget",
        "models",
        "repositories",
        "users",
        "capabilities",
        "platform",
    ),
    "budget": ("max_tokens", "max_runtime_s"),
    "repository": ("url", "branches"),
    "user": ("grants", "repositories", "requirements"),
    "platform": ("system_prompt", "gateway"),
    "capability": ("kind", "name", "versions", "gateway", "auth"),
    "version": ("version", "digest", "withdrawn", "models", "risk", "schema"),
}
FIELDS = {  # table kind -> key -> value kind
    "top": {
        "version": "wsversion",
        "name": "name",
        "budget": "budget",
        "models": "strs",
        "repositories": "list:repository",
        "users": "users",
        "capabilities": "list:capability",
        "platform": "platform",
    },
    "budget": {"max_tokens": "int", "max_runtime_s": "int"},
    "repository": {"url": "url", "branches": "strs"},
    "user": {"grants": "strs", "repositories": "strs", "requirements": "strs"},
    "platform": {"system_prompt": "string", "gateway": "string"},
    "capability": {
        "kind": "kind",
        "name": "capname",
        "versions": "list:version",
        "gateway": "string",
    },
    "version": {
        "version": "vername",
        "digest": "digest",
        "withdrawn": "bool",
        "models": "strs",
        "risk": "risk",
        "schema": "schema",
    },
}
BAD = {  # value kind -> [(bad value, expected text)]
    "wsversion": [
        ("fak-workspace/v2", "expected 'fak-workspace/v1'"),
        (1, "expected 'fak-workspace/v1'"),
    ],
    "name": [("", "non-empty string"), (3, "non-empty string"), (None, "non-empty string")],
    "int": [
        (-1, "non-negative integer"),
        (True, "non-negative integer"),
        ("3", "non-negative integer"),
        (2.0, "non-negative integer"),
        (None, "non-negative integer"),
    ],
    "strs": [
        ("a", "expected a list of strings"),
        ([""], "expected a list of strings"),
        ([3], "expected a list of strings"),
        (["a", None], "expected a list of strings"),
    ],
    "url": [("", "expected a repository URL"), (7, "expected a repository URL")],
    "string": [
        (7, "expected a string"),
        (["x"], "expected a string"),
        ({"k": "v"}, "expected a string"),
    ],
    "kind": [("skills", "expected one of skill, extension, tool"), (None, "expected one of")],
    "capname": [("", "expected a capability name"), (5, "expected a capability name")],
    "vername": [
        ("", "expected an exact version string"),
        (1.5, "expected an exact version string"),
    ],
    "digest": [
        ("sha256:" + "A" * 64, "expected sha256:<64 lowercase hex digits>"),
        ("sha256:" + "g" * 64, "64 lowercase hex"),
        ("sha256:" + "a" * 63, "64 lowercase hex"),
        ("sha512:" + "a" * 64, "64 lowercase hex"),
        (None, "64 lowercase hex"),
    ],
    "bool": [
        ("yes", "expected true or false"),
        (1, "expected true or false"),
        (None, "expected true or false"),
    ],
    "risk": [("severe", "expected one of low, medium, high, critical"), (3, "expected one of")],
    "schema": [
        ("object", "expected a JSON Schema object"),
        ([{}], "expected a JSON Schema object"),
    ],
}
LISTS = {
    "list:repository": "expected a list of {url, branches}",
    "list:capability": "expected a list of capabilities",
    "list:version": "expected a list of versions",
}
REQUIRED = {  # table kind -> required key -> (expected path suffix, text) when removed
    "top": {
        "name": ("name", "non-empty string"),
        "budget": ("budget.max_tokens", "non-negative integer"),
    },
    "budget": {
        "max_tokens": ("max_tokens", "non-negative integer"),
        "max_runtime_s": ("max_runtime_s", "non-negative integer"),
    },
    "repository": {"url": ("url", "expected a repository URL")},
    "capability": {
        "kind": ("kind", "expected one of"),
        "name": ("name", "expected a capability name"),
    },
    "version": {
        "version": ("version", "exact version string"),
        "digest": ("digest", "64 lowercase hex"),
    },
}

Edit = Callable[[Any], None]


def sites(
    value: Any, kind: str, where: tuple[Any, ...] = (), path: str = ""
) -> Iterator[tuple[tuple[Any, ...], str, str]]:
    yield where, kind, path
    if kind in FIELDS:
        for key, sub in FIELDS[kind].items():
            if key in value:
                yield from sites(value[key], sub, (*where, key), join(path, key))
    elif kind.startswith("list:"):
        for i, item in enumerate(value):
            yield from sites(item, kind[5:], (*where, i), f"{path}[{i}]")
    elif kind == "users":
        for uname, u in value.items():
            yield from sites(u, "user", (*where, uname), f"{path}.{uname}")


def breakages(
    doc: dict[str, Any], where: tuple[Any, ...], kind: str, path: str
) -> list[tuple[Edit, str, str]]:
    out: list[tuple[Edit, str, str]] = []

    def put(value: Any) -> Edit:
        return lambda d: set_at(d, where, value)

    if kind in TABLES:
        allowed = TABLES[kind]
        out.append(
            (
                lambda d: get_at(d, where).update(zz=1),
                join(path, "zz"),
                "unknown key; valid keys: " + ", ".join(allowed),
            )
        )
        out.append(
            (
                lambda d: get_at(d, where).update(zz=1, yy=2),
                join(path, "zz"),
                "unknown key",
            )
        )  # the first unknown key in the document's order is named
        for key, (suffix, text) in REQUIRED.get(kind, {}).items():
            out.append((lambda d, key=key: get_at(d, where).pop(key), join(path, suffix), text))
        if where:
            out.append((put(["x"]), path, "expected a table/object"))
    elif kind in LISTS:
        out.append((put({"a": 1}), path, LISTS[kind]))
        out.append((put("x"), path, LISTS[kind]))
    elif kind == "users":
        out.append((put(["x"]), path, "expected a table/object"))
    for bad, text in BAD.get(kind, []):
        out.append((put(bad), path, text))
    return out


def every_break(doc: dict[str, Any]) -> Iterator[tuple[dict[str, Any], str, str]]:
    for where, kind, path in list(sites(doc, "top")):
        for edit, bad_path, text in breakages(doc, where, kind, path):
            broken = copy_doc(doc)
            edit(broken)
            yield broken, bad_path, text
    yield from _duplicates(doc)


def _duplicates(doc: dict[str, Any]) -> Iterator[tuple[dict[str, Any], str, str]]:
    """The doc with a repository, a capability or a version listed twice (the copy second)."""
    for key, what, name_key in (
        ("repositories", "duplicate repository", "url"),
        ("capabilities", "duplicate capability", "name"),
    ):
        items = doc.get(key) or []
        if items:
            broken = copy_doc(doc)
            broken[key].append(copy_doc(items[0]))
            yield broken, f"{key}[{len(items)}].{name_key}", what
    for i, cap in enumerate(doc.get("capabilities") or []):
        versions = cap.get("versions") or []
        if versions:
            broken = copy_doc(doc)
            broken["capabilities"][i]["versions"].append(copy_doc(versions[0]))
            yield (
                broken,
                f"capabilities[{i}].versions[{len(versions)}].version",
                "duplicate version",
            )


def check_refused(doc: dict[str, Any], path: str, text: str) -> None:
    refused_at(lambda: FileWorkspace(doc, "ws.yaml"), "ws.yaml", path, text)


@pytest.mark.fak_theorem("F1.8")
@FAST
@given(exp=workspaces())
def test_each_single_broken_part_is_refused_at_its_path(exp: Expected) -> None:
    for doc, path, text in every_break(exp.doc):
        check_refused(doc, path, text)


FULL: dict[str, Any] = {
    "version": "fak-workspace/v1",
    "name": "w",
    "budget": {"max_tokens": 5, "max_runtime_s": 0},
    "models": ["m1", "m2"],
    "repositories": [{"url": "https://r/a.git", "branches": ["main"]}, {"url": "https://r/b.git"}],
    "users": {
        "alice": {"grants": ["tool:*"], "repositories": ["https://r/*"], "requirements": ["req/*"]},
        "bob": {},
    },
    "platform": {"system_prompt": "secret system prompt", "gateway": "https://gw.internal"},
    "capabilities": [
        {
            "kind": "tool",
            "name": "t",
            "gateway": "https://mcp/t",
            "auth": {"type": "oauth", "ref": ["vault://a", 3]},
            "versions": [
                {
                    "version": "1.0.0",
                    "digest": "sha256:" + "a" * 64,
                    "withdrawn": True,
                    "models": ["m1"],
                    "risk": "high",
                    "schema": {"type": "object"},
                },
                {"version": "1.1.0", "digest": "sha256:" + "b" * 64},
            ],
        },
        {
            "kind": "skill",
            "name": "t",
            "versions": [
                {"version": "2.0.0", "digest": "sha256:" + "c" * 64, "risk": None, "schema": None}
            ],
        },
        {"kind": "extension", "name": "e"},
    ],
}


@pytest.mark.fak_theorem("F1.8")
def test_each_single_broken_part_of_a_full_workspace_is_refused_at_its_path() -> None:
    seen = 0
    for doc, path, text in every_break(FULL):
        check_refused(doc, path, text)
        seen += 1
    assert seen > 100


@pytest.mark.fak_theorem("F1.8")
def test_a_full_workspace_answers_what_it_says() -> None:
    ws = FileWorkspace(FULL, "ws")
    assert ws.user("bob") == User("bob", (), (), ("*",))
    assert ws.repository("https://r/b.git") == Repository("https://r/b.git", ())
    tool = ws.capability("tool", "t")
    assert tool is not None and tool.versions["1.0.0"] == VersionInfo(
        "1.0.0", "sha256:" + "a" * 64, True, ("m1",), "high", {"type": "object"}
    )
    assert tool.versions["1.1.0"] == VersionInfo("1.1.0", "sha256:" + "b" * 64)
    assert ws.capability("extension", "e") == CapabilityInfo("extension", "e", {})
    assert ws.private_values() == (
        "secret system prompt", "https://gw.internal", "https://mcp/t", "oauth", "vault://a",
    )  # fmt: skip


@pytest.mark.fak_theorem("F1.8")
@pytest.mark.parametrize("doc", [[], "ws", None, 3])
def test_a_workspace_that_is_not_a_table_is_refused(doc: Any) -> None:
    with pytest.raises(FlowSpecError) as info:
        FileWorkspace(doc, "ws")
    assert (info.value.origin, info.value.path) == ("ws", "")
    assert "expected a table/object" in info.value.expected
