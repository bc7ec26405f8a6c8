"""The policy file: strict loading, faithful dumping, and a floor that never loosens it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fak_core import (
    ArgRule,
    AuthorizeRule,
    Kernel,
    Policy,
    PolicyError,
    Reason,
    ToolCall,
    VerdictKind,
    default_policy,
    dump_policy,
    load_policy,
    policy_digest,
)
from fak_core.policy import ToolDecl
from fak_core.ratelimit import RateLimit
from fak_core.rules import ArgumentRule

names = st.text(st.characters(min_codepoint=97, max_codepoint=122), min_size=1, max_size=8)
reasons = st.sampled_from(
    ["POLICY_BLOCK", "SECRET_EXFIL", "DEFAULT_DENY", "EGRESS_BLOCK", "SELF_MODIFY"]
)
arg_rules = st.builds(
    lambda tool, arg, which, value, reason: ArgRule(
        tool, arg, reason=reason, **{which: value[which]}
    ),
    names,
    names,
    st.sampled_from(["allow_glob", "deny_regex", "max_bytes"]),
    st.fixed_dictionaries(
        {
            "allow_glob": st.just("/work/*"),
            "deny_regex": st.just("rm -rf"),
            "max_bytes": st.integers(0, 999),
        }
    ),
    reasons,
)
policies = st.builds(
    Policy,
    posture=st.sampled_from(["fail_closed", "admit_and_log"]),
    allow=st.lists(names, max_size=4).map(tuple),
    allow_prefix=st.lists(names, max_size=2).map(tuple),
    deny=st.dictionaries(names, reasons, max_size=3),
    self_modify_globs=st.lists(names.map(lambda n: n + "/"), max_size=2).map(tuple),
    redact_fields=st.lists(names, max_size=2).map(tuple),
    secret_patterns=st.lists(st.sampled_from([r"sk-\w+", r"tok_[0-9]+"]), max_size=2).map(tuple),
    safe_sinks=st.lists(names, max_size=2).map(tuple),
    gated_sinks=st.lists(st.sampled_from(["EGRESS", "EXEC", "DESTRUCTIVE"]), unique=True).map(
        tuple
    ),
    authorize=st.lists(
        st.builds(AuthorizeRule, names, st.sampled_from(["EGRESS", "EXEC"])), max_size=2
    ).map(tuple),
    sources=st.dictionaries(names, st.sampled_from(["trusted_local", "untrusted"]), max_size=2),
    arg_rules=st.lists(arg_rules, max_size=3).map(tuple),
    deny_hosts=st.lists(st.sampled_from(["169.254.169.254", "evil.example"]), max_size=2).map(
        tuple
    ),
    schemas=st.dictionaries(names, st.just({"type": "object", "required": ["q"]}), max_size=2),
    rate_limit=st.none()
    | st.builds(
        RateLimit,
        st.integers(1, 100),
        st.floats(0.5, 100, allow_nan=False),
        st.sampled_from(["trace", "tool", "global"]),
    ),
)


pointers = st.lists(names.map(lambda n: "/" + n), max_size=2, unique=True).map(tuple)
tool_decls = st.one_of(
    st.just(ToolDecl("NONE")),
    st.builds(
        lambda sink, dests, allowed, content, approve: ToolDecl(
            sink,
            dests,
            allowed if dests or content else (),
            content,
            approve and bool(dests or content),
        ),
        st.sampled_from(["EXEC", "DESTRUCTIVE", "EGRESS", "SPEND", "CREDENTIAL"]),
        pointers,
        st.lists(names, max_size=2).map(tuple),
        pointers,
        st.booleans(),
    ),
)
argument_rules = st.lists(
    st.builds(
        lambda tool, effect, lo, taint, priority, claim: ArgumentRule(
            tool,
            effect,
            {"properties": {"n": {"minimum": lo}}} if lo is not None else True,
            taint,
            priority,
            "POLICY_BLOCK" if effect == "deny" else "",
            claim,
        ),
        names,
        st.sampled_from(["allow", "deny", "witness"]),
        st.none() | st.integers(-3, 3),
        st.sampled_from(["any", "trusted", "tainted"]),
        st.integers(-3, 3),
        st.sampled_from(["", "over the limit"]),
    ),
    max_size=3,
).map(tuple)
# v2 documents: every v1 key plus declared tool semantics, strict_sinks and argument rules
v2_policies = st.builds(
    lambda p, tools, strict, rules: Policy(
        **{
            **{f: getattr(p, f) for f in p.__dataclass_fields__},
            "version": "fak-policy/v2",
            "tools": tools,
            "strict_sinks": strict,
            "rules": rules,
        }
    ),
    policies,
    st.dictionaries(names, tool_decls, max_size=3),
    st.booleans(),
    argument_rules,
)


@pytest.mark.fak_theorem("D2.1")
@given(policies | v2_policies, st.sampled_from(["json", "toml"]))
def test_load_dump_load_is_the_identity(policy: Policy, fmt: str) -> None:
    text = dump_policy(policy, fmt)
    again = load_policy(text, fmt)
    assert again == policy
    assert dump_policy(again, fmt) == text
    assert policy_digest(again) == policy_digest(policy)


# what a caller may send that is not one JSON object (the floor is reached directly here)
not_objects = st.sampled_from(["[]", "1", '"s"', "null", "nope", "{", '[{"a": 1}]'])


@pytest.mark.fak_theorem("D2.2")
@given(
    policies,
    st.data(),
    st.dictionaries(names, st.text(max_size=10), max_size=3).map(json.dumps) | not_objects,
)
def test_the_floor_never_allows_what_the_policy_does_not(
    policy: Policy, data: st.DataObject, raw: str
) -> None:
    named = sorted({*policy.allow, *policy.deny, *(p + "x" for p in policy.allow_prefix)})
    tool = data.draw(st.sampled_from(named) | names if named else names, label="tool")
    k = Kernel(policy)
    v = k.floor.adjudicate(k.view(ToolCall(tool, raw)))
    if tool in policy.deny:
        assert v.kind == VerdictKind.DENY
        assert k.reasons.name(v.reason) == policy.deny[tool]
    elif not raw.startswith("{") or raw == "{":
        assert (v.kind, v.reason) == (VerdictKind.DENY, Reason.MALFORMED)
    allowed = tool in policy.allow or tool.startswith(tuple(policy.allow_prefix))
    if v.kind in (VerdictKind.ALLOW, VerdictKind.TRANSFORM):
        assert tool not in policy.deny
        assert allowed or policy.posture == "admit_and_log"
        if not allowed:  # admitted only by the opt-out, and marked so for the log
            assert dict(v.meta) == {"posture": "admit_and_log", "would_deny": "DEFAULT_DENY"}
        else:
            assert "posture" not in v.meta
    if not allowed and policy.posture == "fail_closed":
        assert v.kind == VerdictKind.DENY
    if v.kind == VerdictKind.DENY:
        assert v.claim, "a refusal says why"


@pytest.mark.fak_theorem("D2.2")
def test_the_deny_map_wins_over_the_allow_list() -> None:
    k = Kernel(
        Policy(
            allow=("wire_money", "get_x"),
            allow_prefix=("get_",),
            deny={"wire_money": "POLICY_BLOCK", "get_secret": "SECRET_EXFIL"},
        )
    )
    for tool, reason in (("wire_money", Reason.POLICY_BLOCK), ("get_secret", Reason.SECRET_EXFIL)):
        v = k.decide(ToolCall(tool, "{}"))
        assert (v.kind, v.reason) == (VerdictKind.DENY, reason)
    assert k.decide(ToolCall("get_x", "{}")).kind == VerdictKind.ALLOW
    # a prefix is a prefix: it does not match inside a name
    assert k.decide(ToolCall("forget_x", "{}")).reason == Reason.DEFAULT_DENY
    # scoped names (the MCP proxy's <server>__<tool>): a deny entry for a tool's own name
    # denies it on every server, one for a whole scoped name denies that one
    k = Kernel(
        Policy(
            allow_prefix=("srv__",),
            deny={"wire_money": "POLICY_BLOCK", "srv__drop": "SECRET_EXFIL"},
        )
    )
    k.floor.scope_names("__")
    for tool, reason in (
        ("srv__wire_money", Reason.POLICY_BLOCK),
        ("other__wire_money", Reason.POLICY_BLOCK),
        ("srv__drop", Reason.SECRET_EXFIL),
    ):
        v = k.decide(ToolCall(tool, "{}"))
        assert (v.kind, v.reason) == (VerdictKind.DENY, reason), tool
    assert k.decide(ToolCall("srv__get_x", "{}")).kind == VerdictKind.ALLOW


@pytest.mark.fak_theorem("D2.3")
def test_unknown_keys_are_rejected_with_the_valid_ones_listed() -> None:
    with pytest.raises(
        PolicyError, match=r"unknown policy key 'alow'; valid keys: version, posture, allow"
    ):
        load_policy('{"alow": ["x"]}', "json")


@pytest.mark.fak_theorem("D2.3")
def test_unknown_reason_names_are_rejected() -> None:
    with pytest.raises(
        PolicyError, match=r"deny.x.*unknown reason 'NOPE'; valid reasons: DEFAULT_DENY"
    ):
        load_policy('{"deny": {"x": "NOPE"}}', "json")
    with pytest.raises(PolicyError, match="NONE is not a refusal reason"):
        load_policy('{"deny": {"x": "NONE"}}', "json")


@pytest.mark.fak_theorem("D2.3")
@pytest.mark.parametrize(
    ("doc", "fragment"),
    [
        ('{"version": "fak-policy/v3"}', "policy key 'version'"),
        ('{"posture": "yolo"}', "posture"),
        ('{"allow": "x"}', "allow"),
        ('{"allow": [1]}', "allow"),
        ('{"secret_patterns": ["("]}', "invalid regular expression"),
        ('{"gated_sinks": ["MAIL"]}', "unknown sink 'MAIL'"),
        ('{"authorize": [{"tool": "x"}]}', "authorize[0]"),
        ('{"sources": {"x": "maybe"}}', "sources.x"),
        ('{"arg_rules": [{"tool": "x", "arg": "p"}]}', "exactly one of"),
        ('{"arg_rules": [{"tool": "x", "arg": "p", "max_bytes": -1}]}', "max_bytes"),
        ('{"arg_rules": [{"tool": "x", "arg": "p", "max_bytes": 1, "colour": 1}]}', "colour"),
        ('{"schemas": {"t": {"type": "nope"}}}', "schemas.t"),
        ('{"deny_hosts": ["exa mple.com"]}', "deny_hosts entry 'exa mple.com'"),
        ('{"deny_hosts": ["10.0.0.0/33"]}', "deny_hosts entry '10.0.0.0/33'"),
        ("[]", "must be a JSON object"),
        ('{"allow": [', "not valid JSON at line 1"),
    ],
)
def test_bad_policies_get_specific_errors(doc: str, fragment: str) -> None:
    with pytest.raises(PolicyError) as info:
        load_policy(doc, "json")
    assert fragment in str(info.value)


def test_files_by_suffix_and_clear_file_errors(tmp_path: Path) -> None:
    (tmp_path / "p.toml").write_text('allow = ["a"]\n[deny]\nb = "POLICY_BLOCK"\n')
    p = load_policy(tmp_path / "p.toml")
    assert p.allow == ("a",) and p.deny == {"b": "POLICY_BLOCK"}
    (tmp_path / "bad.toml").write_text("allow = [")
    with pytest.raises(PolicyError, match=r"bad.toml: not valid TOML"):
        load_policy(tmp_path / "bad.toml")
    with pytest.raises(PolicyError, match="cannot read policy file"):
        load_policy(tmp_path / "missing.json")
    (tmp_path / "bin.json").write_bytes(b"\xff\xfe")
    with pytest.raises(PolicyError, match="not UTF-8"):
        load_policy(tmp_path / "bin.json")


@pytest.mark.fak_theorem("D2.2")
def test_empty_policy_is_the_fail_closed_empty_floor() -> None:
    k = Kernel(load_policy("{}", "json"))
    for tool in ("read_file", "get_x", "anything"):
        v = k.decide(ToolCall(tool, "{}"))
        assert (v.kind, v.reason) == (VerdictKind.DENY, Reason.DEFAULT_DENY)


@pytest.mark.fak_theorem("D2.1")
def test_the_default_policy_ships_and_round_trips() -> None:
    p = default_policy()
    assert "search_flights" in p.allow and p.deny["exfiltrate"] == "SECRET_EXFIL"
    assert load_policy(dump_policy(p, "toml"), "toml") == p


@pytest.mark.fak_theorem("D2.2")
def test_floor_rules() -> None:
    k = Kernel(
        Policy(
            allow=("write_file", "get_page", "http_get"),
            self_modify_globs=("fak_core/",),
            redact_fields=("password", "token"),
            arg_rules=(
                ArgRule("write_file", "path", allow_glob="/work/*"),
                ArgRule("get_page", "q", deny_regex="(?i)drop table", reason="POLICY_BLOCK"),
                ArgRule("get_page", "body", max_bytes=8),
            ),
            deny_hosts=("evil.example",),
        )
    )

    def decide(tool: str, args: object) -> tuple[str, str, str]:
        v = k.decide(ToolCall(tool, json.dumps(args)))
        return k.kinds.name(v.kind), k.reasons.name(v.reason), v.claim

    assert decide("write_file", {"path": "/work/../work/fak_core/kernel.py"})[:2] == (
        "DENY",
        "SELF_MODIFY",
    )
    # only a write-shaped tool is refused for naming a protected path: reading it is not
    assert decide("get_page", {"q": "fak_core/kernel.py"})[0] == "ALLOW"
    assert decide("write_file", {"path": "/etc/passwd"})[:2] == ("DENY", "POLICY_BLOCK")
    assert decide("write_file", {"path": "/work/notes.txt"})[0] == "ALLOW"
    # an allow_glob reads a backslash as a separator and resolves ".." before matching
    assert decide("write_file", {"path": "/work\\notes.txt"})[0] == "ALLOW"
    assert decide("write_file", {"path": "/work\\..\\etc\\passwd"})[:2] == ("DENY", "POLICY_BLOCK")
    assert decide("get_page", {"q": "x; DROP TABLE users"})[:2] == ("DENY", "POLICY_BLOCK")
    assert decide("get_page", {"body": "123456789"})[:2] == ("DENY", "POLICY_BLOCK")
    assert decide("http_get", {"url": "http://169.254.169.254/latest"})[:2] == (
        "DENY",
        "EGRESS_BLOCK",
    )
    assert decide("http_get", {"url": "https://evil.example/x"})[:2] == ("DENY", "EGRESS_BLOCK")
    v = k.decide(ToolCall("get_page", '{"q": "a", "password": "hunter2"}'))
    assert v.kind == VerdictKind.TRANSFORM and json.loads(v.repaired_args or "") == {"q": "a"}
    assert v.meta["redacted"] == "password"
    v = k.decide(ToolCall("get_page", '{"token": "t", "q": "a", "password": "hunter2"}'))
    assert json.loads(v.repaired_args or "") == {"q": "a"}
    assert v.meta["redacted"] == "password,token"  # every removed key, sorted
    # redaction never turns a tool the policy does not allow into a TRANSFORM
    assert decide("unlisted", {"password": "x"})[:2] == ("DENY", "DEFAULT_DENY")


def test_set_policy_replaces_sources_and_schemas_it_had_set() -> None:
    from fak_core import Taint

    first = Policy(
        allow=("fetch", "q"), sources={"fetch": "trusted_local"}, schemas={"q": {"required": ["x"]}}
    )
    k = Kernel(first)
    k.register_tool("fetch", lambda a: "page")
    k.register_schema("host_tool", {"required": ["y"]})
    assert k.syscall(ToolCall("fetch", "{}", "s1"))[0].taint == Taint.TRUSTED
    assert k.decide(ToolCall("q", "{}")).reason == Reason.MALFORMED
    k.set_policy(Policy(allow=("fetch", "q")))
    assert k.syscall(ToolCall("fetch", "{}", "s2"))[0].taint == Taint.TAINTED
    assert k.decide(ToolCall("q", "{}")).kind == VerdictKind.ALLOW
    assert "host_tool" in k.schemas  # host registrations survive a reload
