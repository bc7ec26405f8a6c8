"""D11: the servers file. A file of the documented shape is read as written; a file with
one fault anywhere is refused whole with a :class:`ServerConfigError` naming the server
and the key to fix (or the file). Generated: one to three servers of either transport,
every optional key present or not, then at most one fault from every kind the shape
rules out.

The oracle is the documented shape written out here (names by character class, keys by
hand), never the module's own constants or regular expression.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fak_core.gateway.mcp_downstream import (
    DownstreamSpec,
    ServerConfigError,
    load_servers,
    parse_servers,
)

NAME_CHARS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-"
KEYS = ("command", "args", "env", "cwd", "url", "headers", "timeout")


def _good_name(name: str) -> bool:
    return (
        1 <= len(name) <= 64
        and all(c in NAME_CHARS for c in name)
        and "__" not in name
        and not name.endswith("_")
    )


NAMES = st.text(NAME_CHARS, min_size=1, max_size=64).filter(_good_name)
TEXT = st.text(max_size=8)
STR_MAP = st.dictionaries(TEXT, TEXT, max_size=2)
TIMEOUTS = st.one_of(
    st.integers(1, 10**6),
    st.floats(min_value=1e-9, max_value=1e9),
    st.just(math.inf),
)


@st.composite
def _server(draw: st.DrawFn) -> dict[str, Any]:
    raw: dict[str, Any] = {}
    if draw(st.booleans()):
        raw["command"] = draw(st.text(min_size=1, max_size=8))
        for key, values in (("args", st.lists(TEXT, max_size=3)), ("env", STR_MAP)):
            if draw(st.booleans()):
                raw[key] = draw(values)
        if draw(st.booleans()):
            raw["cwd"] = draw(TEXT)
    else:
        raw["url"] = draw(st.sampled_from(["http://", "https://"])) + draw(TEXT)
        if draw(st.booleans()):
            raw["headers"] = draw(STR_MAP)
    if draw(st.booleans()):
        raw["timeout"] = draw(TIMEOUTS)
    return raw


#: A server-level fault: (what it breaks, the change, the fragments the message must hold
#: beside the server's name).
SERVER_FAULTS: list[tuple[str, Any, tuple[str, ...]]] = [
    ("not-a-table", ["command", "x"], ("table",)),
    ("not-a-table", "stdio", ("table",)),
    ("not-a-table", 7, ("table",)),
    ("unknown", {"colour": "red"}, ("'colour'",)),
    ("unknown", {"zz": 1, "Cmd": 2}, ("'Cmd'",)),
    ("unknown", {"mcpServers": {}}, ("'mcpServers'",)),
    ("set", {"command": 5}, ("'command'",)),
    ("set", {"command": None}, ("'command'",)),
    ("set-http", {"url": ["http://h"]}, ("'url'",)),
    ("set", {"cwd": 3}, ("'cwd'",)),
    ("set", {"timeout": True}, ("timeout",)),
    ("set", {"timeout": "5"}, ("timeout",)),
    ("set", {"timeout": 0}, ("timeout",)),
    ("set", {"timeout": -0.5}, ("timeout",)),
    ("set", {"timeout": math.nan}, ("timeout",)),
    ("set", {"args": "a b"}, ("'args'",)),
    ("set", {"args": ["a", 1]}, ("'args'",)),
    ("set", {"env": ["A=1"]}, ("'env'",)),
    ("set", {"env": {"A": 1}}, ("'env'",)),
    ("set-http", {"headers": "X: 1"}, ("'headers'",)),
    ("set-http", {"headers": {"X": None}}, ("'headers'",)),
    ("set", {"url": "http://h/mcp"}, ("'command'", "'url'")),
    ("set", {"command": ""}, ("'command'", "'url'")),
    ("set-http", {"url": "ftp://h/mcp"}, ("http://",)),
    ("set-http", {"url": "\uff48ttp://h/mcp"}, ("http://",)),  # a fullwidth h: not a scheme
    ("set-http", {"url": ""}, ("'command'", "'url'")),
]
BAD_NAMES = ["", "a b", "a__b", "a_", "x" * 65, "caf\u00e9", "a.b", "__"]


def _expected(name: str, raw: dict[str, Any]) -> tuple[Any, ...]:
    """A valid server as the file writes it: the fields a spec is read as."""
    timeout = raw.get("timeout")
    return (
        name,
        raw.get("command", ""),
        tuple(raw.get("args", [])),
        dict(raw.get("env", {})),
        raw.get("cwd"),
        raw.get("url", ""),
        dict(raw.get("headers", {})),
        None if timeout is None else float(timeout),
        "http" if "url" in raw else "stdio",
    )


def _read(spec: DownstreamSpec) -> tuple[Any, ...]:
    assert spec.timeout is None or type(spec.timeout) is float
    return (
        spec.name,
        spec.command,
        spec.args,
        dict(spec.env),
        spec.cwd,
        spec.url,
        dict(spec.headers),
        spec.timeout,
        spec.transport,
    )


def _same(a: tuple[Any, ...], b: tuple[Any, ...]) -> bool:
    return a == b or (
        a[:-2] == b[:-2] and a[-1] == b[-1] and isinstance(a[-2], float) and math.isnan(a[-2])
    )


@st.composite
def _fault(
    draw: st.DrawFn, servers: dict[str, dict[str, Any]]
) -> tuple[Any, str | None, tuple[str, ...]]:
    """The document with at most one fault, the server it is in (None: no fault; "" a fault
    outside any server), and what its message must hold."""
    key = draw(st.sampled_from(["servers", "mcpServers"]))
    kind = draw(st.sampled_from(["none", "top", "server", "name"]))
    doc: Any = {key: servers}
    if kind == "none":
        return doc, None, ()
    if kind == "top":
        choice = draw(st.integers(0, 5))
        if choice == 0:
            return draw(st.sampled_from([[servers], "servers", None, 3])), "", ("JSON object",)
        if choice == 1:
            extras = draw(
                st.lists(
                    st.sampled_from(["server", "Servers", "x", ""]),
                    min_size=1,
                    max_size=2,
                    unique=True,
                )
            )
            return {**doc, **{e: {} for e in extras}}, "", (repr(sorted(extras)[0]),)
        if choice == 2:
            return {"servers": servers, "mcpServers": servers}, "", ("'servers'",)
        if choice == 3:
            return {}, "", ("'servers'",)
        if choice == 4:
            return {key: {}}, "", ("'servers'",)
        return {key: draw(st.sampled_from([[], "a", 1]))}, "", ("'servers'",)
    names = list(servers)
    at = names[draw(st.integers(0, len(names) - 1))]
    if kind == "name":
        bad = draw(st.sampled_from([b for b in BAD_NAMES if b not in servers]))
        rebuilt = {(bad if n == at else n): raw for n, raw in servers.items()}
        return {key: rebuilt}, bad, ()
    how, change, fragments = draw(st.sampled_from(SERVER_FAULTS))
    raw = dict(servers[at])
    if how == "not-a-table":
        broken: Any = change
    elif how == "unknown":
        broken = {**raw, **change}
    else:
        base = {"url": "http://h/mcp"} if how == "set-http" else {"command": "c"}
        kept = {k: v for k, v in raw.items() if k == "timeout"}
        broken = {**base, **kept, **change}
    return {key: {**servers, at: broken}}, at, fragments


SERVERS = st.dictionaries(NAMES, _server(), min_size=1, max_size=3)


@pytest.mark.fak_theorem("D11")
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_a_servers_document_is_read_as_written_or_refused_naming_the_fault(
    data: st.DataObject,
) -> None:
    servers = data.draw(SERVERS)
    doc, at, fragments = data.draw(_fault(servers))
    if at is None:
        specs = parse_servers(doc)
        want = [_expected(n, raw) for n, raw in servers.items()]
        got = [_read(s) for s in specs]
        assert len(got) == len(want) and all(map(_same, got, want)), (got, want)
        return
    with pytest.raises(ServerConfigError) as caught:
        parse_servers(doc)
    message = str(caught.value)
    if at:
        assert f"server {at!r}" in message or f"server name {at!r}" in message, message
    for fragment in fragments:
        assert fragment in message, message


@pytest.mark.fak_theorem("D11")
@pytest.mark.parametrize("name", ["a", "A-9", "x" * 64, "a_b-", "-", "a-_b", "0"])
def test_the_name_rule_at_its_edges_accepts(name: str) -> None:
    assert _good_name(name)
    (spec,) = parse_servers({"servers": {name: {"command": "c"}}})
    assert spec.name == name


@pytest.mark.fak_theorem("D11")
@pytest.mark.parametrize("name", BAD_NAMES)
def test_the_name_rule_at_its_edges_refuses(name: str) -> None:
    assert not _good_name(name)
    with pytest.raises(ServerConfigError, match="server name"):
        parse_servers({"servers": {name: {"command": "c"}}})


TOML = (
    '[servers.files]\ncommand = "python"\nargs = ["-m", "files"]\nenv = { A = "1" }\n'
    '[servers.web]\nurl = "https://h/mcp"\nheaders = { X-Key = "k" }\ntimeout = 5\n'
)
WANT = [
    ("files", "python", ("-m", "files"), {"A": "1"}, None, "", {}, None, "stdio"),
    ("web", "", (), {}, None, "https://h/mcp", {"X-Key": "k"}, 5.0, "http"),
]


@pytest.mark.fak_theorem("D11")
@pytest.mark.parametrize("suffix", [".toml", ".TOML", ".Toml"])
def test_a_file_named_toml_in_any_case_is_toml(tmp_path: Path, suffix: str) -> None:
    path = tmp_path / f"servers{suffix}"
    path.write_text(TOML, encoding="utf-8")
    assert [_read(s) for s in load_servers(path)] == WANT
    path.write_text(json.dumps({"servers": {"a": {"command": "c"}}}), encoding="utf-8")
    with pytest.raises(ServerConfigError) as caught:
        load_servers(path)
    assert str(caught.value).startswith(f"{path}: not valid {suffix[1:]}: "), caught.value


@pytest.mark.fak_theorem("D11")
@pytest.mark.parametrize("suffix", [".json", "", ".conf", ".tom"])
def test_any_other_file_is_json(tmp_path: Path, suffix: str) -> None:
    path = tmp_path / f"servers{suffix}"
    files = {"command": "python", "args": ["-m", "files"], "env": {"A": "1"}}
    web = {"url": "https://h/mcp", "headers": {"X-Key": "k"}, "timeout": 5}
    doc = {"servers": {"files": files, "web": web}}
    path.write_text(json.dumps(doc), encoding="utf-8")
    assert [_read(s) for s in load_servers(path)] == WANT
    path.write_text(TOML, encoding="utf-8")
    with pytest.raises(ServerConfigError) as caught:
        load_servers(path)
    kind = suffix[1:] or "JSON"
    assert str(caught.value).startswith(f"{path}: not valid {kind}: "), caught.value


@pytest.mark.fak_theorem("D11")
def test_a_file_that_cannot_be_read_is_named(tmp_path: Path) -> None:
    missing = tmp_path / "absent.json"
    with pytest.raises(ServerConfigError) as caught:
        load_servers(missing)
    assert str(caught.value).startswith(f"cannot read servers file {missing}: "), caught.value
    latin = tmp_path / "latin.json"
    latin.write_bytes(b'{"servers": {"caf\xe9": {"command": "c"}}}')
    with pytest.raises(ServerConfigError) as caught:
        load_servers(latin)
    assert str(latin) in str(caught.value) and "UTF-8" in str(caught.value), caught.value
    folder = tmp_path / "folder.json"
    folder.mkdir()
    with pytest.raises(ServerConfigError, match="cannot read servers file"):
        load_servers(folder)


@pytest.mark.fak_theorem("D11")
def test_a_fault_inside_a_file_is_named_with_the_file(tmp_path: Path) -> None:
    path = tmp_path / "servers.json"
    path.write_text(json.dumps({"servers": {"web": {"url": "ftp://h"}}}), encoding="utf-8")
    with pytest.raises(ServerConfigError) as caught:
        load_servers(path)
    message = str(caught.value)
    assert message.startswith(f"{path}: server 'web': "), message
    assert "http://" in message, message


BASE: dict[str, Any] = {
    "files": {"command": "python", "args": ["-m", "files"], "env": {"A": "1"}, "timeout": 2},
    "web": {"url": "https://h/mcp", "headers": {"X-Key": "k"}},
}


@pytest.mark.fak_theorem("D11")
@pytest.mark.parametrize(("how", "change", "fragments"), SERVER_FAULTS)
@pytest.mark.parametrize("at", ["files", "web"])
def test_every_fault_of_a_server_is_refused_naming_it(
    how: str, change: Any, fragments: tuple[str, ...], at: str
) -> None:
    if how == "not-a-table":
        broken: Any = change
    elif how == "unknown":
        broken = {**BASE[at], **change}
    else:
        base = {"url": "http://h/mcp"} if how == "set-http" else {"command": "c"}
        broken = {**base, **change}
    with pytest.raises(ServerConfigError) as caught:
        parse_servers({"servers": {**BASE, at: broken}})
    message = str(caught.value)
    assert f"server {at!r}" in message, message
    for fragment in fragments:
        assert fragment in message, message


@pytest.mark.fak_theorem("D11")
@pytest.mark.parametrize(
    ("doc", "fragment"),
    [
        ([BASE], "JSON object"),
        ({"servers": BASE, "x": {}, "Servers": {}}, "'Servers'"),
        ({"servers": BASE, "mcpServers": BASE}, "'servers'"),
        ({}, "'servers'"),
        ({"mcpServers": {}}, "'servers'"),
        ({"servers": []}, "'servers'"),
    ],
)
def test_every_fault_of_the_document_is_refused_naming_it(doc: Any, fragment: str) -> None:
    with pytest.raises(ServerConfigError) as caught:
        parse_servers(doc)
    assert fragment in str(caught.value), caught.value
