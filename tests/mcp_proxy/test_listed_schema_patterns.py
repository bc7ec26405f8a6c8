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


async def _list_and_call(live: Live, calls: list[tuple[str, dict[str, Any]]]) -> Any:
    from .conftest import session

    async with session(live.proxy) as client:
        listed = [t.name for t in (await client.list_tools()).tools]
        results = [await client.call_tool(name, args) for name, args in calls]
    return listed, results


def check_listing(live: Live) -> None:
    live.scripted.set_tools(TOOLS)
    long = "a" * 4096 + "!"
    calls = [(name, {"q": long}) for name in ("x1_fast", "x1_exact", "x1_lookaround")]
    listed, results = live.call(_list_and_call, calls)
    assert "x1_fast" in listed and "x1_exact" in listed
    assert "x1_lookaround" not in listed and "x1_backref" not in listed
    for result in results[:2]:
        v = body(result)["verdict"]
        assert (v["kind"], v["reason"], v["by"]) == ("DENY", "MALFORMED", "preflight"), v
    assert isinstance(results[2], types.CallToolResult) and results[2].is_error
    assert live.scripted.calls("x1_lookaround") == 0  # a hidden tool is never reached


@pytest.mark.fak_theorem("A7.6")
def test_a_listed_schema_with_a_backtracking_pattern_hides_its_tool(tmp_path: Path) -> None:
    run_live(tmp_path, check_listing)
    assert json.loads((tmp_path / "tools.json").read_text())[0]["name"] == "x1_lookaround"
