"""Approval edges (C4.8): the arguments a token binds in every form a call carries them
(a table, JSON text, bytes, raw text that is not JSON, a lone surrogate), a call with no
token at all, and the approval key read from the environment at its length bound."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fak_core import ToolCall
from fak_core.adjudicators import WitnessOutcome
from fak_core.approvals import ApprovalResolver, approval_key_from_env, mint_approval

KEY = b"e" * 32
NOW = 1_000_000.0

# Raw argument texts that are not JSON: approved only byte for byte.
RAW = ["not json", "{", "to: x@y.example", "{'a': 1}", "\ud800", '{"a": "\udfff"}', "1 2"]


def _resolve(resolver: ApprovalResolver, args: str, token: str) -> WitnessOutcome:
    return resolver.resolve(ToolCall.make("pay", args, "s", meta={"witness": token}), "claim")


@pytest.mark.fak_theorem("C4.8")
@given(
    st.dictionaries(st.sampled_from("abcd"), st.integers(-3, 3) | st.text(max_size=3), max_size=3),
    st.sampled_from(["table", "text", "bytes", "spaced"]),
)
def test_a_token_binds_the_arguments_in_every_form_they_are_given(
    args: dict[str, object], form: str
) -> None:
    given_args: object = {
        "table": args,
        "text": json.dumps(args),
        "bytes": json.dumps(args).encode(),
        "spaced": json.dumps(args, indent=2),
    }[form]
    token = mint_approval(KEY, "s", "pay", given_args, 60, NOW)
    resolver = ApprovalResolver(KEY, clock=lambda: NOW)
    # a different argument table under the same token is refused, before and after
    assert _resolve(resolver, json.dumps({**args, "z": 0}), token) == WitnessOutcome.REFUTED
    assert _resolve(resolver, json.dumps(args, sort_keys=True), token) == WitnessOutcome.CONFIRMED
    assert _resolve(resolver, json.dumps(args), token) == WitnessOutcome.REFUTED


@pytest.mark.fak_theorem("C4.8")
@pytest.mark.parametrize("raw", RAW)
def test_arguments_that_are_not_json_are_approved_exactly(raw: str) -> None:
    resolver = ApprovalResolver(KEY, clock=lambda: NOW)
    token = mint_approval(KEY, "s", "pay", raw, 60, NOW)
    for other in (raw + " x", "{}", raw.upper() + "!"):
        assert _resolve(resolver, other, token) == WitnessOutcome.REFUTED, other
    assert _resolve(resolver, raw, token) == WitnessOutcome.CONFIRMED
    assert _resolve(resolver, raw, token) == WitnessOutcome.REFUTED


@pytest.mark.fak_theorem("C4.8")
def test_a_call_with_no_token_is_unwitnessed() -> None:
    resolver = ApprovalResolver(KEY, clock=lambda: NOW)
    for meta in ({}, {"other": "fak1.x.y"}, {"witness": ""}):
        call = ToolCall.make("pay", "{}", "s", meta=meta)
        assert resolver.resolve(call, "claim") == WitnessOutcome.ABSTAIN, meta
    assert resolver.resolve(ToolCall("pay", "{}", "s"), "claim") == WitnessOutcome.ABSTAIN


@pytest.mark.fak_theorem("C4.8")
def test_the_key_is_read_from_the_environment_at_its_length_bound(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # 32 bytes is the least key HMAC-SHA256 is given: 32 of UTF-8 pass, 31 stop the start
    for text in ("k" * 32, "\u00e9" * 16, "k" * 64):
        assert approval_key_from_env({"FAK_APPROVAL_KEY": text}) == text.encode("utf-8")
    for text in ("k" * 31, "\u00e9" * 15 + "k", ""):
        with pytest.raises(ValueError, match="at least 32 bytes"):
            approval_key_from_env({"FAK_APPROVAL_KEY": text})
    assert approval_key_from_env({}) is None
    monkeypatch.setenv("FAK_APPROVAL_KEY", "\u00e9" * 16)
    assert approval_key_from_env() == ("\u00e9" * 16).encode("utf-8")
    assert approval_key_from_env({"PATH": "x"}) is None  # the given table, not the process's
    monkeypatch.delenv("FAK_APPROVAL_KEY")
    assert approval_key_from_env() is None
    assert approval_key_from_env({"FAK_APPROVAL_KEY": "k" * 32}) == b"k" * 32
