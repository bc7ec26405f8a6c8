"""A downstream's tool list is a place schemas enter (theorem A7.6): a listed inputSchema
whose pattern only a backtracking engine can run hides the tool, and a catastrophic
pattern it may use runs in linear time on a long argument, on both validation paths."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest

from .test_untrusted_downstream import Live, body, run_live

NESTED = "^(a+)+$"  # catastrophic for a backtracking engine on "aaa…a!"


def _schema(pattern: str, exact: bool) -> dict[str, Any]:
    props: dict[str, Any] = {"q": {"type": "string", "pattern": pattern}}
    if exact:
        props["n"] = {"type": "number", "multipleOf": 0.5}
    return {"type": "object", "properties": props}


TOOLS = [
    {"name": "x1_lookaround", "inputSchema": _schema("^(?=(a+)+$)a", exact=False)},
    {"name": "x1_backref", "inputSchema": _schema("(a)\\1", exact=True)},
    {"name": "x1_fast", "inputSchema": _schema(NESTED, exact=False)},
    {"name": "x1_exact", "inputSchema": _schema(NESTED, exact=True)},
]


async def _list(live: Live) -> list[str]:
    from .conftest import session

    async with session(live.proxy) as client:
        return [t.name for t in (await client.list_tools()).tools]


async def _verdicts(live: Live, calls: list[tuple[str, str]]) -> list[tuple[str, ...]]:
    from .conftest import session

    out: list[tuple[str, ...]] = []
    async with session(live.proxy) as client:
        for name, text in calls:
            result = await client.call_tool(name, {"q": text})
            assert isinstance(result, types.CallToolResult) and result.is_error
            v = body(result).get("verdict", {})
            out.append((v.get("kind", ""), v.get("reason", ""), v.get("by", "")))
    return out


def check_listing(live: Live) -> None:
    live.scripted.set_tools(TOOLS)
    listed = live.call(_list)
    assert "x1_fast" in listed and "x1_exact" in listed
    assert "x1_lookaround" not in listed and "x1_backref" not in listed
    malformed = ("DENY", "MALFORMED", "preflight")
    # ECMA-262's $ never matches before a final newline (Python's re does): a cheap probe
    # that neither path matches with re, before a long text is searched
    probes = live.call(_verdicts, [("x1_fast", "a\n"), ("x1_exact", "a\n")])
    assert probes == [malformed, malformed], probes
    long = "a" * 4096 + "!"
    calls = [("x1_fast", long), ("x1_exact", long), ("x1_lookaround", long)]
    verdicts = live.call(_verdicts, calls)
    assert verdicts[:2] == [malformed, malformed], verdicts
    assert verdicts[2] != malformed  # not routed: refused before any schema runs
    assert live.scripted.calls("x1_lookaround") == 0  # a hidden tool is never reached


@pytest.mark.fak_theorem("A7.6")
def test_a_listed_schema_with_a_backtracking_pattern_hides_its_tool(tmp_path: Path) -> None:
    run_live(tmp_path, check_listing)
    assert json.loads((tmp_path / "tools.json").read_text())[0]["name"] == "x1_lookaround"
