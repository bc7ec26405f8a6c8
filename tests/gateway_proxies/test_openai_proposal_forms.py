"""D10.2, D10.5: every form an OpenAI answer proposes a call in, buffered and streamed.

A raw upstream (in process) answers with the exact document or stream a Hypothesis example
builds: one or two choices, each with text or none, and function tool calls (with or
without ``type``, with an id, none, or an empty one), custom tool calls (buffered), or a
legacy ``function_call``; a stream splits every id, name and argument text at drawn
places, may put two calls' fragments in one chunk, and carries usages on a chunk of their
own, on a content chunk or on the finish chunk. The oracle is written here, from how
each call was built (allowed, repaired, denied, unknown, malformed arguments): what the
client receives of every choice (its text, the refusal note, its kept calls in order with
the kernel's arguments, its finish reason), the gateway's record of every proposal, the
usages in order in frames without choices, and every answer parsed by the ``openai``
SDK's own response types.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from openai.types.chat import ChatCompletion, ChatCompletionChunk
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from fak_core import Policy, Reason, Verdict
from fak_core.gateway import UpstreamConfig, proxy_routes

from .inprocess import fresh_trace
from .kernels import ALLOWED, make_state

_RAW: dict[str, Any] = {"body": b"", "media": "application/json"}


async def _answer(request: Request) -> Response:
    return Response(_RAW["body"], media_type=_RAW["media"])


_UP = Starlette(routes=[Route("/v1/chat/completions", _answer, methods=["POST"])])
_STATE = make_state()
# a refusal with neither reason nor disposition: a quarantine the adjudicator gives no reason
_STATE.kernel.set_policy(
    Policy(
        allow=(*ALLOWED, "hold_bare"),
        deny={"deny_thing": "POLICY_BLOCK"},
        redact_fields=("password",),
    )
)
_STATE.kernel.add_adjudicator(
    lambda view: Verdict.quarantine(Reason.NONE, "test-bare"), 50, tools=["hold_bare"]
)
_APP = Starlette(
    routes=proxy_routes(
        _STATE, UpstreamConfig(base_url="http://up/v1", transport=httpx.ASGITransport(app=_UP))
    )
)

# ----------------------------------------------------------------------------- the calls
words = st.text("abcdeé✓", min_size=1, max_size=5)
plain = st.dictionaries(words, st.integers(0, 9) | words, max_size=2)

#: (category, name, arguments as a value or as text that is not a JSON object)
CALL = st.one_of(
    st.tuples(st.just("allow"), st.sampled_from(["send_email", "fetch_url", "get_user"]), plain),
    st.tuples(
        st.just("transform"), st.just("get_user"), plain.map(lambda a: {**a, "password": "p"})
    ),
    st.tuples(st.just("blank"), st.just("get_user"), st.sampled_from(["", " ", "\n\t"])),
    st.tuples(st.just("deny"), st.sampled_from(["deny_thing", "frobnicate"]), plain),
    st.tuples(st.just("hold"), st.sampled_from(["hold_thing", "hold_bare", "wire_money"]), plain),
    st.tuples(st.just("malformed"), st.just("send_email"), st.sampled_from(["{bad", "[1]"])),
)


@dataclass(frozen=True)
class Call:
    cat: str
    name: str
    args: Any
    kind: str  # "function", "custom", or "" (no ``type`` key: a function call)
    id: Any  # None: no id key; an empty or non-string id is no usable id

    def text(self) -> str:
        return self.args if isinstance(self.args, str) else json.dumps(self.args)

    def kept_args(self) -> Any:
        """The arguments the client receives of a kept call, as a value."""
        if self.cat == "blank":
            return {}
        assert isinstance(self.args, dict)
        return {k: v for k, v in self.args.items() if k != "password"}


def calls(custom: bool) -> st.SearchStrategy[list[Call]]:
    kinds = ["function", ""] + (["custom"] if custom else [])
    one = st.builds(
        lambda c, kind, ident: Call(c[0], c[1], c[2], kind, ident),
        CALL,
        st.sampled_from(kinds),
        st.sampled_from(["call_x", None, "", 7]),
    )
    return st.lists(one, max_size=4)


@dataclass(frozen=True)
class Choice:
    index: int
    text: str | None
    calls: list[Call]
    legacy: Call | None  # a legacy function_call (then ``calls`` is empty)
    #: the upstream's finish reason: "" for the one its proposals imply
    finish: str = ""

    def upstream_finish(self) -> str:
        natural = "function_call" if self.legacy else "tool_calls" if self.calls else "stop"
        return self.finish or natural

    def client_finish(self, survivors: bool) -> str:
        """How the choice ends for the client: as what it received says."""
        if not proposals(self):
            return self.upstream_finish()
        return ("function_call" if self.legacy else "tool_calls") if survivors else "stop"


def choice(index: int, custom: bool) -> st.SearchStrategy[Choice]:
    legacy = st.builds(lambda c: Call(c[0], c[1], c[2], "function", None), CALL)
    return st.builds(
        lambda text, cs, lg, finish: Choice(index, text, [] if lg else cs, lg, finish),
        st.sampled_from([None, "", "some text"]),
        calls(custom),
        st.none() | legacy,
        st.sampled_from(["", "stop", "length"]),
    )


def answers(custom: bool) -> st.SearchStrategy[list[Choice]]:
    return st.one_of(
        choice(0, custom).map(lambda c: [c]),
        st.tuples(choice(1, custom), choice(0, custom)).map(list),
    )


def ids(ch: Choice) -> list[str]:
    """The id each proposal of a choice has in the gateway's record."""
    if ch.legacy is not None:
        return ["function_call"]
    return [
        c.id if isinstance(c.id, str) and c.id else f"call_fak_{ch.index}_{i}"
        for i, c in enumerate(ch.calls)
    ]


def proposals(ch: Choice) -> list[Call]:
    return [ch.legacy] if ch.legacy is not None else ch.calls


def kept(c: Call) -> bool:
    return c.cat in ("allow", "transform", "blank")


NOTE = "All proposed tool calls were refused by the fak kernel: "
REASONS = {"deny_thing": "POLICY_BLOCK", "frobnicate": "DEFAULT_DENY"}
#: the notes of the held calls, whole: a quarantine has no disposition, a bare one no reason
HELD = {
    "hold_thing": "QUARANTINE (TRUST_VIOLATION)",
    "hold_bare": "QUARANTINE",
    "wire_money": "REQUIRE_WITNESS (UNWITNESSED/ESCALATE)",
}


def check_note(ch: Choice, said: str | None) -> None:
    """The text of a choice whose every proposal was refused: its own text, then the
    note naming every refused call, its kind and reason (and a disposition), in order."""
    assert said is not None
    head = f"{ch.text}\n\n{NOTE}" if ch.text else NOTE
    assert said.startswith(head), said
    items = said[len(head) :].split("; ")
    assert len(items) == len(proposals(ch)), items
    for item, c in zip(items, proposals(ch), strict=True):
        if c.name in HELD:
            assert item == f"{c.name}: {HELD[c.name]}", item
            continue
        reason = "MALFORMED" if c.cat == "malformed" else REASONS[c.name]
        assert re.fullmatch(rf"{c.name}: DENY \({reason}/[A-Z_]+\)", item), item


# ----------------------------------------------------------------------------- buffered
def _body_call(c: Call, i: int) -> dict[str, Any]:
    entry: dict[str, Any] = {}
    if c.id is not None:
        entry["id"] = c.id
    if c.kind:
        entry["type"] = c.kind
    field = "input" if c.kind == "custom" else "arguments"
    entry[c.kind or "function"] = {"name": c.name, field: c.text(), "extra": i}
    return entry


def _document(answer: list[Choice]) -> dict[str, Any]:
    out = []
    for ch in answer:
        message: dict[str, Any] = {"role": "assistant", "content": ch.text}
        if ch.legacy is not None:
            message["function_call"] = {"name": ch.legacy.name, "arguments": ch.legacy.text()}
        elif ch.calls:
            message["tool_calls"] = [_body_call(c, i) for i, c in enumerate(ch.calls)]
        out.append({"index": ch.index, "message": message, "finish_reason": ch.upstream_finish()})
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1,
        "model": "m",
        "choices": out,
    }


def sdk_parses(doc: dict[str, Any]) -> None:
    """The SDK reads the answer (a call the upstream sent without ``type`` given the
    SDK's default, ``function``: the gateway relays what the upstream wrote)."""
    copy = json.loads(json.dumps(doc))
    for c in copy["choices"]:
        for tc in c["message"].get("tool_calls") or []:
            tc.setdefault("type", "function")
    ChatCompletion.model_validate(copy)


def check_buffered(answer: list[Choice], doc: dict[str, Any]) -> None:
    sdk_parses(doc)
    got = {c["index"]: c for c in doc["choices"]}
    assert sorted(got) == sorted(ch.index for ch in answer)
    for ch in answer:
        choice_doc = got[ch.index]
        message = choice_doc["message"]
        survivors = [(pid, c) for pid, c in zip(ids(ch), proposals(ch), strict=True) if kept(c)]
        refused = bool(proposals(ch)) and not survivors
        if refused:
            check_note(ch, message["content"])
        else:
            assert message["content"] == ch.text
        if ch.legacy is not None:
            assert "tool_calls" not in message
            if survivors:
                fc = message["function_call"]
                assert fc["name"] == ch.legacy.name
                assert args_value(fc["arguments"]) == ch.legacy.kept_args()
            else:
                assert "function_call" not in message
            assert choice_doc["finish_reason"] == ch.client_finish(bool(survivors))
            continue
        assert "function_call" not in message
        want = []
        for i, c in enumerate(ch.calls):
            if not kept(c):
                continue
            entry = _body_call(c, i)
            body = entry[c.kind or "function"]
            want.append((ids(ch)[i], entry.get("type"), body["name"], body["extra"], c.kept_args()))
        have = [
            (
                tc["id"],
                tc.get("type"),
                tc[tc.get("type", "function")]["name"],
                tc[tc.get("type", "function")]["extra"],
                args_value(
                    tc[tc.get("type", "function")][
                        "input" if tc.get("type") == "custom" else "arguments"
                    ]
                ),
            )
            for tc in message.get("tool_calls") or []
        ]
        assert have == want, (have, want)
        if not want:
            assert "tool_calls" not in message, message
        assert choice_doc["finish_reason"] == ch.client_finish(bool(want)), choice_doc
    check_record(answer, doc["fak"])


def args_value(text: str) -> Any:
    """The value of argument text the client received (blank text is no arguments)."""
    return json.loads(text) if text.strip() else {}


def digest(text: str) -> str:
    """The arguments' digest: SHA-256 of their canonical JSON (sorted keys, no spaces,
    UTF-8), of the text itself when it is not JSON, of ``{}`` when it is blank."""
    text = text if text.strip() else "{}"
    try:
        value = json.loads(text)
    except ValueError:
        return "sha256:" + hashlib.sha256(text.encode()).hexdigest()
    canon = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(canon.encode()).hexdigest()


def check_record(answer: list[Choice], fak: dict[str, Any]) -> None:
    """The record, the turn's own (its trace, no inbound results): every proposal of every
    choice, in the upstream's choice order, with its verdict's kind and, for a TRANSFORM,
    the repaired arguments the client received."""
    assert fak["trace_id"].startswith("forms-") and fak["result_admissions"] == [], fak
    props = [
        (pid, c, ch.index) for ch in answer for pid, c in zip(ids(ch), proposals(ch), strict=True)
    ]
    if fak.get("stream"):
        props.sort(key=lambda w: w[2])
    want = [(pid, c.name, kept(c), idx) for pid, c, idx in props]
    have = [
        (a["tool_call_id"], a["tool"], a["admitted"], a["choice"]) for a in fak["adjudications"]
    ]
    assert have == want, (have, want)
    kinds = {"allow": "ALLOW", "blank": "ALLOW", "transform": "TRANSFORM", "deny": "DENY"}
    kinds["malformed"] = "DENY"
    for (_, c, _), a in zip(props, fak["adjudications"], strict=True):
        assert a["args_digest"] == digest(c.text()), (a, c)
        held = {"hold_bare": "QUARANTINE", "hold_thing": "QUARANTINE"}
        assert a["verdict"]["kind"] == held.get(c.name, kinds.get(c.cat, "REQUIRE_WITNESS")), a
        if c.cat == "transform":
            assert json.loads(a["repaired_arguments"]) == c.kept_args(), a
        else:
            assert "repaired_arguments" not in a, a


# ----------------------------------------------------------------------------- streamed
@dataclass(frozen=True)
class Cuts:
    """Where a stream splits: cut points (fractions) of every id, name and argument text,
    whether the next call's first fragment shares a chunk, and where usages go."""

    cut: float
    share: bool
    usage: str  # "none", "own", "content", "finish", "all"
    #: choice 0 sent without its ``index`` (the wire's default), and a usage sent alone
    #: without a ``choices`` key
    bare: bool = False
    #: logprobs on every text chunk and on the finish chunk
    logprobs: bool = False


def _split(text: str, cut: float) -> list[str]:
    k = round(len(text) * cut)
    return [text[:k], text[k:]]


def _chunk(choices: list[dict[str, Any]], **extra: Any) -> bytes:
    doc = {
        "id": "chatcmpl-s",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "m",
        "choices": choices,
        **extra,
    }
    return b"data: " + json.dumps(doc).encode() + b"\n\n"


def _logprobs(token: str) -> dict[str, Any]:
    return {"content": [{"token": token, "logprob": -1.0, "bytes": None, "top_logprobs": []}]}


def _stream(answer: list[Choice], cuts: Cuts) -> tuple[bytes, list[int]]:
    """The upstream's stream, and the usages it sent, in order."""
    frames: list[bytes] = []
    usages: list[int] = []

    def _delta(idx: int, delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        out = {"index": idx, "delta": delta, "finish_reason": finish}
        if cuts.bare and idx == 0:
            del out["index"]
        if cuts.logprobs and (finish or delta.get("content")):
            out["logprobs"] = _logprobs(f"{idx}:{finish or delta['content']}")
        return out

    def usage(where: str) -> dict[str, Any]:
        if cuts.usage not in (where, "all"):
            return {}
        usages.append(len(usages) + 1)
        return {"usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": usages[-1]}}

    for ch in answer:
        frames.append(_chunk([_delta(ch.index, {"role": "assistant", "content": ""})]))
        for piece in _split(ch.text or "", cuts.cut):
            if piece:
                frames.append(_chunk([_delta(ch.index, {"content": piece})], **usage("content")))
        if ch.legacy is not None:
            lg = ch.legacy
            n1, n2 = _split(lg.name, cuts.cut)
            a1, a2 = _split(lg.text(), cuts.cut)
            frames.append(_chunk([_delta(ch.index, {"function_call": {"name": n1}})]))
            frames.append(
                _chunk([_delta(ch.index, {"function_call": {"name": n2, "arguments": a1}})])
            )
            frames.append(_chunk([_delta(ch.index, {"function_call": {"arguments": a2}})]))
        pending: list[dict[str, Any]] = []
        for i, c in enumerate(ch.calls):
            n1, n2 = _split(c.name, cuts.cut)
            a1, a2 = _split(c.text(), cuts.cut)
            first: dict[str, Any] = {"index": i, "function": {"name": n1}}
            if c.id is not None:
                first["id"] = c.id  # an id is sent whole, once
            if c.kind:
                first["type"] = "function"
            rest = [
                {"index": i, "function": {"name": n2, "arguments": a1}},
                {"index": i, "function": {"arguments": a2}},
            ]
            if cuts.share and pending:
                frames.append(_chunk([_delta(ch.index, {"tool_calls": [*pending, first]})]))
            else:
                if pending:
                    frames.append(_chunk([_delta(ch.index, {"tool_calls": pending})]))
                frames.append(_chunk([_delta(ch.index, {"tool_calls": [first]})]))
            frames.append(_chunk([_delta(ch.index, {"tool_calls": [rest[0]]})]))
            pending = [rest[1]]
        if pending:
            frames.append(_chunk([_delta(ch.index, {"tool_calls": pending})]))
        frames.append(_chunk([_delta(ch.index, {}, ch.upstream_finish())], **usage("finish")))
    own = usage("own")
    if own and cuts.bare:
        frames.append(b"data: " + json.dumps({"id": "chatcmpl-s", **own}).encode() + b"\n\n")
    elif own:
        frames.append(_chunk([], **own))
    frames.append(b"data: [DONE]\n\n")
    return b"".join(frames), usages


def check_streamed(answer: list[Choice], cuts: Cuts, text: str, usages: list[int]) -> None:
    lines = [ln[6:] for ln in text.splitlines() if ln.startswith("data: ")]
    assert lines[-1] == "[DONE]", lines[-3:]
    chunks = [json.loads(ln) for ln in lines[:-1]]
    for c in chunks:
        ChatCompletionChunk.model_validate(c)
    content: dict[int, str] = {}
    tool_calls: dict[int, list[dict[str, Any]]] = {}
    legacy: dict[int, dict[str, str]] = {}
    finishes: dict[int, list[str]] = {}
    logprobs: dict[int, list[str]] = {}
    got_usages = []
    records = []
    for c in chunks:
        if c.get("usage") is not None:
            assert c["choices"] == [], c  # a usage travels alone
            got_usages.append(c["usage"]["total_tokens"])
        if "fak" in c:
            records.append(c["fak"])
            assert c["choices"] == [] and "usage" not in c, c
        for ch in c["choices"]:
            delta = ch["delta"]
            content[ch["index"]] = content.get(ch["index"], "") + (delta.get("content") or "")
            for tc in delta.get("tool_calls") or []:
                calls_of = tool_calls.setdefault(ch["index"], [])
                assert tc["index"] == len(calls_of), tc  # numbered from 0, each whole
                calls_of.append(tc)
            if delta.get("function_call") is not None:
                assert ch["index"] not in legacy
                legacy[ch["index"]] = delta["function_call"]
            if ch["finish_reason"] is not None:
                finishes.setdefault(ch["index"], []).append(ch["finish_reason"])
            if ch.get("logprobs") is not None:
                tokens = [t["token"] for t in ch["logprobs"]["content"]]
                logprobs.setdefault(ch["index"], []).extend(tokens)
    assert got_usages == usages, (got_usages, usages)
    assert len(records) == 1, records
    for ch in answer:
        survivors = [(pid, c) for pid, c in zip(ids(ch), proposals(ch), strict=True) if kept(c)]
        refused = bool(proposals(ch)) and not survivors
        said = content.get(ch.index, "")
        if refused:
            check_note(ch, said)
        else:
            assert said == (ch.text or ""), said
        if ch.legacy is not None:
            assert ch.index not in tool_calls
            if survivors:
                fc = legacy[ch.index]
                assert fc["name"] == ch.legacy.name, fc
                assert args_value(fc["arguments"]) == ch.legacy.kept_args()
            else:
                assert ch.index not in legacy
        else:
            assert ch.index not in legacy
            have = [
                (
                    tc["id"],
                    tc["type"],
                    tc["function"]["name"],
                    args_value(tc["function"]["arguments"]),
                )
                for tc in tool_calls.get(ch.index, [])
            ]
            want = [(pid, "function", c.name, c.kept_args()) for pid, c in survivors]
            assert have == want, (have, want)
        assert finishes.get(ch.index) == [ch.client_finish(bool(survivors))], (ch.index, finishes)
        # each choice's logprobs, as the upstream wrote them: its text's, then its finish's
        sent = [p for p in _split(ch.text or "", cuts.cut) if p]
        marks = [f"{ch.index}:{p}" for p in [*sent, ch.upstream_finish()]] if cuts.logprobs else []
        assert logprobs.get(ch.index, []) == marks, (logprobs, marks)
    check_record(answer, {**records[0], "stream": True})


# ----------------------------------------------------------------------------- the turn
async def _turn(stream: bool) -> httpx.Response:
    doc = {"model": "m", "messages": [{"role": "user", "content": "go"}], "stream": stream}
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=_APP), base_url="http://gw"
    ) as c:
        return await c.post(
            "/v1/chat/completions", json=doc, headers={"x-trace-id": fresh_trace("forms")}
        )


def check_buffered_turn(answer: list[Choice]) -> None:
    _RAW.update(body=json.dumps(_document(answer)).encode(), media="application/json")
    r = asyncio.run(_turn(False))
    assert r.status_code == 200, r.text[:500]
    check_buffered(answer, r.json())


def check_streamed_turn(answer: list[Choice], cuts: Cuts) -> None:
    body, usages = _stream(answer, cuts)
    _RAW.update(body=body, media="text/event-stream")
    r = asyncio.run(_turn(True))
    assert r.status_code == 200, r.text[:500]
    # served as an event stream, uncached
    assert r.headers["content-type"].startswith("text/event-stream"), r.headers
    assert r.headers["cache-control"] == "no-cache", r.headers
    check_streamed(answer, cuts, r.text, usages)


def _budget(prop: Any) -> None:
    active = settings.default
    at_most = min(40, active.max_examples) if active is not None else 40
    settings(max_examples=at_most, deadline=None, suppress_health_check=[HealthCheck.too_slow])(
        prop
    )()


EVERY = [
    Call("allow", "get_user", {"a": 1}, "function", "call_x"),
    Call("transform", "get_user", {"password": "p", "b": "c"}, "", ""),
    Call("deny", "deny_thing", {}, "function", None),
    Call("allow", "fetch_url", {"é": "✓", "a": [1, {"c": 2, "b": 3}]}, "", 7),
    Call("blank", "get_user", " ", "function", "call_z"),
    Call("malformed", "send_email", "{bad", "function", "call_y"),
]
CUSTOM = [
    Call("transform", "get_user", {"password": "p"}, "custom", "call_c"),
    Call("deny", "frobnicate", {}, "custom", None),
    Call("allow", "send_email", {"to": "a"}, "custom", ""),
]
REFUSED = [Call("deny", "frobnicate", {"x": 1}, "", "call_r")]
HOLDS = [
    Call("hold", "hold_bare", {}, "function", "call_h"),
    Call("hold", "hold_thing", {}, "", None),
    Call("hold", "wire_money", {"a": 1}, "function", ""),
]
LEGACY_KEPT = Call("transform", "get_user", {"password": "p", "q": 1}, "function", None)
LEGACY_REFUSED = Call("deny", "deny_thing", {}, "function", None)


@pytest.mark.fak_theorem("D10.2", "D10.5")
def test_every_buffered_proposal_form_keeps_exactly_the_admitted_calls() -> None:
    prop = given(answer=answers(custom=True))(check_buffered_turn)
    for answer in (
        [Choice(0, "some text", EVERY + CUSTOM, None)],
        [Choice(1, None, REFUSED, None), Choice(0, "", [], LEGACY_KEPT)],
        [Choice(0, "some text", HOLDS, None, "length")],
        [Choice(0, "t", EVERY, None, "stop"), Choice(1, "", [], LEGACY_KEPT, "stop")],
        [Choice(0, "some text", [], LEGACY_REFUSED), Choice(1, None, [], None)],
    ):
        prop = example(answer=answer)(prop)
    _budget(prop)


@pytest.mark.fak_theorem("D10.2", "D10.5")
def test_every_streamed_proposal_form_keeps_exactly_the_admitted_calls() -> None:
    prop = given(
        answer=answers(custom=False),
        cuts=st.builds(
            Cuts,
            st.sampled_from([0.0, 0.5, 1.0]),
            st.booleans(),
            st.sampled_from(["none", "own", "content", "finish", "all"]),
            st.booleans(),
            st.booleans(),
        ),
    )(check_streamed_turn)
    for answer, cuts in (
        ([Choice(0, "some text", EVERY, None)], Cuts(0.5, True, "all", True, True)),
        (
            [Choice(1, "", REFUSED, None), Choice(0, "x", [], LEGACY_KEPT)],
            Cuts(0.0, False, "own", True, False),
        ),
        ([Choice(0, "some text", [], LEGACY_REFUSED)], Cuts(1.0, True, "content", False, True)),
        (
            [Choice(0, None, EVERY, None), Choice(1, "t", [], LEGACY_KEPT)],
            Cuts(0.5, False, "finish", False, True),
        ),
        ([Choice(0, None, HOLDS, None, "length")], Cuts(0.5, False, "all", True, False)),
        (
            [Choice(0, "t", EVERY, None, "stop"), Choice(1, "", [], LEGACY_KEPT, "length")],
            Cuts(0.5, True, "none", False, False),
        ),
    ):
        prop = example(answer=answer, cuts=cuts)(prop)
    _budget(prop)
