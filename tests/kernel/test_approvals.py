"""Approvals (C4.8): a signed token approves one call, once, until it expires; nothing
else passes for it. The oracle is the token's definition: which of trace, tool and
arguments (in canonical JSON) changed, whether the key is the same, whether the token was
already spent or is past its expiry."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fak_core import Kernel, Policy, Reason, Taint, ToolCall, ToolDecl, VerdictKind
from fak_core.adjudicators import WitnessOutcome
from fak_core.approvals import ApprovalResolver, mint_approval

KEY = b"k" * 32
OTHER = b"o" * 32
names = st.text(st.characters(min_codepoint=97, max_codepoint=122), min_size=1, max_size=6)
values = st.one_of(st.integers(-5, 5), names, st.booleans(), st.none())
args_st = st.dictionaries(names, values, max_size=4)


def _call(trace: str, tool: str, args: dict[str, object], token: str) -> ToolCall:
    return ToolCall.make(tool, json.dumps(args), trace, meta={"witness": token})


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


@pytest.mark.fak_theorem("C4.8")
@given(
    names,
    names,
    args_st,
    st.sampled_from(["same", "reordered", "trace", "tool", "args", "key", "expired", "flip"]),
    st.integers(0, 10**6),
)
def test_a_token_approves_its_own_call_once_and_nothing_else(
    trace: str, tool: str, args: dict[str, object], change: str, where: int
) -> None:
    clock = Clock()
    resolver = ApprovalResolver(KEY, clock=clock)
    token = mint_approval(OTHER if change == "key" else KEY, trace, tool, args, 60, clock.now)
    call_trace, call_tool, call_args = trace, tool, dict(args)
    if change == "reordered":
        call_args = dict(reversed(list(args.items())))
    elif change == "trace":
        call_trace = trace + "x"
    elif change == "tool":
        call_tool = tool + "x"
    elif change == "args":
        call_args = {**args, "zz_extra": 1}
    elif change == "expired":
        clock.now += 61
    elif change == "flip":
        i = where % len(token)
        alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_."
        flipped = alphabet[(alphabet.index(token[i]) + 1) % len(alphabet)]
        token = token[:i] + flipped + token[i + 1 :]
    call = _call(call_trace, call_tool, call_args, token)
    first = resolver.resolve(call, "claim")
    if change in ("same", "reordered"):
        assert first == WitnessOutcome.CONFIRMED
        # single use: the same token on the same call is refused the second time
        assert resolver.resolve(call, "claim") == WitnessOutcome.REFUTED
    else:
        assert first == WitnessOutcome.REFUTED, change
    assert resolver.resolve(_call(trace, tool, args, ""), "claim") == WitnessOutcome.ABSTAIN


B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
#: the base64url alphabet, the standard one's '+' and '/', padding, separators, a stray
RESPELL = B64 + "+/=.!% "


def respellings(token: str, where: int) -> list[str]:
    """Every token that differs from ``token`` in one character at ``where``: changed to
    any other character of :data:`RESPELL`, one inserted before it, or it removed."""
    out = [token[:where] + c + token[where + 1 :] for c in RESPELL if c != token[where]]
    out += [token[:where] + c + token[where:] for c in RESPELL]
    out.append(token[:where] + token[where + 1 :])
    return [t for t in out if t != token]


@pytest.mark.fak_theorem("C4.8")
@given(names, names, args_st, st.integers(0, 10**6), st.integers(0, 10**6))
def test_a_token_respelled_in_one_character_is_refused(
    trace: str, tool: str, args: dict[str, object], where: int, which: int
) -> None:
    # the oracle is the definition: only the minted text approves
    token = mint_approval(KEY, trace, tool, args, 60, 1_000_000.0)
    others = respellings(token, where % len(token))
    resolver = ApprovalResolver(KEY, clock=Clock())
    call = _call(trace, tool, args, "")
    assert resolver.verify(call, others[which % len(others)]) is not None
    assert resolver.verify(call, token) is None


@pytest.mark.fak_theorem("C4.8")
def test_every_one_character_respelling_of_a_token_is_refused() -> None:
    # every position, every respelling: in the MAC a lenient base64 decoder reads several
    # texts as one MAC ('-' and '+', the last character's two spare bits, stray characters)
    for args in ({}, {"to": "x@y.example", "amount": 5}):
        token = mint_approval(KEY, "s", "pay", args, 60, 1_000_000.0)
        resolver = ApprovalResolver(KEY, clock=Clock())
        call = _call("s", "pay", args, "")
        for where in range(len(token)):
            for other in respellings(token, where):
                assert resolver.verify(call, other) is not None, other
        assert resolver.verify(call, token) is None


def _kernel() -> Kernel:
    decl = ToolDecl("SPEND", ("/to",), approve=True)
    k = Kernel(
        Policy(version="fak-policy/v2", allow=("pay",), tools={"pay": decl}, gated_sinks=("SPEND",))
    )
    assert k.enable_approvals(KEY)
    k.register_tool("pay", lambda args: "paid")
    k.ledger.raise_to("s", Taint.TAINTED)
    return k


@pytest.mark.fak_theorem("C4.8", "C4.3")
def test_an_ungrounded_destination_waits_for_a_human_and_runs_once_approved() -> None:
    k = _kernel()
    args = {"to": "US133000000121212121212", "amount": 5}
    raw = k.decide(ToolCall("pay", json.dumps(args), "s"))
    assert (raw.kind, raw.reason, raw.by) == (
        VerdictKind.REQUIRE_WITNESS,
        Reason.TRUST_VIOLATION,
        "ifc-sink",
    )
    assert raw.claim == (
        "SPEND sink fed tainted data: /to = 'US133000000121212121212' is not grounded; it "
        "appears in no content this session admitted; a human may approve this exact call: "
        "fak approve --trace ... --tool pay"
    )
    assert dict(raw.meta) == {
        "ifc_sink": "SPEND",
        "ifc_flow": "tainted",
        "ifc_ungrounded": "/to",
        "approval": "required",
    }
    result, v = k.syscall(ToolCall("pay", json.dumps(args), "s"))
    assert v.kind == VerdictKind.DENY and result.payload == ""
    token = mint_approval(KEY, "s", "pay", args)
    result, v = k.syscall(_call("s", "pay", args, token))
    assert v.kind == VerdictKind.ALLOW and result.payload == "paid"
    result, v = k.syscall(_call("s", "pay", args, token))
    assert v.kind == VerdictKind.DENY  # replayed
    # a token for 5 does not pay 500
    token = mint_approval(KEY, "s", "pay", args)
    _, v = k.syscall(_call("s", "pay", {**args, "amount": 500}, token))
    assert v.kind == VerdictKind.DENY


@pytest.mark.fak_theorem("C4.8")
def test_fak_approve_mints_a_token_the_kernel_accepts() -> None:
    args = '{"to": "x@y.example"}'
    k = _kernel()  # the gateway runs before the approval is minted (its start epoch)
    env = {"FAK_APPROVAL_KEY": KEY.decode(), "PATH": ""}
    cmd = [sys.executable, "-m", "fak_core.cli", "approve", "--trace", "s", "--tool", "pay"]
    out = subprocess.run(
        [*cmd, "--args", args], capture_output=True, text=True, env=env, check=True
    )
    token = out.stdout.strip()
    assert k.syscall(_call("s", "pay", json.loads(args), token))[1].kind == VerdictKind.ALLOW
    missing = subprocess.run(cmd, capture_output=True, text=True, env={"PATH": ""})
    assert missing.returncode == 2 and "FAK_APPROVAL_KEY" in missing.stderr


def _signed(payload: object, key: bytes = KEY) -> str:
    """A token over any payload, signed as the minter signs (to reach every check)."""
    import base64
    import hashlib
    import hmac

    body = base64.urlsafe_b64encode(json.dumps(payload).encode()).rstrip(b"=").decode()
    signed = "fak1." + body
    mac = hmac.new(key, signed.encode(), hashlib.sha256).digest()
    return signed + "." + base64.urlsafe_b64encode(mac).rstrip(b"=").decode()


@pytest.mark.fak_theorem("C4.8")
def test_every_refusal_says_why() -> None:
    from fak_core.approvals import MAX_TOKEN_CHARS, canonical_args_digest

    clock = Clock()
    r = ApprovalResolver(KEY, clock=clock)
    call = _call("s", "pay", {"a": 1}, "")
    good = {
        "t": "s",
        "tool": "pay",
        "d": canonical_args_digest({"a": 1}),
        "iat": 1_000_000,
        "exp": 1_000_060,
    }
    assert r.verify(call, "nope") == "not an approval token"
    assert r.verify(call, "fak1" + "x" * 10) == "not an approval token"
    # a payload is read only under a matching MAC (see test_approval_forgery.py)
    assert r.verify(call, "fak1.%%%.%%%") == "the approval token's signature does not match"
    assert r.verify(call, _signed([1, 2])) == "a malformed approval token"
    assert r.verify(call, _signed({**good, "n": 7})) == "a malformed approval token"
    assert r.verify(call, _signed({**good, "n": "a"}, OTHER)) == (
        "the approval token's signature does not match"
    )
    # a MAC of other characters (a lone surrogate: JSON's "\ud800" reaches here) is
    # refused as a value, never raised
    body = _signed({**good, "n": "a"}).rpartition(".")[0]
    for mac in ("\ud800", "\u00e9" * 43, ""):
        assert r.verify(call, f"{body}.{mac}") == "the approval token's signature does not match"
    assert r.verify(call, _signed({**good, "t": "x", "n": "a"})) == (
        "the approval is for another session or tool"
    )
    assert r.verify(call, _signed({**good, "d": "0", "n": "a"})) == (
        "the approval is for other arguments"
    )
    assert r.verify(call, _signed({**good, "exp": 1_000_000, "n": "a"})) == (
        "the approval has expired"  # expiry is exclusive: at exp it is already expired
    )
    # the resolver's store started at the clock's 1_000_000: a token minted before it (or
    # with no minting time) may have been spent before a restart
    no_iat = {k: v for k, v in good.items() if k != "iat"}
    for bad in ({**no_iat, "n": "a"}, {**good, "iat": "1000000", "n": "a"}):
        assert r.verify(call, _signed(bad)) == (
            "the approval token has no minting time (an older fak approve); mint a new one"
        )
    assert r.verify(call, _signed({**good, "iat": 999_999.5, "n": "a"})) == (
        "the approval was minted before this gateway started at 1970-01-12T13:46:40Z "
        "(spent approvals are not kept across a restart); mint a new one"
    )
    assert r.verify(call, _signed({**good, "n": "a"})) is None
    assert r.verify(call, _signed({**good, "n": "a"})) == "the approval was already used"
    long = _signed({**good, "n": "b", "pad": "x" * MAX_TOKEN_CHARS})
    assert r.verify(call, long) == "not an approval token"
    # a token of exactly the limit is read
    for pad in range(1000, 1700):
        token = _signed({**good, "n": f"c{pad}", "pad": "x" * pad})
        if len(token) == MAX_TOKEN_CHARS:
            assert r.verify(call, token) is None
            break
    else:
        raise AssertionError("no token of exactly the limit")


@pytest.mark.fak_theorem("C4.8")
def test_spent_nonces_are_bounded_and_fail_closed() -> None:
    from fak_core.approvals import canonical_args_digest

    clock = Clock()
    r = ApprovalResolver(KEY, max_used=2, clock=clock)
    call = _call("s", "pay", {}, "")
    good = {"t": "s", "tool": "pay", "d": canonical_args_digest({}), "iat": 1_000_000}
    assert r.verify(call, _signed({**good, "exp": 1_000_010, "n": "1"})) is None
    assert r.verify(call, _signed({**good, "exp": 1_000_100, "n": "2"})) is None
    third = _signed({**good, "exp": 1_000_100, "n": "3"})
    assert r.verify(call, third) == "too many live approvals; try again later"
    clock.now = 1_000_010  # the first token expires: its nonce may go
    assert r.verify(call, third) is None
    # the live nonce "2" is still remembered after the purge
    assert r.verify(call, _signed({**good, "exp": 1_000_100, "n": "2"})) == (
        "the approval was already used"
    )
    clock.now = 1_000_100
    assert r.verify(call, _signed({**good, "exp": 1_000_200, "n": "4"})) is None


@pytest.mark.fak_theorem("C4.8")
def test_lifetimes_are_bounded_and_nonces_carry_128_bits() -> None:
    import base64

    for ttl in (0, -0.5, 86400.5):
        with pytest.raises(ValueError, match="between 0 and 86400"):
            mint_approval(KEY, "s", "t", {}, ttl)
    for ttl in (0.5, 86400):
        token = mint_approval(KEY, "s", "t", {}, ttl, now=0)
        body = token.split(".")[1]
        payload = json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
        assert payload["exp"] == int(ttl)
        assert len(payload["n"]) == 32 and int(payload["n"], 16) >= 0
