"""The servers file, the ``fak mcp-proxy`` command, and the proxy over real stdio end to end."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from mcp import Client, StdioServerParameters

from fak_core.gateway.mcp_downstream import (
    DownstreamSpec,
    ServerConfigError,
    load_servers,
    parse_servers,
)

from .conftest import SERVERS, Downstream

MAIL = {"to": "bob@example.com", "subject": "Report", "body": "Attached."}


def test_servers_file_json_and_toml(tmp_path: Path) -> None:
    doc = {
        "servers": {
            "files": {"command": "python", "args": ["-m", "files"], "env": {"A": "1"}},
            "web": {"url": "http://127.0.0.1:9/mcp", "headers": {"X-Key": "k"}, "timeout": 5},
        }
    }
    j = tmp_path / "servers.json"
    j.write_text(json.dumps(doc))
    t = tmp_path / "servers.toml"
    t.write_text(
        '[servers.files]\ncommand = "python"\nargs = ["-m", "files"]\nenv = { A = "1" }\n'
        '[servers.web]\nurl = "http://127.0.0.1:9/mcp"\nheaders = { X-Key = "k" }\ntimeout = 5\n'
    )
    for path in (j, t):
        files, web = load_servers(path)
        assert (files.name, files.command, files.args, dict(files.env)) == (
            "files",
            "python",
            ("-m", "files"),
            {"A": "1"},
        )
        assert (web.transport, web.url, dict(web.headers), web.timeout) == (
            "http",
            "http://127.0.0.1:9/mcp",
            {"X-Key": "k"},
            5.0,
        )
    assert parse_servers({"mcpServers": {"x": {"command": "c"}}})[0].name == "x"


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        ([], "JSON object"),
        ({}, "exactly one key"),
        ({"servers": {}}, "non-empty"),
        ({"servers": {"a": {}}, "extra": 1}, "unknown key 'extra'"),
        ({"servers": {"a": {}}}, "exactly one of 'command'"),
        ({"servers": {"a": {"command": "c", "url": "http://h/mcp"}}}, "exactly one of"),
        ({"servers": {"a": {"command": "c", "colour": "red"}}}, "unknown key 'colour'"),
        ({"servers": {"a b": {"command": "c"}}}, "server name"),
        ({"servers": {"a": {"command": "c", "args": "x"}}}, "list of strings"),
        ({"servers": {"a": {"command": "c", "env": {"A": 1}}}}, "table of strings"),
        ({"servers": {"a": {"url": "ftp://h"}}}, "http://"),
        ({"servers": {"a": {"command": "c", "timeout": -1}}}, "positive"),
        ({"servers": {"a": {"command": "c", "timeout": True}}}, "number of seconds"),
    ],
)
def test_bad_servers_documents_are_refused_with_the_fix(doc: Any, message: str) -> None:
    with pytest.raises(ServerConfigError, match=message):
        parse_servers(doc)


def test_unreadable_servers_file(tmp_path: Path) -> None:
    with pytest.raises(ServerConfigError, match="cannot read"):
        load_servers(tmp_path / "missing.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(ServerConfigError, match="not valid"):
        load_servers(bad)


def _fak(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "fak_core.cli", "mcp-proxy", *args],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )


def test_cli_refuses_bad_invocations(tmp_path: Path) -> None:
    r = _fak()
    assert r.returncode == 2 and "exactly one" in r.stderr
    r = _fak("--policy", str(tmp_path / "nope.json"), "--", "x")
    assert r.returncode == 2 and "cannot read policy file" in r.stderr
    bad = tmp_path / "servers.json"
    bad.write_text('{"servers": {"a": {"url": "ftp://x"}}}')
    r = _fak("--servers", str(bad))
    assert r.returncode == 2 and "http://" in r.stderr
    r = _fak("--call-timeout", "0", "--", "x")
    assert r.returncode == 2 and "--call-timeout" in r.stderr
    pins = tmp_path / "pins.json"
    pins.write_text('{"pins": {"server": {"t": "sha256:abc"}}}')
    r = _fak("--pins", str(pins), "--", "x")
    assert r.returncode == 2 and "64 lowercase hex" in r.stderr and "'t'" in r.stderr
    pins.write_text('{"pins": {"other": {}}}')
    r = _fak("--pins", str(pins), "--", "x")
    assert r.returncode == 2 and "pins name server 'other'" in r.stderr
    pins.write_text('{"servers": {}}')
    r = _fak("--pins", str(pins), "--", "x")
    assert r.returncode == 2 and "--print-pins" in r.stderr


@pytest.mark.anyio
async def test_fak_mcp_proxy_over_stdio_end_to_end(downstream: Downstream, tmp_path: Path) -> None:
    policy = tmp_path / "policy.json"
    policy.write_text(json.dumps({"allow": ["fetch_url", "send_email"]}))
    proxy_cmd = [
        "-m",
        "fak_core.cli",
        "mcp-proxy",
        "--policy",
        str(policy),
        "--call-timeout",
        "10",
        "--journal",
        str(tmp_path / "journal.db"),
        "--",
        sys.executable,
        str(SERVERS),
        "tools",
    ]
    # the operator prints the pins of what the server lists now, and runs the proxy with them
    printed = subprocess.run(
        [sys.executable, *proxy_cmd[:2], "mcp-proxy", "--print-pins", *proxy_cmd[-4:]],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, **downstream.env},
    )
    assert printed.returncode == 0, printed.stderr
    pins = json.loads(printed.stdout)["pins"]
    assert set(pins) == {"server"} and set(pins["server"]) >= {"fetch_url", "send_email"}
    (tmp_path / "pins.json").write_text(printed.stdout)
    unpinned = StdioServerParameters(command=sys.executable, args=proxy_cmd, env=downstream.env)
    proxy_cmd[-4:-4] = ["--pins", str(tmp_path / "pins.json")]
    params = StdioServerParameters(command=sys.executable, args=proxy_cmd, env=downstream.env)
    mails_before = len(downstream.mails())
    async with Client(params, cache=None) as client:
        assert client.server_info is not None and client.server_info.name == "fak-mcp-proxy"
        names = {t.name for t in (await client.list_tools()).tools}
        assert names == {"fetch_url", "send_email"}
        sent = await client.call_tool("send_email", {**MAIL, "subject": "e2e clean"})
        assert sent.is_error is False
    # a second client is a second proxy process, and a fresh session
    async with Client(params, cache=None) as client:
        page = await client.call_tool("fetch_url", {"url": "https://evil.example/"})
        assert isinstance(page.content[0], types.TextContent)
        assert json.loads(page.content[0].text)["_quarantined"] is True
        refused = await client.call_tool("send_email", {**MAIL, "subject": "e2e dirty"})
        assert refused.is_error is True
        assert isinstance(refused.content[0], types.TextContent)
        verdict = json.loads(refused.content[0].text)["verdict"]
        assert (verdict["kind"], verdict["reason"]) == ("DENY", "TRUST_VIOLATION")
    # without pins the listing is untrusted text: the session that listed cannot send
    async with Client(unpinned, cache=None) as client:
        assert {t.name for t in (await client.list_tools()).tools} == names
        refused = await client.call_tool("send_email", {**MAIL, "subject": "e2e unpinned"})
        assert isinstance(refused.content[0], types.TextContent)
        verdict = json.loads(refused.content[0].text)["verdict"]
        assert (verdict["kind"], verdict["reason"]) == ("DENY", "TRUST_VIOLATION")
    subjects = [m["subject"] for m in downstream.mails()[mails_before:]]
    assert subjects == ["e2e clean"]
    # both proxy processes appended to one journal, in one unbroken chain
    from fak_core.journal import read_rows, verify_files

    rows = [(r["event"], r["tool"], r["verdict"]) for r in read_rows(tmp_path / "journal.db")]
    assert ("decide", "send_email", "ALLOW") in rows
    assert ("quarantine", "fetch_url", "QUARANTINE") in rows
    assert ("admit", "server/tools/list", "ALLOW") in rows  # the listing, journaled
    assert rows[-1] == ("decide", "send_email", "DENY")
    assert verify_files([tmp_path / "journal.db"]).ok


def test_spec_validation_names_the_fix() -> None:
    with pytest.raises(ServerConfigError, match="exactly one of"):
        DownstreamSpec("a")
