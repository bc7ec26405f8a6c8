"""The policy file ``fak-policy/v1`` or ``/v2`` (JSON or TOML): load strictly, dump faithfully.

A ``fak-policy/v2`` document may also declare tool semantics (``tools``: per tool its
sink class or ``NONE``, its destination arguments as JSON Pointers and a destination
allow-list) and ``strict_sinks`` (default true: an undeclared tool is a sink; a policy
may set it false); its ``gated_sinks`` default to every sink class the registry knows.
A v1 document keeps its meaning (sink classes guessed from tool names) and is refused if
it uses a v2 key; loading one logs a warning naming each tool whose sink class is only
guessed (:func:`fak_core.sinks.guessed_sinks`), which ``fak policy check`` prints.

Unknown keys and unknown reason names are refused with an error that names the key and
lists the valid ones. ``load_policy(dump_policy(p)) == p`` for every policy. An empty
document is the fail-closed empty floor: every call is DEFAULT_DENY.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from importlib import resources
from pathlib import Path
from typing import Any

from fak_core.admission import ScreenConfig, ToolScreen
from fak_core.grounding import canonical_value
from fak_core.hosts import HostDenyList, HostError
from fak_core.identifiers import KEYS
from fak_core.patterns import PolicyPatternError, compile_policy_pattern
from fak_core.ratelimit import DEFAULT_KEY as RATE_DEFAULT_KEY
from fak_core.ratelimit import KEYS as RATE_KEYS
from fak_core.ratelimit import RateLimit
from fak_core.reasons import Reason, ReasonRegistry
from fak_core.rules import EFFECTS, TAINT_CONDITIONS, ArgumentRule
from fak_core.schemas import InvalidSchemaError, compile_schema
from fak_core.sinkclasses import NOT_A_SINK, SinkClassRegistry

__all__ = [
    "POLICY_V2",
    "POLICY_VERSION",
    "ArgRule",
    "AuthorizeRule",
    "Policy",
    "PolicyError",
    "ToolDecl",
    "default_policy",
    "dump_policy",
    "load_policy",
    "parse_policy",
    "policy_digest",
]

POLICY_VERSION = "fak-policy/v1"
POLICY_V2 = "fak-policy/v2"
POSTURES = ("fail_closed", "admit_and_log")
SINK_NAMES = ("EGRESS", "EXEC", "DESTRUCTIVE")
#: Keys only a ``fak-policy/v2`` document may hold.
V2_KEYS = ("tools", "strict_sinks", "rules")
_RULE_KEYS = ("tool", "effect", "when", "taint", "priority", "reason", "claim")
_TOOL_DECL_KEYS = (
    "sink",
    "destinations",
    "content",
    "allow_destinations",
    "approve",
    "identifiers",
    "confidential",
)
SOURCE_NAMES = ("trusted_local", "untrusted")
_log = logging.getLogger("fak_core.policy")


class PolicyError(ValueError):
    """A policy document that cannot be used; the message names the key and the fix."""


@dataclass(frozen=True, slots=True)
class ArgRule:
    """A per-argument rule: exactly one of ``allow_glob``, ``deny_regex``, ``max_bytes``."""

    tool: str
    arg: str
    allow_glob: str | None = None
    deny_regex: str | None = None
    max_bytes: int | None = None
    reason: str = "POLICY_BLOCK"


@dataclass(frozen=True, slots=True)
class AuthorizeRule:
    """Lets ``tool`` reach ``sink`` even on a tainted session (an explicit, audited escape)."""

    tool: str
    sink: str


@dataclass(frozen=True, slots=True)
class ToolDecl:
    """A tool's declared semantics (v2): its sink class (``NONE``: never a sink), the
    JSON Pointers of its destination arguments, and destinations always allowed for it
    (compared in canonical form, :func:`fak_core.grounding.canonical_value`)."""

    sink: str
    destinations: tuple[str, ...] = ()
    allow_destinations: tuple[str, ...] = ()
    #: Free-text arguments (JSON Pointers): every URL, e-mail address or host written
    #: inside them is a destination too (a link in a message sends its reader there).
    content: tuple[str, ...] = ()
    #: An ungrounded destination asks a human (REQUIRE_WITNESS, resolved by a signed
    #: approval token, :mod:`fak_core.approvals`) instead of being refused outright.
    approve: bool = False
    #: JSON Pointers into the tool's *result* (``*``: every element or member) whose
    #: values name entities the system keeps; each grounds a destination equal to it as
    #: a whole value (:mod:`fak_core.identifiers`).
    identifiers: tuple[str, ...] = ()
    #: JSON Pointers into the tool's *result* whose values are the user's secrets: a
    #: tainted session's sink calls may not carry them (:mod:`fak_core.confidential`).
    confidential: tuple[str, ...] = ()


@dataclass(frozen=True)
class Policy:
    """A capability floor and the IFC settings that go with it. Treat as read-only."""

    version: str = POLICY_VERSION
    posture: str = "fail_closed"
    allow: tuple[str, ...] = ()
    allow_prefix: tuple[str, ...] = ()
    deny: dict[str, str] = field(default_factory=dict)
    self_modify_globs: tuple[str, ...] = ()
    redact_fields: tuple[str, ...] = ()
    secret_patterns: tuple[str, ...] = ()
    safe_sinks: tuple[str, ...] = ("transfer_to_human", "transfer_to_human_agents")
    gated_sinks: tuple[str, ...] = ("EGRESS", "DESTRUCTIVE")
    authorize: tuple[AuthorizeRule, ...] = ()
    sources: dict[str, str] = field(default_factory=dict)
    arg_rules: tuple[ArgRule, ...] = ()
    deny_hosts: tuple[str, ...] = ()
    schemas: dict[str, Any] = field(default_factory=dict)
    rate_limit: RateLimit | None = None
    screen: ScreenConfig | None = None
    tools: dict[str, ToolDecl] = field(default_factory=dict)
    #: An undeclared tool is a gated sink; None (left out): true for v2, false for v1.
    strict_sinks: bool | None = None
    rules: tuple[ArgumentRule, ...] = ()

    def __post_init__(self) -> None:
        if self.strict_sinks is None:
            object.__setattr__(self, "strict_sinks", self.version == POLICY_V2)

    @property
    def is_v2(self) -> bool:
        return self.version == POLICY_V2


_KEYS = tuple(f.name for f in fields(Policy))
_ARG_RULE_KEYS = ("tool", "arg", "allow_glob", "deny_regex", "max_bytes", "reason")


def _fail(key: str, problem: str) -> PolicyError:
    return PolicyError(f"policy key {key!r}: {problem}")


def _str_list(doc: Mapping[str, Any], key: str) -> tuple[str, ...]:
    value = doc.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise _fail(key, "expected a list of non-empty strings")
    return tuple(value)


def _str_map(doc: Mapping[str, Any], key: str) -> dict[str, str]:
    value = doc.get(key, {})
    if not isinstance(value, dict) or not all(
        isinstance(k, str) and k and isinstance(v, str) for k, v in value.items()
    ):
        raise _fail(key, "expected a table of tool name -> string")
    return dict(value)


def _reason(reasons: ReasonRegistry, key: str, name: str) -> None:
    try:
        code = reasons.code(name)
    except KeyError as exc:
        raise _fail(key, str(exc.args[0])) from None
    if code == Reason.NONE:
        raise _fail(key, f"NONE is not a refusal reason; valid: {', '.join(reasons.names())}")


def _regex(key: str, pattern: str) -> None:
    try:
        compile_policy_pattern(pattern, key)
    except PolicyPatternError as exc:
        raise PolicyError(str(exc)) from None


def parse_policy(
    doc: Any, reasons: ReasonRegistry | None = None, sinks: SinkClassRegistry | None = None
) -> Policy:
    """Validate a decoded policy document and build the :class:`Policy`."""
    reasons = reasons if reasons is not None else ReasonRegistry()
    classes = (sinks if sinks is not None else SinkClassRegistry()).names()
    if not isinstance(doc, dict):
        raise PolicyError(f"a policy must be a JSON object / TOML table, not {type(doc).__name__}")
    unknown = sorted(set(doc) - set(_KEYS))
    if unknown:
        raise PolicyError(f"unknown policy key {unknown[0]!r}; valid keys: {', '.join(_KEYS)}")
    version = doc.get("version", POLICY_VERSION)
    if version not in (POLICY_VERSION, POLICY_V2):  # exactly: "fak-policy/v10" is neither
        raise _fail(
            "version",
            f"expected {POLICY_VERSION!r} or {POLICY_V2!r} (this kernel reads v1 and v2), "
            f"got {version!r}",
        )
    v2 = version == POLICY_V2
    for key in V2_KEYS:
        if key in doc and not v2:
            raise _fail(key, f"needs version {POLICY_V2!r} (this document is {version!r})")
    posture = doc.get("posture", "fail_closed")
    if posture not in POSTURES:
        raise _fail("posture", f"expected one of {', '.join(POSTURES)}, got {posture!r}")

    deny = _str_map(doc, "deny")
    for tool, name in deny.items():
        _reason(reasons, f"deny.{tool}", name)

    secret_patterns = _str_list(doc, "secret_patterns")
    for i, p in enumerate(secret_patterns):
        _regex(f"secret_patterns[{i}]", p)

    known = classes if v2 else SINK_NAMES
    default_gated = classes if v2 else Policy.gated_sinks
    gated = _str_list(doc, "gated_sinks") if "gated_sinks" in doc else default_gated
    for s in gated:
        if s not in known:
            raise _fail("gated_sinks", f"unknown sink {s!r}; valid sinks: {', '.join(known)}")

    authorize: list[AuthorizeRule] = []
    raw_auth = doc.get("authorize", [])
    if not isinstance(raw_auth, list):
        raise _fail("authorize", "expected a list of {tool, sink} tables")
    for i, rule in enumerate(raw_auth):
        k = f"authorize[{i}]"
        if not isinstance(rule, dict) or set(rule) != {"tool", "sink"}:
            raise _fail(k, "expected exactly the keys tool and sink")
        if not isinstance(rule["tool"], str) or not rule["tool"]:
            raise _fail(k + ".tool", "expected a tool name")
        if rule["sink"] not in known:
            raise _fail(k + ".sink", f"unknown sink {rule['sink']!r}; valid: {', '.join(known)}")
        authorize.append(AuthorizeRule(rule["tool"], rule["sink"]))

    sources = _str_map(doc, "sources")
    for tool, src in sources.items():
        if src not in SOURCE_NAMES:
            raise _fail(
                f"sources.{tool}", f"expected one of {', '.join(SOURCE_NAMES)}, got {src!r}"
            )

    rules: list[ArgRule] = []
    raw_rules = doc.get("arg_rules", [])
    if not isinstance(raw_rules, list):
        raise _fail("arg_rules", "expected a list of rule tables")
    for i, rule in enumerate(raw_rules):
        k = f"arg_rules[{i}]"
        if not isinstance(rule, dict):
            raise _fail(k, "expected a table with tool, arg and one check")
        bad = sorted(set(rule) - set(_ARG_RULE_KEYS))
        if bad:
            raise _fail(f"{k}.{bad[0]}", f"unknown key; valid keys: {', '.join(_ARG_RULE_KEYS)}")
        for req in ("tool", "arg"):
            if not isinstance(rule.get(req), str) or not rule[req]:
                raise _fail(f"{k}.{req}", "required, a non-empty string")
        checks = [c for c in ("allow_glob", "deny_regex", "max_bytes") if c in rule]
        if len(checks) != 1:
            raise _fail(k, "needs exactly one of allow_glob, deny_regex, max_bytes")
        check = checks[0]
        value = rule[check]
        if check == "max_bytes":
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise _fail(f"{k}.max_bytes", "expected a non-negative integer")
        else:
            if not isinstance(value, str) or not value:
                raise _fail(f"{k}.{check}", "expected a non-empty string")
            if check == "deny_regex":
                _regex(f"{k}.deny_regex", value)
        reason = rule.get("reason", "POLICY_BLOCK")
        if not isinstance(reason, str):
            raise _fail(f"{k}.reason", "expected a reason name")
        _reason(reasons, f"{k}.reason", reason)
        rules.append(ArgRule(rule["tool"], rule["arg"], **{check: value}, reason=reason))

    schemas = doc.get("schemas", {})
    if not isinstance(schemas, dict):
        raise _fail("schemas", "expected a table of tool name -> JSON Schema")
    for tool, schema in schemas.items():
        try:
            compile_schema(schema, tool)
        except InvalidSchemaError as exc:
            raise _fail(f"schemas.{tool}", str(exc)) from None

    # a table left out is None; a JSON null written for one is a wrong type, not "absent"
    rate_limit = _rate_limit(doc["rate_limit"]) if "rate_limit" in doc else None
    screen = _screen(doc["screen"]) if "screen" in doc else None
    safe = _str_list(doc, "safe_sinks") if "safe_sinks" in doc else Policy.safe_sinks
    return Policy(
        version=version,
        posture=posture,
        allow=_str_list(doc, "allow"),
        allow_prefix=_str_list(doc, "allow_prefix"),
        deny=deny,
        self_modify_globs=_str_list(doc, "self_modify_globs"),
        redact_fields=_str_list(doc, "redact_fields"),
        secret_patterns=secret_patterns,
        safe_sinks=safe,
        gated_sinks=gated,
        authorize=tuple(authorize),
        sources=sources,
        arg_rules=tuple(rules),
        deny_hosts=_deny_hosts(doc),
        schemas=json.loads(json.dumps(schemas)),
        rate_limit=rate_limit,
        screen=screen,
        tools=_tool_decls(doc.get("tools", {}), classes),
        strict_sinks=_bool(doc, "strict_sinks", v2),
        rules=_argument_rules(doc.get("rules", []), reasons),
    )


def _argument_rules(raw: Any, reasons: ReasonRegistry) -> tuple[ArgumentRule, ...]:
    """The v2 ``rules`` list: ordered per-tool rules (:mod:`fak_core.rules`)."""
    if not isinstance(raw, list):
        raise _fail("rules", "expected a list of rule tables")
    out: list[ArgumentRule] = []
    for i, rule in enumerate(raw):
        k = f"rules[{i}]"
        rule = _keys(rule, k, _RULE_KEYS)
        tool = rule.get("tool")
        if not isinstance(tool, str) or not tool:
            raise _fail(f"{k}.tool", "required, a tool name")
        effect = rule.get("effect")
        if effect not in EFFECTS:
            raise _fail(f"{k}.effect", f"required, one of {', '.join(EFFECTS)}; got {effect!r}")
        taint = rule.get("taint", "any")
        if taint not in TAINT_CONDITIONS:
            raise _fail(f"{k}.taint", f"one of {', '.join(TAINT_CONDITIONS)}; got {taint!r}")
        priority = rule.get("priority", 0)
        if not isinstance(priority, int) or isinstance(priority, bool):
            raise _fail(f"{k}.priority", "expected an integer (higher is tried first)")
        when = rule.get("when", True)
        try:
            compile_schema(when, tool)
        except InvalidSchemaError as exc:
            raise _fail(f"{k}.when", str(exc)) from None
        reason = rule.get("reason", "")
        if not isinstance(reason, str):
            raise _fail(f"{k}.reason", "expected a reason name")
        if reason:
            if effect == "allow":
                raise _fail(f"{k}.reason", "an allow rule refuses nothing: it has no reason")
            _reason(reasons, f"{k}.reason", reason)
        claim = rule.get("claim", "")
        if not isinstance(claim, str):
            raise _fail(f"{k}.claim", "expected a string")
        out.append(
            ArgumentRule(tool, effect, json.loads(json.dumps(when)), taint, priority, reason, claim)
        )
    return tuple(out)


def _bool(doc: Mapping[str, Any], key: str, default: bool) -> bool:
    value = doc.get(key, default)
    if not isinstance(value, bool):
        raise _fail(key, "expected true or false")
    return value


def _pointer(key: str, text: Any, keys: bool = False) -> str:
    """A JSON Pointer (RFC 6901) naming an argument: ``/name`` or ``/a/0/b``; with
    ``keys`` (identifiers), a last token ``~keys`` (the member names found there) too."""
    if not isinstance(text, str) or not text.startswith("/"):
        raise _fail(key, f"expected a JSON Pointer such as '/recipient', got {text!r}")
    tail = "/" + KEYS
    body = text[: -len(tail)] if keys and text.endswith(tail) else text
    i = body.find("~")
    while i != -1:
        if body[i + 1 : i + 2] not in ("0", "1"):
            raise _fail(key, f"{text!r}: '~' must be followed by 0 or 1 (RFC 6901)")
        i = body.find("~", i + 2)
    return text


#: the lists of JSON Pointers a tool declaration holds: where a pointer points (for the
#: refusal of a list that is not one), and what one names (for the refusal of a repeat)
_POINTER_LISTS = {
    "destinations": ("", "a destination"),
    "content": ("", "an argument"),
    "identifiers": (" into the result", "a result field"),
    "confidential": (" into the result", "a result field"),
}


def _pointers(decl: dict[str, Any], where: str, field: str, keys: bool = False) -> tuple[str, ...]:
    """The JSON Pointers (:func:`_pointer`) listed under ``field`` of the declaration at
    ``where`` (none when absent): refused, the key named, unless a list of distinct ones."""
    into, item = _POINTER_LISTS[field]
    key = f"{where}.{field}"
    raw = decl.get(field, [])
    if not isinstance(raw, list):
        raise _fail(key, f"expected a list of JSON Pointers{into}")
    out = tuple(_pointer(f"{key}[{i}]", d, keys=keys) for i, d in enumerate(raw))
    if len(set(out)) != len(out):
        raise _fail(key, f"{item} is listed twice")
    return out


def _tool_decls(raw: Any, classes: tuple[str, ...]) -> dict[str, ToolDecl]:
    """The v2 ``tools`` table: tool name -> {sink, destinations, allow_destinations}."""
    if not isinstance(raw, dict):
        raise _fail("tools", "expected a table of tool name -> {sink, destinations}")
    out: dict[str, ToolDecl] = {}
    for tool, decl in raw.items():
        where = f"tools.{tool}"
        if not tool:
            raise _fail("tools", "a tool name must be non-empty")
        decl = _keys(decl, where, _TOOL_DECL_KEYS)
        sink = decl.get("sink")
        valid = (NOT_A_SINK, *classes)
        if sink not in valid:
            raise _fail(f"{where}.sink", f"required, one of {', '.join(valid)}; got {sink!r}")
        pointers = _pointers(decl, where, "destinations")
        content = _pointers(decl, where, "content")
        if sink == NOT_A_SINK and content:
            raise _fail(f"{where}.content", "a tool that is never a sink has no content rules")
        allowed = decl.get("allow_destinations", [])
        if not isinstance(allowed, list) or not all(isinstance(a, str) and a for a in allowed):
            raise _fail(f"{where}.allow_destinations", "expected a list of non-empty strings")
        allowed = tuple(allowed)
        for i, entry in enumerate(allowed):
            if not canonical_value(entry)[1]:
                raise _fail(
                    f"{where}.allow_destinations[{i}]",
                    f"{entry!r} names no destination (nothing is left once canonical)",
                )
        if sink == NOT_A_SINK and pointers:
            raise _fail(f"{where}.destinations", "a tool that is never a sink has no destinations")
        if allowed and not (pointers or content):
            raise _fail(f"{where}.allow_destinations", "needs destinations to apply to")
        approve = decl.get("approve", False)
        if not isinstance(approve, bool):
            raise _fail(f"{where}.approve", "expected true or false")
        if approve and sink == NOT_A_SINK:
            raise _fail(f"{where}.approve", "a tool that is never a sink is never held")
        ids = _pointers(decl, where, "identifiers", keys=True)
        conf = _pointers(decl, where, "confidential")
        out[tool] = ToolDecl(sink, pointers, allowed, content, approve, ids, conf)
    return out


_SCREEN_KEYS = ("injection_markers", "builtin_markers", "page_out_bytes", "tools")
_TOOL_SCREEN_KEYS = ("injection_markers", "page_out_bytes")


def _keys(raw: Any, key: str, valid: tuple[str, ...]) -> dict[str, Any]:
    if not isinstance(raw, dict):
        raise _fail(key, f"expected a table with any of {', '.join(valid)}")
    bad = sorted(set(raw) - set(valid))
    if bad:
        raise _fail(f"{key}.{bad[0]}", f"unknown key; valid keys: {', '.join(valid)}")
    return raw


def _screen(raw: Any) -> ScreenConfig:
    """The optional ``screen`` table: the result screen's markers and page-out sizes."""
    doc = _keys(raw, "screen", _SCREEN_KEYS)
    tools: dict[str, ToolScreen] = {}
    raw_tools = doc.get("tools", {})
    if not isinstance(raw_tools, dict):
        raise _fail("screen.tools", "expected a table of tool name -> screen settings")
    try:
        for tool, t in raw_tools.items():
            where = f"screen.tools.{tool}"
            if not tool:
                raise _fail("screen.tools", "a tool name must be non-empty")
            t = _keys(t, where, _TOOL_SCREEN_KEYS)
            tools[tool] = _tool_screen(t, where)
        markers = _str_list(doc, "injection_markers") if "injection_markers" in doc else ()
        config = ScreenConfig(
            injection_markers=markers,
            builtin_markers=doc.get("builtin_markers", True),
            page_out_bytes=doc.get("page_out_bytes", ScreenConfig.page_out_bytes),
            tools=tools,
        )
    except ValueError as exc:
        if isinstance(exc, PolicyError):
            if str(exc).startswith("policy key 'injection_markers'"):
                raise _fail(
                    "screen.injection_markers", "expected a list of non-empty strings"
                ) from None
            raise
        raise _fail("screen", str(exc)) from None
    return config


def _tool_screen(t: dict[str, Any], where: str) -> ToolScreen:
    markers = t.get("injection_markers", [])
    if not isinstance(markers, list) or not all(isinstance(m, str) and m for m in markers):
        raise _fail(f"{where}.injection_markers", "expected a list of non-empty strings")
    page = t.get("page_out_bytes")
    if page is None and "page_out_bytes" in t:  # left out: the screen's size; null: wrong
        raise _fail(f"{where}.page_out_bytes", "expected an integer")
    try:
        return ToolScreen(tuple(markers), page)
    except ValueError as exc:
        raise _fail(where, str(exc)) from None


def _screen_to_dict(screen: ScreenConfig) -> dict[str, Any]:
    out: dict[str, Any] = {
        "injection_markers": list(screen.injection_markers),
        "builtin_markers": screen.builtin_markers,
        "page_out_bytes": screen.page_out_bytes,
    }
    tools: dict[str, Any] = {}
    for name, t in screen.tools.items():
        entry: dict[str, Any] = {"injection_markers": list(t.injection_markers)}
        if t.page_out_bytes is not None:
            entry["page_out_bytes"] = t.page_out_bytes
        tools[name] = entry
    if tools:
        out["tools"] = tools
    return out


def _deny_hosts(doc: Mapping[str, Any]) -> tuple[str, ...]:
    # each entry must read as a host name, an IP address or a CIDR network (fak_core.hosts)
    hosts = _str_list(doc, "deny_hosts")
    try:
        HostDenyList(hosts)
    except HostError as exc:
        raise _fail("deny_hosts", str(exc)) from None
    return hosts


_WINDOW = "expected a finite number of seconds > 0"


def _rate_limit(raw: Any) -> RateLimit:
    raw = _keys(raw, "rate_limit", ("max_calls", "window_s", "key"))
    cap = raw.get("max_calls")
    if not isinstance(cap, int) or isinstance(cap, bool) or cap < 1:
        raise _fail("rate_limit.max_calls", "required, an integer >= 1")
    window = raw.get("window_s", 60.0)
    if not isinstance(window, (int, float)) or isinstance(window, bool):
        raise _fail("rate_limit.window_s", _WINDOW)
    try:
        seconds = float(window)
    except OverflowError:  # an integer beyond any float (JSON has no bound)
        raise _fail("rate_limit.window_s", _WINDOW) from None
    if not 0 < seconds < math.inf:  # NaN and infinity (TOML ``nan``, ``inf``) too
        raise _fail("rate_limit.window_s", _WINDOW)
    key = raw.get("key", RATE_DEFAULT_KEY)
    if key not in RATE_KEYS:
        raise _fail("rate_limit.key", f"expected one of {', '.join(RATE_KEYS)}, got {key!r}")
    return RateLimit(cap, seconds, key)


def policy_to_dict(policy: Policy) -> dict[str, Any]:
    """The policy as a plain document with every key (the dump format)."""
    return {
        "version": policy.version,
        "posture": policy.posture,
        "allow": list(policy.allow),
        "allow_prefix": list(policy.allow_prefix),
        "deny": dict(policy.deny),
        "self_modify_globs": list(policy.self_modify_globs),
        "redact_fields": list(policy.redact_fields),
        "secret_patterns": list(policy.secret_patterns),
        "safe_sinks": list(policy.safe_sinks),
        "gated_sinks": list(policy.gated_sinks),
        "authorize": [{"tool": r.tool, "sink": r.sink} for r in policy.authorize],
        "sources": dict(policy.sources),
        "arg_rules": [
            {
                k: v
                for k, v in (
                    ("tool", r.tool),
                    ("arg", r.arg),
                    ("allow_glob", r.allow_glob),
                    ("deny_regex", r.deny_regex),
                    ("max_bytes", r.max_bytes),
                    ("reason", r.reason),
                )
                if v is not None
            }
            for r in policy.arg_rules
        ],
        "deny_hosts": list(policy.deny_hosts),
        "schemas": json.loads(json.dumps(policy.schemas)),
        **(
            {
                "rate_limit": {
                    "max_calls": policy.rate_limit.max_calls,
                    "window_s": policy.rate_limit.window_s,
                    "key": policy.rate_limit.key,
                }
            }
            if policy.rate_limit is not None
            else {}
        ),
        **({"screen": _screen_to_dict(policy.screen)} if policy.screen is not None else {}),
        **(
            {
                "strict_sinks": policy.strict_sinks,
                "rules": [
                    {
                        "tool": r.tool,
                        "effect": r.effect,
                        "when": json.loads(json.dumps(r.when)),
                        "taint": r.taint,
                        "priority": r.priority,
                        "reason": r.reason,
                        "claim": r.claim,
                    }
                    for r in policy.rules
                ],
                "tools": {
                    name: {
                        "sink": d.sink,
                        "destinations": list(d.destinations),
                        "content": list(d.content),
                        "allow_destinations": list(d.allow_destinations),
                        "approve": d.approve,
                        "identifiers": list(d.identifiers),
                        "confidential": list(d.confidential),
                    }
                    for name, d in policy.tools.items()
                },
            }
            if policy.is_v2
            else {}
        ),
    }


def dump_policy(policy: Policy, fmt: str = "json") -> str:
    """Serialise a policy as ``json`` or ``toml``; loading the text gives the same policy."""
    doc = policy_to_dict(policy)
    if fmt == "json":
        return json.dumps(doc, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
    if fmt == "toml":
        import tomli_w

        try:
            return tomli_w.dumps(doc)
        except (TypeError, ValueError) as exc:
            raise PolicyError(
                f"this policy cannot be written as TOML ({exc}); write it as JSON"
            ) from None
    raise ValueError(f"unknown policy format {fmt!r}: use 'json' or 'toml'")


def _decode(text: str, fmt: str, origin: str) -> Any:
    if fmt == "toml":
        try:
            return tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise PolicyError(f"{origin}: not valid TOML: {exc}") from None
    try:
        return json.loads(text) if text.strip() else {}
    except json.JSONDecodeError as exc:
        raise PolicyError(
            f"{origin}: not valid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}"
        ) from None


def load_policy(
    source: str | Path,
    fmt: str | None = None,
    reasons: ReasonRegistry | None = None,
    sinks: SinkClassRegistry | None = None,
) -> Policy:
    """Load a policy from a path (format from its suffix) or from text (``fmt`` required)."""
    if isinstance(source, Path) or (fmt is None and not source.lstrip().startswith(("{", "["))):
        path = Path(source)
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise PolicyError(f"cannot read policy file {path}: {exc.strerror}") from None
        except UnicodeDecodeError:
            raise PolicyError(f"policy file {path} is not UTF-8 text") from None
        fmt = fmt or ("toml" if path.suffix.lower() == ".toml" else "json")
        origin = str(path)
    else:
        text, fmt, origin = source, fmt or "json", "policy"
    if fmt not in ("json", "toml"):
        raise ValueError(f"unknown policy format {fmt!r}: use 'json' or 'toml'")
    try:
        policy = parse_policy(_decode(text, fmt, origin), reasons, sinks)
    except PolicyError as exc:
        if str(exc).startswith(f"{origin}: "):
            raise
        raise PolicyError(f"{origin}: {exc}") from None
    _warn_of_guesses(policy, origin)
    return policy


def _warn_of_guesses(policy: Policy, origin: str) -> None:
    """Log, once, the tools whose sink class ``policy`` leaves to the name heuristics."""
    from fak_core.sinks import guess_warning  # the sink gate reads policies: load it late

    warning = guess_warning(policy)
    if warning is not None:
        _log.warning("%s: %s", origin, warning)


def default_policy() -> Policy:
    """The policy that ships with the package (``fak_core/default_policy.json``)."""
    text = resources.files("fak_core").joinpath("default_policy.json").read_text("utf-8")
    # parsed, not loaded: its guesses are logged by whoever shows it (fak policy check)
    return parse_policy(json.loads(text))


def policy_digest(policy: Policy) -> str:
    """``sha256:<hex>`` of the policy's canonical JSON dump."""
    doc = policy_to_dict(policy)
    data = json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(data.encode("utf-8")).hexdigest()
