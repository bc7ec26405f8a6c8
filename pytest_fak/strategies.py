"""Hypothesis strategies for witnesses about a fak kernel.

- :func:`tool_calls`: well-formed calls for a tool's JSON Schema (``hypothesis-jsonschema``,
  through :mod:`pytest_fak.schemas`).
- :func:`calls_for`: valid and/or invalid calls for several tools, from each one's schema.
- :func:`malformed_args`: argument bytes rung 0 must refuse (non-JSON, non-object,
  truncated, invalid UTF-8).
- :func:`schema_violating_args`: JSON objects that parse but break the tool's schema.
- :func:`adjudicator_chains`: chains of adjudicators returning chosen verdict kinds.
- :func:`session_scripts`: call/result sequences with or without untrusted results; with
  ``tools={name: schema}`` each call's arguments come from that tool's schema.

A falsifying example prints as code to paste into a test: calls as
``tool_call('send_email', '{"to":"a@b.c"}', 'fak-witness')`` and scripts as
``SessionScript(steps=(Step('call', 'send_email', '{...}', valid=True), ...))``, given
``from pytest_fak.strategies import SessionScript, Step, tool_call``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from hypothesis import strategies as st

__all__ = [
    "Chain",
    "SessionScript",
    "Step",
    "adjudicator_chains",
    "calls_for",
    "const_adjudicator",
    "malformed_args",
    "schema_violating_args",
    "session_scripts",
    "tool_call",
    "tool_calls",
]

_JSON_SCALARS = st.none() | st.booleans() | st.integers() | st.text(max_size=20)
_JSON = st.recursive(
    _JSON_SCALARS,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def tool_call(tool: str, args: str, trace_id: str = "fak-witness") -> Any:
    """``fak_core.ToolCall(tool, args, trace_id)``: what generated calls are built with, so
    a falsifying example prints as this call, ready to paste into a test."""
    from fak_core import ToolCall

    return ToolCall(tool, args, trace_id)


def _checked(tool: str, schema: Mapping[str, Any]) -> dict[str, Any]:
    """``schema`` as a dict, or a clear error when it is not a valid JSON Schema."""
    import jsonschema

    if not isinstance(schema, Mapping):
        raise TypeError(f"tool {tool!r}: the schema must be a JSON Schema object (a dict)")
    out = dict(schema)
    try:
        jsonschema.validators.validator_for(out).check_schema(out)
    except jsonschema.SchemaError as exc:
        raise ValueError(f"tool {tool!r}: not a valid JSON Schema: {exc.message}") from None
    return out


def _valid_args(tool: str, schema: Mapping[str, Any]) -> st.SearchStrategy[str]:
    from pytest_fak.schemas import from_schema

    return from_schema(_checked(tool, schema)).filter(lambda v: isinstance(v, dict)).map(_dumps)


def tool_calls(
    tool: str, schema: Mapping[str, Any], *, trace_id: str = "fak-witness"
) -> st.SearchStrategy[Any]:
    """``ToolCall`` values for ``tool`` whose arguments satisfy ``schema``."""
    return st.builds(tool_call, st.just(tool), _valid_args(tool, schema), st.just(trace_id))


def calls_for(
    tools: Mapping[str, Mapping[str, Any]],
    *,
    valid: bool | None = True,
    trace_id: str = "fak-witness",
) -> st.SearchStrategy[Any]:
    """``ToolCall`` values for any of ``tools`` (name → JSON Schema of its arguments):
    arguments that satisfy the tool's schema (``valid=True``), JSON objects that break it
    (``False``, see :func:`schema_violating_args`), or both (``None``)."""
    if not tools:
        raise ValueError("calls_for: give at least one tool and its JSON Schema")
    parts: list[st.SearchStrategy[Any]] = []
    for name, schema in tools.items():
        if valid in (True, None):
            parts.append(tool_calls(name, schema, trace_id=trace_id))
        if valid in (False, None):
            bad = schema_violating_args(_checked(name, schema))
            parts.append(st.builds(tool_call, st.just(name), bad, st.just(trace_id)))
    return st.one_of(parts)


def malformed_args() -> st.SearchStrategy[str | bytes]:
    """Argument payloads that are not one JSON object (rung 0 must refuse every one)."""
    non_json = st.text(min_size=1, max_size=40).filter(lambda s: not _parses(s))
    non_object = (st.lists(_JSON, max_size=3) | _JSON_SCALARS).map(_dumps)
    truncated = (
        st.dictionaries(st.text(min_size=1, max_size=8), _JSON, min_size=1, max_size=4)
        .map(_dumps)
        .flatmap(lambda s: st.integers(1, len(s) - 1).map(lambda n: s[:n]))
        .filter(lambda s: not _parses(s))
    )
    bad_utf8 = st.binary(min_size=1, max_size=16).map(lambda b: b'{"k": "' + b"\xff" + b + b'"}')
    return st.one_of(non_json, non_object, truncated, bad_utf8)


def _parses(text: str) -> bool:
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


def schema_violating_args(schema: Mapping[str, Any]) -> st.SearchStrategy[str]:
    """JSON-object argument text that parses but fails ``schema`` (rung 1 must refuse it)."""
    import jsonschema

    from pytest_fak.schemas import from_schema

    validator = jsonschema.Draft202012Validator(dict(schema))
    objects = st.dictionaries(st.text(max_size=10), _JSON, max_size=5)
    try:
        negated: st.SearchStrategy[Any] = from_schema({"not": dict(schema)}) | objects
    except Exception:
        negated = objects
    return negated.filter(lambda v: isinstance(v, dict) and not validator.is_valid(v)).map(_dumps)


@dataclass(frozen=True)
class Chain:
    """A generated adjudicator chain: the verdicts each link returns, and the links."""

    verdicts: tuple[Any, ...]
    adjudicators: tuple[Any, ...]
    raises_at: int | None = None


def const_adjudicator(v: Any) -> Any:
    from fak_core.adjudicators import FunctionAdjudicator

    return FunctionAdjudicator(lambda _view: v)


def _raising(exc: Exception) -> Any:
    from fak_core.adjudicators import FunctionAdjudicator

    def boom(_view: Any) -> Any:
        raise exc

    return FunctionAdjudicator(boom)


def adjudicator_chains(
    kinds: Sequence[int] | None = None,
    *,
    min_size: int = 0,
    max_size: int = 6,
    unknown_kinds: bool = True,
    raising: bool = False,
) -> st.SearchStrategy[Chain]:
    """Chains whose links return chosen verdict kinds (optionally an unknown kind or a crash)."""
    from fak_core import Reason, Verdict, VerdictKind

    pool: list[int] = list(kinds) if kinds is not None else [int(k) for k in VerdictKind]
    kind_st: st.SearchStrategy[int] = st.sampled_from(pool)
    if unknown_kinds:
        kind_st = kind_st | st.integers(7, 5000).filter(lambda k: k < 1024 or k > 1100)

    def verdict(kind: int, i: int) -> Any:
        by = f"link{i}"
        if kind == VerdictKind.DENY:
            return Verdict.deny(Reason.POLICY_BLOCK, by)
        if kind == VerdictKind.TRANSFORM:
            return Verdict.transform("{}", by)
        if kind == VerdictKind.QUARANTINE:
            return Verdict.quarantine(Reason.TRUST_VIOLATION, by)
        if kind == VerdictKind.REQUIRE_WITNESS:
            return Verdict.require_witness("claim", by)
        return Verdict(kind, Reason.NONE, by)

    def build(ks: list[int], crash: int | None) -> Chain:
        vs = tuple(verdict(k, i) for i, k in enumerate(ks))
        links = [const_adjudicator(v) for v in vs]
        if crash is not None and links:
            crash %= len(links)
            links[crash] = _raising(RuntimeError(f"link{crash} crashed"))
            return Chain(vs, tuple(links), crash)
        return Chain(vs, tuple(links), None)

    crash_st = st.integers(0, max_size) if raising else st.none()
    return st.builds(build, st.lists(kind_st, min_size=min_size, max_size=max_size), crash_st)


@dataclass(frozen=True)
class Step:
    """One session step: a proposed call, or a tool result arriving from ``tool``."""

    kind: str  # "call" | "result"
    tool: str
    payload: str
    untrusted: bool = False
    #: for a call drawn from its tool's schema: whether the arguments satisfy it
    valid: bool | None = None


@dataclass(frozen=True)
class SessionScript:
    steps: tuple[Step, ...]

    @property
    def has_untrusted(self) -> bool:
        return any(s.kind == "result" and s.untrusted for s in self.steps)

    def play(self, kernel: Any, trace_id: str) -> list[Any]:
        """Run the script on ``kernel`` under ``trace_id``; the verdict of every step."""
        from fak_core import Result, Taint, ToolCall

        out = []
        for s in self.steps:
            call = ToolCall(s.tool, s.payload if s.kind == "call" else "{}", trace_id)
            if s.kind == "call":
                out.append(kernel.decide(call))
            else:
                # A trusted step is a result the host itself produced; an untrusted one
                # arrives as wire bytes (minted TAINTED).
                taint = Taint.TAINTED if s.untrusted else Taint.TRUSTED
                out.append(kernel.admit(call, Result.make(payload=s.payload, taint=taint))[1])
        return out


def _inserted(drawn: tuple[tuple[Step, ...], Step, int]) -> tuple[Step, ...]:
    """``steps`` with ``step`` inserted at position ``at`` (modulo their length + 1)."""
    steps, step, at = drawn
    i = at % (len(steps) + 1)
    return (*steps[:i], step, *steps[i:])


def session_scripts(
    call_tools: Sequence[str] = (),
    *,
    tools: Mapping[str, Mapping[str, Any]] | None = None,
    invalid_calls: bool = False,
    trusted_sources: Sequence[str] = ("read_file",),
    untrusted_sources: Sequence[str] = ("fetch_untrusted_page",),
    untrusted: bool | None = None,
    max_steps: int = 8,
) -> st.SearchStrategy[SessionScript]:
    """Session scripts; ``untrusted`` True/False forces with/without an untrusted result.

    With ``tools`` (tool name → JSON Schema of its arguments) each call's arguments are
    drawn from its tool's schema (``Step.valid`` is True); ``invalid_calls=True`` also
    draws calls whose arguments break it (``Step.valid`` False). ``call_tools`` names tools
    without a schema, whose arguments come from a small fixed key set."""
    if not call_tools and not tools:
        raise ValueError("session_scripts: name call_tools, or give tools={name: schema}")
    calls: list[st.SearchStrategy[Step]] = []
    if call_tools:
        args = st.dictionaries(
            st.sampled_from(["q", "id", "to", "url", "n"]), _JSON_SCALARS, max_size=3
        ).map(_dumps)
        calls.append(st.builds(Step, st.just("call"), st.sampled_from(list(call_tools)), args))
    for name, schema in (tools or {}).items():
        good = _valid_args(name, schema)
        calls.append(st.builds(Step, st.just("call"), st.just(name), good, valid=st.just(True)))
        if invalid_calls:
            bad = schema_violating_args(_checked(name, schema))
            calls.append(st.builds(Step, st.just("call"), st.just(name), bad, valid=st.just(False)))
    call = st.one_of(calls)
    trusted_result = st.builds(
        Step, st.just("result"), st.sampled_from(list(trusted_sources)), st.text(max_size=30)
    )
    untrusted_result = st.builds(
        Step,
        st.just("result"),
        st.sampled_from(list(untrusted_sources)),
        st.text(max_size=30),
        untrusted=st.just(True),
    )
    if untrusted is False:
        step = call | trusted_result
    else:
        step = call | trusted_result | untrusted_result
    steps: st.SearchStrategy[tuple[Step, ...]] = st.lists(step, min_size=1, max_size=max_steps).map(
        tuple
    )
    if untrusted is True:
        steps = st.tuples(steps, untrusted_result, st.integers(0, max_steps)).map(_inserted)
    scripts = st.builds(SessionScript, steps)
    return scripts
