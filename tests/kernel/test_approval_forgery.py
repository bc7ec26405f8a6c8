"""C4.8: a token whose MAC does not match is refused as such, its payload never read.

A party without the key can write any payload: not base64, base64 of text that is not
JSON, JSON that is not a table, JSON nested past any parser's depth, the longest text a
token may hold, bytes that are not UTF-8, characters outside ASCII. Each forged token is
built here with the standard library (``base64``, ``hmac``, ``hashlib``), its MAC made
under another key or drawn at random; the oracle is that the resolver refuses it
(REFUTED), that ``verify`` names the signature, and that the resolver's base64 decoder is
never called on it (a spy on the module's decoding helper). The same payloads signed with
the right key are read, and refused as malformed: so the spy and the refusal can tell
the two orders apart.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fak_core import ToolCall
from fak_core import approvals as approvals_module
from fak_core.adjudicators import WitnessOutcome
from fak_core.approvals import ApprovalResolver

KEY = b"k" * 32
OTHER = b"o" * 32
NOW = 1_000_000.0
BAD_SIGNATURE = "the approval token's signature does not match"
MALFORMED = "a malformed approval token"
CALL = ToolCall("pay", '{"to": "a@b.example"}', "s")


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _token(segment: str, key: bytes | None, mac: bytes = b"") -> str:
    """``fak1.<segment>.<mac>``: the MAC under ``key`` (HMAC-SHA256 over the signed
    part, RFC 2104), or ``mac`` as given when ``key`` is None."""
    signed = "fak1." + segment
    if key is not None:
        mac = hmac.new(key, signed.encode(), hashlib.sha256).digest()
    return signed + "." + _b64(mac)


#: payload segments no minted token holds (each stays under the 2048-character bound)
SEGMENTS = {
    "not-base64": "!!!*",
    "one-char": "A",
    "not-json": _b64(b"{"),
    "not-utf8": _b64(b'{"t": "\xff\xfe"}'),
    "array": _b64(b"[1, 2]"),
    "deeper-than-orjson": _b64(b"[" * 1100),
    "long": _b64(b'"' + b"x" * 1400 + b'"'),
    "empty": "",
}


def _refused_unread(token: str) -> str | None:
    """``verify``'s answer, asserting the decoder was never called on the way."""
    resolver = ApprovalResolver(KEY, clock=lambda: NOW)
    with mock.patch.object(approvals_module, "_unb64", wraps=approvals_module._unb64) as decode:
        answer = resolver.verify(CALL, token)
    assert decode.call_count == 0, f"the payload of a forged token was decoded: {token[:60]}"
    return answer


@pytest.mark.fak_theorem("C4.8")
@pytest.mark.parametrize("name", sorted(SEGMENTS))
def test_a_forged_token_is_refused_as_a_bad_signature_unread(name: str) -> None:
    segment = SEGMENTS[name]
    forged = _token(segment, OTHER)
    assert len(forged) <= 2048
    assert _refused_unread(forged) == BAD_SIGNATURE
    resolver = ApprovalResolver(KEY, clock=lambda: NOW)
    witnessed = ToolCall(CALL.tool, CALL.args, CALL.trace_id, meta={"witness": forged})
    assert resolver.resolve(witnessed, "claim") == WitnessOutcome.REFUTED


@pytest.mark.fak_theorem("C4.8")
@pytest.mark.parametrize("name", sorted(SEGMENTS))
def test_the_same_payload_signed_with_the_key_is_read_and_refused_as_malformed(
    name: str,
) -> None:
    """With the right MAC the payload is read: none of these is a table of the token's
    members, so each is refused as malformed (and the decoder was asked)."""
    resolver = ApprovalResolver(KEY, clock=lambda: NOW)
    with mock.patch.object(approvals_module, "_unb64", wraps=approvals_module._unb64) as decode:
        answer = resolver.verify(CALL, _token(SEGMENTS[name], KEY))
    assert answer == MALFORMED
    assert decode.call_count == 1


@pytest.mark.fak_theorem("C4.8")
@settings(max_examples=60, deadline=None)
@given(
    payload=st.binary(max_size=600),
    mac=st.binary(min_size=0, max_size=40),
    stray=st.sampled_from(["", "\u00e9", "\u2028", "\ud800", "\x00"]),
    where=st.sampled_from(["payload", "mac"]),
)
def test_any_payload_with_a_drawn_mac_is_refused_unread(
    payload: bytes, mac: bytes, stray: str, where: str
) -> None:
    """Any bytes as the payload, a MAC drawn at random (it matches with probability
    2**-256), a character outside ASCII in the payload or the MAC: refused, never read."""
    segment = _b64(payload)
    token = _token(segment, None, mac)
    if stray:
        signed, _, tail = token.rpartition(".")
        token = (signed + stray + "." + tail) if where == "payload" else (token + stray)
    answer = _refused_unread(token)
    assert answer is not None
    if not stray:
        assert answer == BAD_SIGNATURE
