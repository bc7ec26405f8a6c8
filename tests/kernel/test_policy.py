"""The policy file: strict loading, faithful dumping, and a floor that never loosens it."""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import tomli_w
from hypothesis import example, given, settings
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
from fak_core.admission import ScreenConfig, ToolScreen
from fak_core.policy import ToolDecl, parse_policy, policy_to_dict
from fak_core.ratelimit import RateLimit
from fak_core.rules import ArgumentRule

names = st.text(st.characters(min_codepoint=97, max_codepoint=122), min_size=1, max_size=8)
V2 = "fak-policy/v2"
CLASSES = ("EXEC", "DESTRUCTIVE", "EGRESS", "SPEND", "CREDENTIAL")  # the registry's
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
    screen=st.none()
    | st.builds(
        ScreenConfig,
        injection_markers=st.lists(names.map(lambda n: n + " now"), max_size=2).map(tuple),
        builtin_markers=st.just(True),
        page_out_bytes=st.sampled_from([256, 4096, 65536]),
        tools=st.dictionaries(
            names,
            st.builds(
                ToolScreen,
                st.lists(names.map(lambda n: "do " + n), max_size=2).map(tuple),
                st.none() | st.sampled_from([256, 1 << 20]),
            ),
            max_size=2,
        ),
    ),
)


all_classes = st.sampled_from(CLASSES)
# RFC 6901: "/" then reference tokens, "~" only as "~0" (a "~") or "~1" (a "/")
_POINTER = st.lists(
    st.sampled_from(["a", "to", "0", "", "~0", "~1", "a~1b", "~0~1", "~1~0x"]),
    min_size=1,
    max_size=3,
).map(lambda tokens: "/" + "/".join(tokens))
pointers = st.lists(_POINTER, max_size=2, unique=True).map(tuple)
tool_decls = st.one_of(
    st.just(ToolDecl("NONE")),
    st.builds(
        lambda sink, dests, allowed, content, approve: ToolDecl(
            sink,
            dests,
            allowed if dests or content else (),
            content,
            approve,
        ),
        all_classes,
        pointers,
        st.lists(names, max_size=2).map(tuple),
        pointers,
        st.booleans(),
    ),
)
argument_rules = st.lists(
    st.builds(
        lambda tool, effect, when, taint, priority, reason, claim: ArgumentRule(
            tool, effect, when, taint, priority, "" if effect == "allow" else reason, claim
        ),
        names,
        st.sampled_from(["allow", "deny", "witness"]),
        st.sampled_from([True, False, {"required": ["n"]}])
        | st.integers(-3, 3).map(lambda lo: {"properties": {"n": {"minimum": lo}}}),
        st.sampled_from(["any", "trusted", "tainted"]),
        st.integers(-(2**40), 2**40) | st.integers(-3, 3),
        reasons | st.just(""),
        st.sampled_from(["", "over the limit", "東京"]),
    ),
    max_size=3,
).map(tuple)
# v2 documents: every v1 key plus declared tool semantics, strict_sinks and argument rules;
# gated_sinks and authorize may name every class of the registry
v2_policies = st.builds(
    lambda p, gated, authorize, tools, strict, rules: Policy(
        **{
            **{f: getattr(p, f) for f in p.__dataclass_fields__},
            "version": "fak-policy/v2",
            "gated_sinks": gated,
            "authorize": authorize,
            "tools": tools,
            "strict_sinks": strict,
            "rules": rules,
        }
    ),
    policies,
    st.lists(all_classes, unique=True).map(tuple),
    st.lists(st.builds(AuthorizeRule, names, all_classes), max_size=2).map(tuple),
    st.dictionaries(names, tool_decls, max_size=3),
    st.booleans(),
    argument_rules,
)


_EDGES = Policy(  # the boundaries of every numeric and optional field, always run
    version=V2,
    arg_rules=(ArgRule("t", "a", max_bytes=0), ArgRule("t", "b", max_bytes=2**53)),
    gated_sinks=(),
    safe_sinks=(),
    tools={"n": ToolDecl("NONE"), "s": ToolDecl("SPEND", ("/",), ("x",), ("/a~0~1",), True)},
    strict_sinks=True,
    rules=(ArgumentRule("t", "witness", False, "tainted", -(2**62), "", ""),),
    rate_limit=RateLimit(1, 0.5, "global"),
)


@pytest.mark.fak_theorem("D2.1")
@example(_EDGES, "json")
@example(_EDGES, "toml")
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


@pytest.mark.fak_theorem("D2.1", "D2.3")
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


@pytest.mark.fak_theorem("D2.3")
@pytest.mark.parametrize("stem", ["p", "pol", "policy", "policy key"])
def test_files_by_suffix_and_clear_file_errors(
    tmp_path: Path, stem: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    toml_text, json_text = 'allow = ["a"]\n[deny]\nb = "POLICY_BLOCK"\n', '{"allow": ["a"]}'
    for suffix, text in ((".toml", toml_text), (".TOML", toml_text), (".json", json_text)):
        path = tmp_path / (stem + suffix)
        path.write_text(text, encoding="utf-8")
        p = load_policy(path)
        assert p.allow == ("a",) and p.deny == ({} if suffix == ".json" else {"b": "POLICY_BLOCK"})
        assert load_policy(str(path)) == p  # a path given as a string is a path too
    # an explicit format wins over the suffix
    (tmp_path / "t.json").write_text(toml_text, encoding="utf-8")
    assert load_policy(tmp_path / "t.json", "toml").allow == ("a",)
    # text, with the format given or (for JSON) read from its first character
    assert load_policy(toml_text, "toml").allow == ("a",)
    assert load_policy(json_text).allow == ("a",)
    with pytest.raises(PolicyError, match=r"^policy: a policy must be a JSON object"):
        load_policy("  [1]")
    with pytest.raises(ValueError, match="unknown policy format 'yaml'"):
        load_policy(json_text, "yaml")
    # every error names the file once: decoding, reading and the keys themselves
    bad = tmp_path / (stem + ".toml")
    bad.write_text("allow = [", encoding="utf-8")
    with pytest.raises(PolicyError, match=rf"^{re.escape(str(bad))}: not valid TOML"):
        load_policy(bad)
    bad.write_text('allow = [""]', encoding="utf-8")
    with pytest.raises(PolicyError) as info:
        load_policy(bad)
    assert str(info.value) == f"{bad}: policy key 'allow': expected a list of non-empty strings"
    # a relative file name that starts like the message ("pol", "policy") is named too
    monkeypatch.chdir(tmp_path)
    rel = Path(stem + ".json")
    rel.write_text('{"posture": "x"}', encoding="utf-8")
    with pytest.raises(PolicyError) as info:
        load_policy(rel)
    assert str(info.value).startswith(f"{rel}: policy key 'posture'")
    with pytest.raises(PolicyError, match=r"cannot read policy file .*missing\.json: "):
        load_policy(tmp_path / "missing.json")
    with pytest.raises(PolicyError, match=r"cannot read policy file"):
        load_policy(tmp_path)  # a directory
    (tmp_path / "bin.json").write_bytes(b"\xff\xfe")
    with pytest.raises(PolicyError, match=r"policy file .*bin\.json is not UTF-8 text$"):
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


# ------------------------------------------------- every key: defaults, refusals, format
_FIELDS = {f.name: f for f in dataclasses.fields(Policy)}


def _default(name: str) -> Any:
    f = _FIELDS[name]
    return f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default


def _left_out(raw: dict[str, Any], record: Any, data: Any, label: str) -> Any:
    """Leave optional keys out of one written table; ``record`` with them at its defaults
    (an argument rule's check is not optional: it needs exactly one)."""
    defaults = {f.name: f.default for f in dataclasses.fields(record)}
    checks = ("allow_glob", "deny_regex", "max_bytes") if isinstance(record, ArgRule) else ()
    optional = sorted(
        k for k in raw if k not in checks and defaults.get(k) is not dataclasses.MISSING
    )
    gone = data.draw(
        st.sets(st.sampled_from(optional)) if optional else st.just(set()), label=label
    )
    result = dataclasses.replace(record, **{k: defaults[k] for k in gone})
    # an allow-list needs destinations or content to apply to
    bare = isinstance(result, ToolDecl) and not (result.destinations or result.content)
    if bare and result.allow_destinations:
        gone -= {"destinations", "content"}
    for k in gone:
        del raw[k]
    return dataclasses.replace(record, **{k: defaults[k] for k in gone})


@pytest.mark.fak_theorem("D2.1", "D2.3")
@given(policies | v2_policies, st.data(), st.sampled_from(["json", "toml"]))
def test_a_key_left_out_means_its_default(policy: Policy, data: Any, fmt: str) -> None:
    doc = policy_to_dict(policy)
    # a v2 document keeps its version (without it, it is v1 and its v2 keys are refused)
    optional = sorted(k for k in doc if k != "version" or not policy.is_v2)
    dropped = data.draw(st.sets(st.sampled_from(optional)), label="dropped")
    kept = {k: v for k, v in doc.items() if k not in dropped}
    # the oracle is the dataclasses' own field defaults, not the loader; in v2 the
    # gated sinks default to every class of the registry (D2.8)
    defaults = {k: _default(k) for k in dropped}
    if policy.is_v2 and "gated_sinks" in dropped:
        defaults["gated_sinks"] = CLASSES
    expected = dataclasses.replace(policy, **defaults)
    arg_rules = [
        _left_out(raw, rule, data, "arg rule keys left out")
        for raw, rule in zip(kept.get("arg_rules", []), expected.arg_rules, strict=True)
    ]
    rules = [
        _left_out(raw, rule, data, "rule keys left out")
        for raw, rule in zip(kept.get("rules", []), expected.rules, strict=True)
    ]
    tools = {
        name: _left_out(kept["tools"][name], decl, data, f"{name}: keys left out")
        for name, decl in expected.tools.items()
    }
    expected = dataclasses.replace(
        expected, arg_rules=tuple(arg_rules), rules=tuple(rules), tools=tools
    )
    text = json.dumps(kept) if fmt == "json" else tomli_w.dumps(kept)
    assert load_policy(text, fmt) == expected


@pytest.mark.fak_theorem("D2.1")
@given(policies, st.sampled_from(["café", "résumé_π", "東京", "x\u00a0y"]))
def test_the_json_dump_is_sorted_indented_and_keeps_characters(policy: Policy, word: str) -> None:
    policy = dataclasses.replace(policy, allow=(*policy.allow, word))
    text = dump_policy(policy, "json")
    assert text.endswith("}\n") and not text.endswith("\n\n")
    assert word in text  # written as itself, not as \\u escapes

    def sorted_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        assert [k for k, _ in pairs] == sorted(k for k, _ in pairs)
        return dict(pairs)

    json.loads(text, object_pairs_hook=sorted_pairs)
    lines = text.splitlines()
    assert lines[0] == "{" and lines[1].startswith('  "') and not lines[1].startswith("   ")
    assert all((len(ln) - len(ln.lstrip(" "))) % 2 == 0 for ln in lines)


@pytest.mark.fak_theorem("D2.1")
def test_the_dumper_refuses_what_it_cannot_write() -> None:
    holds_null = Policy(schemas={"t": {"enum": [None, 1]}})
    assert load_policy(dump_policy(holds_null, "json"), "json") == holds_null
    with pytest.raises(PolicyError, match=r"cannot be written as TOML.*write it as JSON"):
        dump_policy(holds_null, "toml")
    with pytest.raises(ValueError, match="unknown policy format 'yaml'"):
        dump_policy(Policy(), "yaml")


# Each case breaks a valid generated document at one key and says which key the error
# must name. The oracle is the generator: it knows what it broke and where.
Breaker = Callable[[dict[str, Any], Any], str]
_LISTS = (
    "allow",
    "allow_prefix",
    "self_modify_globs",
    "redact_fields",
    "secret_patterns",
    "safe_sinks",
    "gated_sinks",
    "deny_hosts",
)
_NOT_A_LIST = st.sampled_from(["x", 1, {"a": "b"}, True])
_NOT_A_STRING = st.sampled_from([1, ["x"], {"a": "b"}, True, 1.5])
_NOT_A_TABLE = st.sampled_from(["x", 1, ["x"], True])
_FALSY_NOT_A_STRING = st.sampled_from([0, False, [], {}, 0.0])


def _insert(doc: dict[str, Any], key: str, data: Any, bad: Any) -> int:
    """Put ``bad`` among the valid entries of list ``key``; its index."""
    items = list(doc.get(key, []))
    i = data.draw(st.integers(0, len(items)), label="index")
    doc[key] = [*items[:i], bad, *items[i:]]
    return i


def _tool(doc: dict[str, Any], key: str, data: Any, bad: Any) -> str:
    """Add tool ``name -> bad`` to table ``key`` (a name the table does not have)."""
    table = dict(doc.get(key, {}))
    name = data.draw(names.filter(lambda n: n not in table), label="tool")
    doc[key] = {**table, name: bad}
    return name


def _list_not_a_list(key: str) -> Breaker:
    def brk(doc: dict[str, Any], data: Any) -> str:
        doc[key] = data.draw(_NOT_A_LIST)
        return key

    return brk


def _list_entry(key: str, bad: st.SearchStrategy[Any]) -> Breaker:
    def brk(doc: dict[str, Any], data: Any) -> str:
        _insert(doc, key, data, data.draw(bad))
        return key

    return brk


def _pattern(key: str) -> Breaker:
    def brk(doc: dict[str, Any], data: Any) -> str:
        bad = data.draw(
            st.sampled_from(["(", "(a)\\1", "(?=a)", "a++", "(?>a)", "[z", "a{2000}", "a\ud800"])
        )
        return f"{key}[{_insert(doc, key, data, bad)}]"

    return brk


def _rule(doc: dict[str, Any], key: str, data: Any, bad: Any) -> str:
    return f"{key}[{_insert(doc, key, data, bad)}]"


def _valid_rule(data: Any) -> dict[str, Any]:
    which = data.draw(st.sampled_from(["allow_glob", "deny_regex", "max_bytes"]), label="check")
    value = {"allow_glob": "/w/*", "deny_regex": "rm", "max_bytes": 7}[which]
    return {"tool": data.draw(names), "arg": data.draw(names), which: value}


def _arg_rule_broken(change: Callable[[dict[str, Any], Any], str]) -> Breaker:
    """A valid rule changed by ``change`` (which returns the sub-key it broke, or "")."""

    def brk(doc: dict[str, Any], data: Any) -> str:
        rule = _valid_rule(data)
        sub = change(rule, data)
        where = _rule(doc, "arg_rules", data, rule)
        return f"{where}.{sub}" if sub else where

    return brk


def _set(key: str, value: st.SearchStrategy[Any]) -> Callable[[dict[str, Any], Any], str]:
    def change(rule: dict[str, Any], data: Any) -> str:
        rule[key] = data.draw(value)
        return key

    return change


def _drop(rule: dict[str, Any], data: Any) -> str:
    key = data.draw(st.sampled_from(["tool", "arg"]))
    del rule[key]
    return key


def _no_check(rule: dict[str, Any], data: Any) -> str:
    for c in ("allow_glob", "deny_regex", "max_bytes"):
        rule.pop(c, None)
    return ""


def _two_checks(rule: dict[str, Any], data: Any) -> str:
    extra = data.draw(
        st.sets(st.sampled_from(["allow_glob", "deny_regex", "max_bytes"]), min_size=2)
    )
    rule.update({c: {"allow_glob": "/x/*", "deny_regex": "x", "max_bytes": 3}[c] for c in extra})
    return ""


def _check_value(rule: dict[str, Any], data: Any) -> str:
    check = next(c for c in ("allow_glob", "deny_regex", "max_bytes") if c in rule)
    if check == "max_bytes":
        rule[check] = data.draw(st.sampled_from([-1, -(2**40), True, False, 1.5, "8"]))
    else:
        rule[check] = data.draw(_NOT_A_STRING | st.just(""))
    return check


def _bad_deny_regex(rule: dict[str, Any], data: Any) -> str:
    _no_check(rule, data)
    rule["deny_regex"] = data.draw(st.sampled_from(["(", "(a)\\1", "(?<=a)b", "a*+", "\udfff"]))
    return "deny_regex"


def _reason_name(rule: dict[str, Any], data: Any) -> str:
    rule["reason"] = data.draw(_UNKNOWN_REASON | st.just("NONE"))
    return "reason"


_UNKNOWN_REASON = st.sampled_from(["NOPE", "policy_block", "POLICY_BLOCK ", ""])


def _unknown_rule_keys(doc: dict[str, Any], data: Any) -> str:
    rule = _valid_rule(data)
    bad = data.draw(st.sets(st.sampled_from(["colour", "tools", "Reason", "max"]), min_size=1))
    rule.update(dict.fromkeys(bad, 1))
    where = _rule(doc, "arg_rules", data, rule)
    return f"{where}.{{{'|'.join(sorted(bad))}}}"  # one of them


def _authorize(change: Callable[[dict[str, Any], Any], str]) -> Breaker:
    def brk(doc: dict[str, Any], data: Any) -> str:
        rule = {"tool": data.draw(names), "sink": data.draw(st.sampled_from(["EGRESS", "EXEC"]))}
        sub = change(rule, data)
        where = _rule(doc, "authorize", data, rule)
        return f"{where}.{sub}" if sub else where

    return brk


def _auth_keys(rule: dict[str, Any], data: Any) -> str:
    if data.draw(st.booleans(), label="drop a key"):
        del rule[data.draw(st.sampled_from(["tool", "sink"]))]
    else:
        rule[data.draw(st.sampled_from(["reason", "Tool", "sinks"]))] = "x"
    return ""


def _top(key: str, value: st.SearchStrategy[Any]) -> Breaker:
    def brk(doc: dict[str, Any], data: Any) -> str:
        doc[key] = data.draw(value)
        return key

    return brk


def _in_table(key: str, value: st.SearchStrategy[Any]) -> Breaker:
    def brk(doc: dict[str, Any], data: Any) -> str:
        return f"{key}.{_tool(doc, key, data, data.draw(value))}"

    return brk


def _table_entry(key: str, value: st.SearchStrategy[Any]) -> Breaker:
    def brk(doc: dict[str, Any], data: Any) -> str:
        _tool(doc, key, data, data.draw(value))
        return key

    return brk


def _empty_name(key: str, value: Any) -> Breaker:
    def brk(doc: dict[str, Any], data: Any) -> str:
        doc[key] = {**doc.get(key, {}), "": value}
        return key

    return brk


def _sub(key: str, value: st.SearchStrategy[dict[str, Any]]) -> Breaker:
    """A broken ``key`` table; the error names ``key`` or one of its sub-keys."""

    def brk(doc: dict[str, Any], data: Any) -> str:
        doc[key] = data.draw(value)
        return key + "*"

    return brk


def _unknown_keys(valid: tuple[str, ...]) -> Callable[[dict[str, Any], Any], str]:
    """Add keys a table does not have (near misses of its real keys); the error names one."""

    def change(table: dict[str, Any], data: Any) -> str:
        near = [k.capitalize() for k in valid] + [k + "s" for k in valid] + [k + " " for k in valid]
        bad = data.draw(st.sets(st.sampled_from([*near, "colour", "x"]), min_size=1, max_size=3))
        table.update(dict.fromkeys(bad, 1))
        return "{" + "|".join(sorted(bad)) + "}"

    return change


_SCREEN_KEYS = ("injection_markers", "builtin_markers", "page_out_bytes", "tools")
_TOOL_SCREEN_KEYS = ("injection_markers", "page_out_bytes")
_BAD_MARKERS = st.sampled_from(["x", 1, True, {"a": "b"}, [""], [1], ["ok now", ""], [["x"]]])
_BAD_PAGE_OUT = st.sampled_from([0, 1, 255, -1, -(2**40), True, "4096", 4096.0, [4096]])


def _unnamed(key: str, bad: st.SearchStrategy[Any]) -> Callable[[dict[str, Any], Any], str]:
    """Set ``key`` to a bad value whose error names the table holding it."""

    def change(table: dict[str, Any], data: Any) -> str:
        table[key] = data.draw(bad)
        return ""

    return change


def _some_of(optional: dict[str, st.SearchStrategy[Any]], data: Any) -> dict[str, Any]:
    """Some of the optional keys of a table, each written with a drawn value or left out."""
    return {
        key: data.draw(value)
        for key, value in optional.items()
        if data.draw(st.booleans(), label=f"write {key}")
    }


def _valid_screen(data: Any) -> dict[str, Any]:
    """A valid screen table, any keys left out."""
    optional = {
        "injection_markers": st.lists(names.map(lambda n: n + " now"), max_size=2),
        "builtin_markers": st.just(True),
        "page_out_bytes": st.sampled_from([256, 4096, 1 << 20]),
        "tools": st.dictionaries(
            names, st.fixed_dictionaries({}, optional={"page_out_bytes": st.just(512)}), max_size=2
        ),
    }
    return _some_of(optional, data)


def _screen_broken(change: Callable[[dict[str, Any], Any], str]) -> Breaker:
    def brk(doc: dict[str, Any], data: Any) -> str:
        table = _valid_screen(data)
        sub = change(table, data)
        doc["screen"] = table
        return f"screen.{sub}" if sub else "screen"

    return brk


def _empty_screen_tool(table: dict[str, Any], data: Any) -> str:
    table["tools"] = {**table.get("tools", {}), "": {}}
    return "tools"


def _screen_tool_broken(change: Callable[[dict[str, Any], Any], str] | None) -> Breaker:
    """A tool added to the screen's ``tools``: not a table (``change`` None), or a valid
    entry changed by ``change``."""

    def tool(table: dict[str, Any], data: Any) -> str:
        if change is None:
            entry: Any = data.draw(_NOT_A_TABLE | st.just([]))
            sub = ""
        else:
            entry = {"injection_markers": ["do it"]}
            sub = change(entry, data)
        name = _tool(table, "tools", data, entry)
        return f"tools.{name}.{sub}" if sub else f"tools.{name}"

    return _screen_broken(tool)


def _rate_limit_broken(sub: str, bad: st.SearchStrategy[Any] | None) -> Breaker:
    """A valid ``rate_limit`` table with ``sub`` set to ``bad``, left out (``bad`` None:
    the required ``max_calls``) or, for ``sub`` "", unknown keys added; the error names
    that sub-key."""

    def brk(doc: dict[str, Any], data: Any) -> str:
        table: dict[str, Any] = {"max_calls": data.draw(st.integers(1, 9))}
        for key, value in (("window_s", st.floats(0.5, 9)), ("key", st.just("tool"))):
            if data.draw(st.booleans(), label=f"write {key}"):
                table[key] = data.draw(value)
        if not sub:
            near = _unknown_keys(("max_calls", "window_s", "key"))(table, data)
            doc["rate_limit"] = table
            return "rate_limit." + near
        if bad is None:
            del table[sub]
        else:
            table[sub] = data.draw(bad)
        doc["rate_limit"] = table
        return f"rate_limit.{sub}"

    return brk


_BREAKERS: dict[str, Breaker] = {
    **{f"{k}-not-a-list": _list_not_a_list(k) for k in _LISTS},
    **{f"{k}-bad-entry": _list_entry(k, _NOT_A_STRING | st.just("")) for k in _LISTS},
    "secret_patterns-not-re2": _pattern("secret_patterns"),
    "gated_sinks-unknown": _list_entry("gated_sinks", st.sampled_from(["MAIL", "egress", "Exec"])),
    "deny_hosts-not-a-host": _list_entry(
        "deny_hosts", st.sampled_from(["exa mple.com", "10.0.0.0/33", "http://x/"])
    ),
    "version-wrong": _top(
        "version",
        _NOT_A_STRING
        | st.sampled_from(["fak-policy/v3", "", "v1", "FAK-POLICY/V1", "fak-policy/V2"])
        # a known version and more: another version, not a spelling of a known one
        | st.sampled_from(["fak-policy/v10", "fak-policy/v1.1", "fak-policy/v2-draft"])
        | st.sampled_from(["fak-policy/v1 ", "fak-policy/v20", "fak-policy/v2\n"]),
    ),
    "posture-unknown": _top(
        "posture", _NOT_A_STRING | st.sampled_from(["yolo", "", "FAIL_CLOSED", "fail-closed"])
    ),
    "deny-not-a-table": _top("deny", _NOT_A_TABLE),
    "deny-empty-name": _empty_name("deny", "POLICY_BLOCK"),
    "deny-not-a-string": _table_entry("deny", _NOT_A_STRING),
    "deny-unknown-reason": _in_table("deny", _UNKNOWN_REASON | st.just("NONE")),
    "sources-not-a-table": _top("sources", _NOT_A_TABLE),
    "sources-empty-name": _empty_name("sources", "untrusted"),
    "sources-unknown": _in_table("sources", st.sampled_from(["trusted", "Untrusted", "", "x"])),
    "authorize-not-a-list": _top("authorize", _NOT_A_TABLE.filter(lambda v: v != ["x"])),
    "authorize-not-a-table": lambda doc, data: _rule(
        doc, "authorize", data, data.draw(_NOT_A_TABLE)
    ),
    "authorize-keys": _authorize(_auth_keys),
    "authorize-tool": _authorize(_set("tool", _NOT_A_STRING | st.just(""))),
    "authorize-sink": _authorize(_set("sink", st.sampled_from(["MAIL", "egress", "", 1]))),
    "arg_rules-not-a-list": _top("arg_rules", _NOT_A_TABLE.filter(lambda v: v != ["x"])),
    "arg_rules-not-a-table": lambda doc, data: _rule(
        doc, "arg_rules", data, data.draw(_NOT_A_TABLE)
    ),
    "arg_rules-unknown-key": _unknown_rule_keys,
    "arg_rules-missing": _arg_rule_broken(_drop),
    "arg_rules-tool": _arg_rule_broken(_set("tool", _NOT_A_STRING | st.just(""))),
    "arg_rules-arg": _arg_rule_broken(_set("arg", _NOT_A_STRING | st.just(""))),
    "arg_rules-no-check": _arg_rule_broken(_no_check),
    "arg_rules-two-checks": _arg_rule_broken(_two_checks),
    "arg_rules-check-value": _arg_rule_broken(_check_value),
    "arg_rules-deny_regex-not-re2": _arg_rule_broken(_bad_deny_regex),
    "arg_rules-reason": _arg_rule_broken(_reason_name),
    "arg_rules-reason-type": _arg_rule_broken(_set("reason", _NOT_A_STRING)),
    "schemas-not-a-table": _top("schemas", _NOT_A_TABLE),
    "schemas-invalid": _in_table(
        "schemas",
        st.sampled_from([{"type": "nope"}, {"minLength": -1}, {"required": "q"}, {"type": 1}]),
    ),
    "rate_limit-not-a-table": _top("rate_limit", _NOT_A_TABLE),
    **{
        f"rate_limit-{sub}": _rate_limit_broken(sub, bad)
        for sub, bad in (
            # max_calls: required, an integer >= 1 (1 is valid: the boundary)
            ("max_calls", st.sampled_from([0, -1, -(2**40), True, False, 1.5, 2.0, "2", [2]])),
            ("window_s", st.sampled_from([0, 0.0, -1, -0.5, True, False, "5", [5], {"s": 5}])),
            ("key", st.sampled_from(["user", "", "TOOL", "trace ", 1, True, ["tool"]])),
        )
    },
    "rate_limit-missing-max_calls": _rate_limit_broken("max_calls", None),
    "rate_limit-unknown-key": _rate_limit_broken("", None),
    "screen-not-a-table": _top("screen", _NOT_A_TABLE),
    "screen-unknown-key": _screen_broken(_unknown_keys(_SCREEN_KEYS)),
    "screen-injection_markers": _screen_broken(_set("injection_markers", _BAD_MARKERS)),
    # the screen's own size and flag are checked by ScreenConfig: the error names the table
    "screen-page_out_bytes": _screen_broken(_unnamed("page_out_bytes", _BAD_PAGE_OUT)),
    "screen-builtin_markers": _screen_broken(
        _unnamed("builtin_markers", st.sampled_from([1, 0, "true", [True], {"a": True}]))
    ),
    "screen-tools-not-a-table": _screen_broken(_set("tools", _NOT_A_TABLE)),
    "screen-tools-empty-name": _screen_broken(_empty_screen_tool),
    "screen-tools-entry-not-a-table": _screen_tool_broken(None),
    "screen-tools-unknown-key": _screen_tool_broken(_unknown_keys(_TOOL_SCREEN_KEYS)),
    "screen-tools-injection_markers": _screen_tool_broken(_set("injection_markers", _BAD_MARKERS)),
    # a tool's size is checked by ToolScreen: the error names the tool's table
    "screen-tools-page_out_bytes": _screen_tool_broken(_unnamed("page_out_bytes", _BAD_PAGE_OUT)),
}

# ------------------------------------------------------------- v2 keys, every breakage
# Derived from the format (README "Policy v2"), not from the loader: a declaration has a
# sink (a registered class or NONE), destinations and content (lists of distinct RFC 6901
# pointers), allow_destinations (non-empty strings with a canonical form, only with
# destinations or content), approve (a boolean, never on a NONE tool); a NONE tool has
# neither destinations nor content. A rule has a tool, an effect, and
# optionally when (a JSON Schema), taint, priority (an integer), reason (a refusal reason,
# not on an allow rule) and claim (a string).
_NOT_A_POINTER = st.sampled_from(
    [
        *("to", "", "a/b", "~0", " /a", 1, True, ["/a"]),  # no leading "/"
        *("/a~2", "/a~", "/~", "/~~0", "/~0~", "/a~1~2", "/~0/b~x", "/~1~0~3"),  # a bad escape
    ]
)
_NOT_A_BOOL = st.sampled_from([1, 0, "true", "yes", [True], {"a": True}, 1.0])
_NOT_A_CLASS = st.sampled_from(
    ["MAIL", "egress", "none", "", "UNDECLARED", "Exec", 1, True, ["EGRESS"], {"a": "b"}]
)
_NOT_A_SCHEMA = st.sampled_from(
    [{"type": "nope"}, {"minimum": "x"}, {"required": "q"}, {"type": 1}, 1, "x", [1], 1.5]
)


def _valid_decl(data: Any) -> dict[str, Any]:
    """A valid declaration with a class (never NONE), any optional keys left out."""
    decl: dict[str, Any] = {"sink": data.draw(st.sampled_from(CLASSES), label="sink")}
    dests = data.draw(st.lists(_POINTER, max_size=2, unique=True), label="destinations")
    content = data.draw(st.lists(_POINTER, max_size=2, unique=True), label="content")
    if dests or data.draw(st.booleans()):
        decl["destinations"] = dests
    if content or data.draw(st.booleans()):
        decl["content"] = content
    if dests or content:
        allowed = data.draw(st.lists(st.sampled_from(["a.example", "x@y.example", "bob"])))
        if allowed or data.draw(st.booleans()):
            decl["allow_destinations"] = allowed
    if data.draw(st.booleans()):
        decl["approve"] = data.draw(st.booleans())
    return decl


def _decl_broken(change: Callable[[dict[str, Any], Any], str]) -> Breaker:
    """A valid declaration changed by ``change`` (the sub-key it broke, or ""), added to
    ``tools`` under a name the table does not have."""

    def brk(doc: dict[str, Any], data: Any) -> str:
        decl = _valid_decl(data)
        sub = change(decl, data)
        where = f"tools.{_tool(doc, 'tools', data, decl)}"
        return f"{where}.{sub}" if sub else where

    return brk


def _decl_sink(decl: dict[str, Any], data: Any) -> str:
    if data.draw(st.booleans(), label="leave the sink out"):
        del decl["sink"]
    else:
        decl["sink"] = data.draw(_NOT_A_CLASS)
    return "sink"


def _pointers_not_a_list(key: str) -> Callable[[dict[str, Any], Any], str]:
    def change(decl: dict[str, Any], data: Any) -> str:
        decl[key] = data.draw(st.sampled_from(["/to", 1, {"a": "/b"}, True]))
        return key

    return change


def _pointer_entry(key: str) -> Callable[[dict[str, Any], Any], str]:
    def change(decl: dict[str, Any], data: Any) -> str:
        items = list(decl.get(key, []))
        i = data.draw(st.integers(0, len(items)), label="index")
        decl[key] = [*items[:i], data.draw(_NOT_A_POINTER), *items[i:]]
        return f"{key}[{i}]"

    return change


def _pointer_twice(key: str) -> Callable[[dict[str, Any], Any], str]:
    def change(decl: dict[str, Any], data: Any) -> str:
        items = list(decl.get(key, [])) or [data.draw(_POINTER)]
        again = data.draw(st.sampled_from(items))
        i = data.draw(st.integers(0, len(items)), label="index")
        decl[key] = [*items[:i], again, *items[i:]]
        return key

    return change


def _never_a_sink_with(key: str) -> Callable[[dict[str, Any], Any], str]:
    """A NONE tool with ``key`` (destinations or content), the other left empty."""

    def change(decl: dict[str, Any], data: Any) -> str:
        other = "content" if key == "destinations" else "destinations"
        decl.update({"sink": "NONE", other: [], key: data.draw(st.lists(_POINTER, min_size=1))})
        return key

    return change


def _with_destinations(decl: dict[str, Any], data: Any) -> None:
    """Give the declaration a destination if it has none (so an allow-list applies)."""
    if not decl.get("destinations") and not decl.get("content"):
        decl["destinations"] = [data.draw(_POINTER)]


def _allow_entry(
    bad: st.SearchStrategy[Any], indexed: bool
) -> Callable[[dict[str, Any], Any], str]:
    """An allow-list entry ``bad`` among valid ones; the error names the list, or the
    entry's index when ``indexed``."""

    def change(decl: dict[str, Any], data: Any) -> str:
        _with_destinations(decl, data)
        items = list(decl.get("allow_destinations", []))
        i = data.draw(st.integers(0, len(items)), label="index")
        decl["allow_destinations"] = [*items[:i], data.draw(bad), *items[i:]]
        return f"allow_destinations[{i}]" if indexed else "allow_destinations"

    return change


def _allow_not_a_list(decl: dict[str, Any], data: Any) -> str:
    _with_destinations(decl, data)
    decl["allow_destinations"] = data.draw(st.sampled_from(["a.example", 1, {"a": "b"}, True]))
    return "allow_destinations"


def _allow_without_destinations(decl: dict[str, Any], data: Any) -> str:
    decl.pop("approve", None)
    for key in ("destinations", "content"):
        if decl.pop(key, None) is not None and data.draw(st.booleans()):
            decl[key] = []
    decl["allow_destinations"] = data.draw(st.lists(names, min_size=1, max_size=2))
    return "allow_destinations"


def _approve_not_a_bool(decl: dict[str, Any], data: Any) -> str:
    decl["approve"] = data.draw(_NOT_A_BOOL)
    return "approve"


def _approve_on_never_a_sink(decl: dict[str, Any], data: Any) -> str:
    for key in ("destinations", "content", "allow_destinations"):
        if decl.pop(key, None) is not None and data.draw(st.booleans()):
            decl[key] = []
    decl["sink"] = "NONE"
    decl["approve"] = True
    return "approve"


_DECL_KEYS = ("sink", "destinations", "content", "allow_destinations", "approve")
_V2_RULE_KEYS = ("tool", "effect", "when", "taint", "priority", "reason", "claim")


def _valid_v2_rule(data: Any) -> dict[str, Any]:
    """A valid argument rule, any optional keys left out."""
    effect = data.draw(st.sampled_from(["allow", "deny", "witness"]), label="effect")
    rule: dict[str, Any] = {"tool": data.draw(names), "effect": effect}
    optional = {
        "when": st.sampled_from([True, False, {"required": ["n"]}, {"properties": {}}]),
        "taint": st.sampled_from(["any", "trusted", "tainted"]),
        "priority": st.integers(-(2**31), 2**31),
        "claim": st.sampled_from(["", "too much", "東京"]),
        "reason": st.just("") if effect == "allow" else reasons | st.just(""),
    }
    return {**rule, **_some_of(optional, data)}


def _v2_rule_broken(change: Callable[[dict[str, Any], Any], str]) -> Breaker:
    def brk(doc: dict[str, Any], data: Any) -> str:
        rule = _valid_v2_rule(data)
        sub = change(rule, data)
        where = _rule(doc, "rules", data, rule)
        return f"{where}.{sub}" if sub else where

    return brk


def _required(key: str, bad: st.SearchStrategy[Any]) -> Callable[[dict[str, Any], Any], str]:
    def change(rule: dict[str, Any], data: Any) -> str:
        if data.draw(st.booleans(), label=f"leave {key} out"):
            del rule[key]
        else:
            rule[key] = data.draw(bad)
        return key

    return change


def _rule_reason(rule: dict[str, Any], data: Any) -> str:
    if rule["effect"] == "allow" and data.draw(st.booleans(), label="reason on an allow rule"):
        rule["reason"] = data.draw(reasons)  # a valid name, but an allow refuses nothing
    else:
        rule["reason"] = data.draw(_UNKNOWN_REASON.filter(bool) | st.just("NONE") | _NOT_A_STRING)
    return "reason"


def _v2_key_in_v1(doc: dict[str, Any], data: Any) -> str:
    """A valid v2 key in a v1 document (its version written or left out)."""
    if data.draw(st.booleans(), label="leave the version out"):
        doc.pop("version", None)
    key = data.draw(st.sampled_from(["tools", "strict_sinks", "rules"]))
    doc[key] = {
        "tools": {data.draw(names): {"sink": data.draw(st.sampled_from(("NONE", *CLASSES)))}},
        "strict_sinks": data.draw(st.booleans()),
        "rules": data.draw(st.lists(st.builds(dict, tool=names, effect=st.just("deny")))),
    }[key]
    return key


_V1_BREAKERS: dict[str, Breaker] = {  # broken only in a v1 document
    "v2-key-in-v1": _v2_key_in_v1,
    "gated_sinks-v2-class-in-v1": _list_entry(
        "gated_sinks", st.sampled_from(["SPEND", "CREDENTIAL"])
    ),
    "authorize-v2-class-in-v1": _authorize(_set("sink", st.sampled_from(["SPEND", "CREDENTIAL"]))),
}
_V2_BREAKERS: dict[str, Breaker] = {  # broken only in a v2 document
    "tools-not-a-table": _top("tools", _NOT_A_TABLE),
    "tools-empty-name": _empty_name("tools", {"sink": "EGRESS"}),
    "tools-entry-not-a-table": _in_table("tools", _NOT_A_TABLE | st.just([])),
    "tools-unknown-key": _decl_broken(_unknown_keys(_DECL_KEYS)),
    "tools-sink": _decl_broken(_decl_sink),
    **{
        f"tools-{key}-{kind}": _decl_broken(make(key))
        for key in ("destinations", "content")
        for kind, make in (
            ("not-a-list", _pointers_not_a_list),
            ("not-a-pointer", _pointer_entry),
            ("twice", _pointer_twice),
            ("on-NONE", _never_a_sink_with),
        )
    },
    "tools-allow_destinations-not-a-list": _decl_broken(_allow_not_a_list),
    "tools-allow_destinations-bad-entry": _decl_broken(
        _allow_entry(st.sampled_from(["", 1, True, ["a"], {"a": "b"}]), indexed=False)
    ),
    "tools-allow_destinations-no-canonical-form": _decl_broken(
        _allow_entry(st.sampled_from(["...", "!!!", " ", "\u00a0", ",;", ". ."]), indexed=True)
    ),
    "tools-allow_destinations-without-destinations": _decl_broken(_allow_without_destinations),
    "tools-approve-not-a-bool": _decl_broken(_approve_not_a_bool),
    "tools-approve-on-never-a-sink": _decl_broken(_approve_on_never_a_sink),
    "strict_sinks-not-a-bool": _top("strict_sinks", _NOT_A_BOOL),
    "rules-not-a-list": _top("rules", _NOT_A_TABLE.filter(lambda v: v != ["x"])),
    "rules-not-a-table": lambda doc, data: _rule(doc, "rules", data, data.draw(_NOT_A_TABLE)),
    "rules-unknown-key": _v2_rule_broken(_unknown_keys(_V2_RULE_KEYS)),
    "rules-tool": _v2_rule_broken(_required("tool", _NOT_A_STRING | st.just(""))),
    "rules-effect": _v2_rule_broken(
        _required("effect", st.sampled_from(["Allow", "block", "", "DENY", 1, True, ["deny"]]))
    ),
    "rules-taint": _v2_rule_broken(
        _set("taint", st.sampled_from(["clean", "", "ANY", "untrusted", 1, True, ["any"]]))
    ),
    "rules-priority": _v2_rule_broken(
        _set("priority", st.sampled_from([True, False, 1.5, 2.0, "1", [1], {"p": 1}]))
    ),
    "rules-when": _v2_rule_broken(_set("when", _NOT_A_SCHEMA)),
    "rules-reason": _v2_rule_broken(_rule_reason),
    # a reason that is no string, falsy ones too (which `if reason:` alone would pass)
    "rules-reason-type": _v2_rule_broken(_set("reason", _FALSY_NOT_A_STRING | _NOT_A_STRING)),
    "rules-claim": _v2_rule_broken(_set("claim", _NOT_A_STRING)),
}

_ALL_BREAKERS = {**_BREAKERS, **_V1_BREAKERS, **_V2_BREAKERS}


def _also_witnesses(case: str) -> Any:
    """A case that breaks a tool declaration or an argument rule (or puts a v2 key in a
    v1 document) is also a witness of D2.8 or D2.9, whose theorems claim that refusal."""
    also = [
        t
        for t, hit in (
            ("D2.8", case.startswith(("tools-", "strict_sinks-", "v2-key-"))),
            ("D2.9", case.startswith(("rules-", "v2-key-"))),
        )
        if hit
    ]
    return pytest.param(case, marks=[pytest.mark.fak_theorem(*also)] if also else [])


def _names_key(message: str, key: str) -> bool:
    if key.endswith("*"):  # the key or one of its sub-keys
        return message.startswith(f"policy: policy key '{key[:-1]}")
    if key.endswith("}"):  # one of several unknown keys
        head, alts = key[:-1].split("{")
        return any(message.startswith(f"policy: policy key '{head}{a}'") for a in alts.split("|"))
    return message.startswith(f"policy: policy key '{key}'")


@pytest.mark.fak_theorem("D2.1", "D2.3")
@pytest.mark.parametrize("case", [_also_witnesses(c) for c in sorted(_ALL_BREAKERS)])
@settings(max_examples=8)
@given(st.data(), st.sampled_from(["json", "toml"]))
def test_a_document_broken_at_one_key_is_refused_naming_it(case: str, data: Any, fmt: str) -> None:
    # a v1 key breaks in either version; a v2 key only in a v2 document, and a v1
    # document is broken by what only v2 allows
    kinds = v2_policies if case in _V2_BREAKERS else policies | v2_policies
    policy = data.draw(policies if case in _V1_BREAKERS else kinds, label="policy")
    doc = policy_to_dict(policy)
    doc = {
        k: v
        for k, v in doc.items()
        if data.draw(st.booleans(), label=f"keep {k}") or k == "version"
    }
    key = _ALL_BREAKERS[case](doc, data)
    text = json.dumps(doc) if fmt == "json" else tomli_w.dumps(doc)
    with pytest.raises(PolicyError) as info:
        load_policy(text, fmt)
    assert _names_key(str(info.value), key), (key, str(info.value))


@pytest.mark.fak_theorem("D2.1", "D2.3")
@given(policies, st.data())
def test_an_unknown_key_is_refused_with_the_valid_keys_listed(policy: Policy, data: Any) -> None:
    doc = policy_to_dict(policy)
    extra = data.draw(st.sets(names.filter(lambda n: n not in _FIELDS), min_size=1, max_size=3))
    text = json.dumps({**doc, **dict.fromkeys(extra, 1)})
    with pytest.raises(PolicyError) as info:
        load_policy(text, "json")
    message = str(info.value)
    assert any(message.startswith(f"policy: unknown policy key {k!r}; ") for k in extra)
    assert message.endswith("valid keys: " + ", ".join(_FIELDS))


def _value_paths(doc: Any, path: str = "") -> list[tuple[str, Any, Any]]:
    """Every (path, container, key) of a dumped document's tables and lists, not inside a
    JSON Schema (a schema's own keys are the schema's business, D2.3's `schemas`)."""
    out: list[tuple[str, Any, Any]] = []
    items = doc.items() if isinstance(doc, dict) else enumerate(doc)
    for k, v in items:
        here = f"{path}[{k}]" if isinstance(doc, list) else f"{path}.{k}" if path else k
        out.append((here, doc, k))
        schema = k in ("when",) or path == "schemas"
        if isinstance(v, (dict, list)) and not schema:
            out.extend(_value_paths(v, here))
    return out


@pytest.mark.fak_theorem("D2.1", "D2.3")
@given(policies | v2_policies, st.data())
def test_a_json_null_anywhere_is_refused_naming_its_key(policy: Policy, data: Any) -> None:
    # the format has no key whose value may be null (a key left out takes its default);
    # the error names the key or a table or list that holds it
    doc = policy_to_dict(policy)
    paths = _value_paths(doc)
    # each kind of key as likely as any other (tool names and indices do not count)
    shapes = sorted({re.sub(r"\[\d+\]", "[]", _shape(p, doc)) for p, _, _ in paths})
    shape = data.draw(st.sampled_from(shapes), label="kind of key")
    path, container, key = data.draw(
        st.sampled_from([t for t in paths if re.sub(r"\[\d+\]", "[]", _shape(t[0], doc)) == shape]),
        label="null at",
    )
    container[key] = None
    with pytest.raises(PolicyError) as info:
        load_policy(json.dumps(doc), "json")
    message = str(info.value)
    named = message.removeprefix("policy: policy key '").partition("'")[0]
    assert message.startswith("policy: policy key '"), message
    assert path == named or path.startswith((named + ".", named + "[")), (path, message)


def _shape(path: str, doc: dict[str, Any]) -> str:
    """``path`` with the names of a table of tools (``deny.x``, ``tools.x``) as ``*``."""
    for table in ("deny", "sources", "schemas", "tools", "screen.tools"):
        if path.startswith(table + "."):
            rest = path[len(table) + 1 :]
            name = min((rest + ".").split(".")[0], rest.split("[")[0], key=len)
            return f"{table}.*{rest[len(name) :]}"
    return path


@pytest.mark.fak_theorem("D2.3")
@pytest.mark.parametrize(
    ("doc", "key"),
    [
        ('{"rate_limit": null}', "rate_limit"),
        ('{"screen": null}', "screen"),
        ('{"screen": {"tools": {"t": {"page_out_bytes": null}}}}', "screen.tools.t.page_out_bytes"),
    ],
)
def test_a_json_null_for_a_table_is_not_the_table_left_out(doc: str, key: str) -> None:
    with pytest.raises(PolicyError, match=rf"^policy: policy key '{re.escape(key)}'"):
        load_policy(doc, "json")


@pytest.mark.fak_theorem("D2.3")
@pytest.mark.parametrize("key", ["deny", "sources"])
@pytest.mark.parametrize("name", [1, None, ("t",), ""])
def test_a_table_of_tools_holds_only_tool_names(key: str, name: Any) -> None:
    # parse_policy takes a decoded document from Python too, where a key need not be text
    value = "POLICY_BLOCK" if key == "deny" else "untrusted"
    with pytest.raises(PolicyError, match=rf"^policy key '{key}': expected a table of tool"):
        parse_policy({key: {"ok": value, name: value}})


@pytest.mark.fak_theorem("D2.1", "D2.3")
@pytest.mark.parametrize("text", ["[]", "1", '"x"', "true", "null", "[{}]", "1.5"])
def test_a_document_that_is_not_one_object_is_refused(text: str) -> None:
    with pytest.raises(PolicyError, match=r"^policy: a policy must be a JSON object / TOML table"):
        load_policy(text, "json")


@pytest.mark.fak_theorem("D2.3")
@given(policies, st.sampled_from(["json", "toml"]), st.integers(1, 50))
def test_text_that_does_not_parse_is_refused_once_prefixed(
    policy: Policy, fmt: str, cut: int
) -> None:
    text = dump_policy(policy, fmt)
    broken = text[: max(1, len(text) - cut)] + ("{" if fmt == "json" else '\n[[x\n= "')
    name = "JSON" if fmt == "json" else "TOML"
    with pytest.raises(PolicyError, match=rf"^policy: not valid {name}"):
        load_policy(broken, fmt)


@pytest.mark.fak_theorem("D2.3")
@pytest.mark.parametrize(
    ("doc", "expected"),
    [
        (
            {"arg_rules": [{"tool": "t", "arg": "a", "max_bytes": 0}]},
            ArgRule("t", "a", max_bytes=0),
        ),
        (
            {
                "arg_rules": [
                    {"tool": "t", "arg": "a", "max_bytes": 2**53, "reason": "DEFAULT_DENY"}
                ]
            },
            ArgRule("t", "a", max_bytes=2**53, reason="DEFAULT_DENY"),
        ),
        (
            {"arg_rules": [{"tool": "t", "arg": "a", "deny_regex": "x"}]},
            ArgRule("t", "a", deny_regex="x"),
        ),
        (
            {"arg_rules": [{"tool": "t", "arg": "a", "allow_glob": "*"}]},
            ArgRule("t", "a", allow_glob="*"),
        ),
    ],
)
def test_limits_a_rule_accepts(doc: dict[str, Any], expected: ArgRule) -> None:
    assert load_policy(json.dumps(doc), "json").arg_rules == (expected,)
    assert load_policy(json.dumps({**doc, "version": "fak-policy/v1"}), "json").arg_rules == (
        expected,
    )


@pytest.mark.fak_theorem("D2.3")
@pytest.mark.parametrize(
    ("doc", "field", "expected"),
    [  # the boundaries a table accepts, and its keys left out at the dataclass's defaults
        ({"rate_limit": {"max_calls": 1}}, "rate_limit", RateLimit(1)),
        ({"rate_limit": {"max_calls": 3, "window_s": 7}}, "rate_limit", RateLimit(3, 7.0)),
        (
            {"rate_limit": {"max_calls": 2**53, "window_s": 5e-324, "key": "global"}},
            "rate_limit",
            RateLimit(2**53, 5e-324, "global"),
        ),
        ({"screen": {}}, "screen", ScreenConfig()),
        (
            {"screen": {"page_out_bytes": 256, "tools": {"t": {}}}},
            "screen",
            ScreenConfig(page_out_bytes=256, tools={"t": ToolScreen()}),
        ),
        (
            {"screen": {"tools": {"t": {"page_out_bytes": 256}}}},
            "screen",
            ScreenConfig(tools={"t": ToolScreen(page_out_bytes=256)}),
        ),
        (
            {"screen": {"injection_markers": ["stop now"]}},
            "screen",
            ScreenConfig(injection_markers=("stop now",)),
        ),
        (
            {"screen": {"builtin_markers": False, "injection_markers": ["stop now"]}},
            "screen",
            ScreenConfig(injection_markers=("stop now",), builtin_markers=False),
        ),
    ],
)
def test_limits_a_table_accepts(doc: dict[str, Any], field: str, expected: Any) -> None:
    for fmt, text in (("json", json.dumps(doc)), ("toml", tomli_w.dumps(doc))):
        assert getattr(load_policy(text, fmt), field) == expected
