"""D2.8's defaults: an undeclared tool fails closed, and a guess is never silent.

Tool names are generated the way tools are named: a side-effecting verb or a read verb, an
object, an optional namespace word and unknown words, written snake_case, camelCase,
PascalCase, kebab-case or dotted. The oracles are written here: the verb lists below (the
CRUD writes, communication, publication and transfer verbs, the seven of the issue among
them), "a v2 policy that says nothing about strict_sinks gates every undeclared tool",
"no tool is a trusted source unless the policy names it", and "the warning names every
tool whose class is a guess".
"""

from __future__ import annotations

import itertools
import json
import logging
from pathlib import Path

import pytest
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st

from fak_core import Kernel, Result, Status, ToolCall
from fak_core.cli import main
from fak_core.policy import Policy, load_policy, parse_policy
from fak_core.provenance import BUILTIN_TRUSTED, Source
from fak_core.reasons import Reason
from fak_core.sinks import guess_warning, guessed_sinks, name_words
from fak_core.taint import Taint
from fak_core.verdicts import VerdictKind

V2 = "fak-policy/v2"
#: side-effecting verbs (CRUD writes, communication, publication, transfer), base forms
WRITE_VERBS = (
    "push", "create", "comment", "share", "transfer", "reply", "invite", "add", "update",
    "edit", "write", "insert", "post", "send", "publish", "upload", "submit", "forward",
    "notify", "pay", "refund", "assign", "grant", "merge", "commit", "delete", "remove",
    "set", "modify", "append", "rename", "move", "subscribe", "schedule", "book", "purchase",
    "withdraw", "deposit", "export", "sync", "email", "broadcast", "approve", "archive",
)  # fmt: skip
READ_VERBS = ("get", "list", "read", "search", "find", "lookup", "query", "show", "describe")
OBJECTS = (
    "issue", "comment", "document", "funds", "thread", "user", "file", "repo", "branch",
    "page", "message", "ticket", "payment", "record", "invoice", "calendar", "event",
)  # fmt: skip
NAMESPACES = ("", "git", "github", "slack", "gmail", "drive", "bank", "jira", "api2", "s3")
# unknown words: no letter run that the EXEC pattern reads (v1 does not gate EXEC)
UNKNOWN = st.text("bcdfghjklmnpqrtvwxz", min_size=2, max_size=6)


def _styled(words: list[str], style: str) -> str:
    if style == "snake":
        return "_".join(words)
    if style == "kebab":
        return "-".join(words)
    if style == "dotted":
        return ".".join(words)
    if style == "camel":
        return words[0] + "".join(w.capitalize() for w in words[1:])
    return "".join(w.capitalize() for w in words)


STYLES = st.sampled_from(["snake", "kebab", "dotted", "camel", "pascal"])


@st.composite
def tool_names(draw: st.DrawFn, verbs: tuple[str, ...]) -> str:
    words = [draw(st.sampled_from(NAMESPACES))] if draw(st.booleans()) else []
    verb = draw(st.sampled_from(verbs))
    form = draw(st.sampled_from(["", "ed", "ing"])) if verbs is WRITE_VERBS else ""
    if form:
        stem = verb[:-1] if verb.endswith("e") else verb
        verb = stem + form
    words.append(verb)
    words.extend(draw(st.lists(st.sampled_from(OBJECTS) | UNKNOWN, min_size=0, max_size=2)))
    words = [w for w in words if w]
    styled = _styled(words, draw(STYLES))
    if draw(st.booleans()):  # an acronym namespace in capitals, or a version after the verb
        acronym = draw(st.sampled_from(["API", "HTTP", "GH", "V2"]))
        styled = acronym + (styled[0].upper() + styled[1:])
    if draw(st.booleans()) and styled.endswith(words[-1]) and words[-1] == verb:
        styled += draw(st.sampled_from(["2", "3", "10"]))
    return styled


ANY_NAME = st.one_of(
    tool_names(WRITE_VERBS),
    tool_names(READ_VERBS),
    st.sampled_from(BUILTIN_TRUSTED),
    st.sampled_from(["run_shell", "execCommand", "spawn-process", "drop_table"]),
    st.builds(lambda ws, s: _styled(ws, s), st.lists(UNKNOWN, min_size=1, max_size=3), STYLES),
)


def _tainted(kernel: Kernel, trace: str = "t") -> str:
    kernel.ledger.raise_to(trace, Taint.TAINTED)
    return trace


@pytest.mark.fak_theorem("D2.8", "C4.3")
@settings(max_examples=150)
@given(tool=ANY_NAME, declared=st.lists(ANY_NAME, max_size=3), explicit=st.booleans())
def test_v2_gates_every_undeclared_tool_unless_it_says_otherwise(
    tool: str, declared: list[str], explicit: bool
) -> None:
    decls = {d: {"sink": "NONE"} for d in declared if d != tool}
    doc: dict[str, object] = {"version": V2, "allow": [tool, *decls], "tools": decls}
    if explicit:
        doc["strict_sinks"] = True
    policy = parse_policy(doc)
    assert policy.strict_sinks is True
    # a policy built in code means the same: the version decides what left out means
    assert Policy(version=V2).strict_sinks is True and Policy().strict_sinks is False
    assert Policy(version=V2, strict_sinks=False).strict_sinks is False
    kernel = Kernel(policy)
    v = kernel.decide(ToolCall.make(tool, "{}", _tainted(kernel)))
    assert v.kind == VerdictKind.DENY and v.reason == Reason.TRUST_VIOLATION, (tool, v)
    assert v.by.startswith("ifc-sink")
    assert guess_warning(policy) is None and guessed_sinks(policy) == []
    # a clean session is not refused for it (the floor allows the tool)
    assert kernel.decide(ToolCall.make(tool, "{}", "clean")).kind == VerdictKind.ALLOW
    # declared tools keep their declaration on the tainted session
    for name in decls:
        assert kernel.decide(ToolCall.make(name, "{}", "t")).kind == VerdictKind.ALLOW
    # strict_sinks = false, written out, is the policy's word: the guess again, warned of
    loose = parse_policy({**doc, "strict_sinks": False})
    assert loose.strict_sinks is False
    warning = guess_warning(loose)
    assert warning is not None and f"{tool} (" in warning


@pytest.mark.fak_theorem("D2.8")
@settings(max_examples=150)
@given(
    tool=ANY_NAME,
    named=st.dictionaries(ANY_NAME, st.sampled_from(["trusted_local", "untrusted"]), max_size=3),
    v2=st.booleans(),
)
def test_no_tool_is_a_trusted_source_unless_the_policy_names_it(
    tool: str, named: dict[str, str], v2: bool
) -> None:
    doc: dict[str, object] = {"allow": [tool], "sources": named}
    if v2:
        doc["version"] = V2
    kernel = Kernel(parse_policy(doc))
    wanted = Source.TRUSTED_LOCAL if named.get(tool) == "trusted_local" else Source.UNTRUSTED
    assert kernel.sources.source(tool) is wanted, tool
    call = ToolCall.make(tool, "{}", "r")
    kernel.admit(call, Result(Status.OK, "plain text", taint=Taint.TRUSTED))
    expected = Taint.TRUSTED if wanted is Source.TRUSTED_LOCAL else Taint.TAINTED
    assert kernel.taint("r") == expected, tool


@pytest.mark.fak_theorem("D2.8", "C4.3")
@settings(max_examples=150)
@given(tool=tool_names(WRITE_VERBS))
def test_v1_reads_side_effecting_verbs_as_gated_sinks(tool: str) -> None:
    policy = parse_policy({"allow": [tool]})
    kernel = Kernel(policy)
    v = kernel.decide(ToolCall.make(tool, "{}", _tainted(kernel)))
    assert v.kind == VerdictKind.DENY and v.reason == Reason.TRUST_VIOLATION, (tool, v)
    assert kernel.decide(ToolCall.make(tool, "{}", "clean")).kind == VerdictKind.ALLOW


@pytest.mark.fak_theorem("D2.8", "D2.3")
@settings(max_examples=100, deadline=None)
@given(
    allow=st.lists(ANY_NAME, min_size=1, max_size=4, unique=True),
    sourced=st.lists(ANY_NAME, max_size=2),
    prefix=st.lists(st.sampled_from(["get_", "read_", "x"]), max_size=2, unique=True),
)
def test_a_v1_policy_warns_of_every_guessed_tool(
    allow: list[str], sourced: list[str], prefix: list[str]
) -> None:
    doc = {"allow": allow, "sources": dict.fromkeys(sourced, "untrusted"), "allow_prefix": prefix}
    text = json.dumps(doc)
    logger = logging.getLogger("fak_core.policy")
    records: list[logging.LogRecord] = []
    handler = logging.Handler()
    handler.emit = records.append  # type: ignore[method-assign]
    logger.addHandler(handler)
    try:
        policy = load_policy(text, "json")
    finally:
        logger.removeHandler(handler)
    warning = guess_warning(policy)
    assert warning is not None
    assert [r.levelno for r in records] == [logging.WARNING]
    assert records[0].getMessage() == f"policy: {warning}"
    for tool in {*allow, *sourced}:
        assert f"{tool} (" in warning, tool
    for p in prefix:
        assert repr(p) in warning
    guessed = dict(guessed_sinks(policy))
    assert set(guessed) == {*allow, *sourced}


@pytest.mark.fak_theorem("D2.8")
def test_policy_check_prints_the_warning(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    v1 = tmp_path / "v1.json"
    v1.write_text(json.dumps({"allow": ["git_push", "get_status"]}))
    assert main(["policy", "check", str(v1)]) == 0
    out = capsys.readouterr().out
    line = next(x for x in out.splitlines() if x.startswith("warning: "))
    assert "git_push (EGRESS)" in line and "get_status (NONE)" in line
    assert "fak-policy/v2" in line
    v2 = tmp_path / "v2.json"
    v2.write_text(json.dumps({"version": V2, "allow": ["get_status"]}))
    assert main(["policy", "check", str(v2)]) == 0
    out = capsys.readouterr().out
    assert "warning:" not in out
    assert "get_status: UNDECLARED (undeclared, a sink under strict_sinks, gated)" in out


@st.composite
def word_lists(draw: st.DrawFn) -> tuple[list[str], str]:
    """Words (lower-case, digit runs, acronyms) and a separator ('' for camel case) such
    that the joined name reads back as exactly those words."""
    sep = draw(st.sampled_from(["", "_", "-", ".", "__"]))
    lower = st.text("abcdefghijklmnopqrstuvwxyz", min_size=2, max_size=6)
    digits = st.text("0123456789", min_size=1, max_size=3)
    acronym = st.text("ABCDEFGHIJKLMNOPQRSTUVWXYZ", min_size=2, max_size=4)
    words = draw(st.lists(st.one_of(lower, digits, acronym), min_size=1, max_size=5))
    if not sep:  # camel case cannot tell two acronyms or two digit runs apart
        for a, b in itertools.pairwise(words):
            assume(not (a.isupper() and b.isupper()) and not (a.isdigit() and b.isdigit()))
    return words, sep


@pytest.mark.fak_theorem("D2.8")
@settings(max_examples=300)
@given(word_lists())
@example((["send", "HTTP", "ab"], ""))  # an acronym, then a word of two letters last
def test_a_name_reads_back_as_its_words(case: tuple[list[str], str]) -> None:
    words, sep = case
    if sep:
        name = sep.join(words)
    else:
        name = words[0] + "".join(w if not w.islower() else w.capitalize() for w in words[1:])
    assert name_words(name) == [w.lower() for w in words], name


@pytest.mark.fak_theorem("D2.8")
def test_the_warning_names_what_is_guessed_and_nothing_else() -> None:
    assert guess_warning(parse_policy({})) is None  # names no tool, no prefix
    assert guess_warning(parse_policy({"deny": {"x": "POLICY_BLOCK"}})) is None
    only = guess_warning(parse_policy({"allow_prefix": ["get_", "read_"]}))
    assert only == (
        "fak-policy/v1 leaves the sink class of these tools to a guess from their names "
        "(a tainted session reaches every one guessed NONE): every tool under allow_prefix "
        "'get_', 'read_'; declare them under 'tools' in a fak-policy/v2 policy (whose "
        "strict_sinks gates every undeclared tool)"
    )
    loose = parse_policy({"version": V2, "allow": ["ping_host"], "strict_sinks": False})
    assert guess_warning(loose) == (
        "fak-policy/v2 leaves the sink class of these tools to a guess from their names "
        "(a tainted session reaches every one guessed NONE): ping_host (EGRESS); declare "
        "them under 'tools', or leave strict_sinks at its default (true)"
    )
