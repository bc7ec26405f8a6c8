"""pytest_fak.strategies from the user's tool schemas (issue 15): valid and invalid calls,
session scripts over them, and falsifying examples that print as code to paste."""

from __future__ import annotations

import json
import re
from typing import Any

import jsonschema
import pytest
from hypothesis import given, settings

from pytest_fak.strategies import (
    SessionScript,
    Step,
    calls_for,
    session_scripts,
    tool_call,
)

SEND_EMAIL = {
    "type": "object",
    "properties": {
        "to": {"type": "string", "pattern": "^[a-z]{1,8}@example\\.com$"},
        "subject": {"type": "string", "maxLength": 40},
        "urgent": {"type": "boolean"},
    },
    "required": ["to", "subject"],
    "additionalProperties": False,
}
REFUND = {
    "type": "object",
    "properties": {"amount": {"type": "integer", "minimum": 1, "maximum": 500}},
    "required": ["amount"],
    "additionalProperties": False,
}
TOOLS = {"send_email": SEND_EMAIL, "refund": REFUND}
# the oracle: jsonschema's own validator, not the strategies' generator
VALID = {name: jsonschema.Draft202012Validator(s) for name, s in TOOLS.items()}


@given(call=calls_for(TOOLS))
def test_valid_calls_satisfy_their_tools_schema(call: Any) -> None:
    assert call.tool in TOOLS
    assert VALID[call.tool].is_valid(json.loads(call.args))


@given(call=calls_for(TOOLS, valid=False))
def test_invalid_calls_parse_but_break_their_tools_schema(call: Any) -> None:
    args = json.loads(call.args)
    assert isinstance(args, dict)
    assert not VALID[call.tool].is_valid(args)


@given(call=calls_for(TOOLS, valid=None))
def test_both_kinds_are_drawn(call: Any) -> None:
    assert call.tool in TOOLS


def test_both_kinds_do_occur() -> None:
    seen: set[bool] = set()

    @settings(max_examples=60, database=None)
    @given(calls_for({"refund": REFUND}, valid=None))
    def draw(call: Any) -> None:
        seen.add(VALID["refund"].is_valid(json.loads(call.args)))

    draw()
    assert seen == {True, False}


@given(script=session_scripts(tools=TOOLS, invalid_calls=True))
def test_script_calls_come_from_the_schemas(script: SessionScript) -> None:
    for s in script.steps:
        if s.kind == "call":
            assert s.tool in TOOLS and s.valid is not None
            assert VALID[s.tool].is_valid(json.loads(s.payload)) is s.valid


@given(script=session_scripts(tools=TOOLS, untrusted=True))
def test_forced_untrusted_scripts_have_an_untrusted_result(script: SessionScript) -> None:
    assert script.has_untrusted
    assert all(s.valid for s in script.steps if s.kind == "call")


def test_a_bad_schema_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="tool 'refund': not a valid JSON Schema"):
        calls_for({"refund": {"type": "integer-ish"}})
    with pytest.raises(ValueError, match="give tools"):
        session_scripts()


def test_falsifying_examples_print_as_code_to_paste(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\naddopts = -p no:schemathesis\n")
    pytester.makepyfile(
        test_paste=f"""
import json
from hypothesis import given, settings
from pytest_fak.strategies import session_scripts, tool_calls

REFUND = {REFUND!r}

@settings(database=None)
@given(call=tool_calls("refund", REFUND))
def test_call(call):
    assert json.loads(call.args)["amount"] < 100

@settings(database=None)
@given(script=session_scripts(tools={{"refund": REFUND}}))
def test_script(script):
    assert all(json.loads(s.payload)["amount"] < 100 for s in script.steps if s.kind == "call")
"""
    )
    result = pytester.runpytest("--assert=plain")
    result.assert_outcomes(failed=2)
    # the printed example, without pytest's "E" margin
    out = "\n".join(re.sub(r"^E\s+", "", ln) for ln in result.stdout.lines)
    call_line = next(ln for ln in out.splitlines() if "tool_call(" in ln)
    script_at = out.index("script=SessionScript(")
    # paste what was printed: it evaluates to the same failing values
    call = eval(call_line.split("call=", 1)[1].strip().rstrip(","), {"tool_call": tool_call})
    assert call.tool == "refund" and json.loads(call.args) == {"amount": 100}
    text = out[script_at + len("script=") :]
    depth, end = 0, 0
    for i, ch in enumerate(text):
        depth += ch == "("
        depth -= ch == ")"
        if depth == 0 and ch == ")":
            end = i + 1
            break
    script = eval(text[:end], {"SessionScript": SessionScript, "Step": Step})
    assert isinstance(script, SessionScript)
    assert any(json.loads(s.payload) == {"amount": 100} for s in script.steps if s.kind == "call")
