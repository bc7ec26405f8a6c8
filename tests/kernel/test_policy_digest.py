"""D2.1's digest: ``policy_digest`` is the SHA-256 of the policy's canonical JSON, so equal
policies (whatever order their tables were built in) have one digest.

The oracle serialises the dumped document with a canonical writer written here (keys
sorted at every level, no whitespace, non-ASCII text as itself, UTF-8), never through the
digest's own ``json.dumps`` call.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fak_core import Policy, default_policy, dump_policy, load_policy, policy_digest

from .test_policy import policies

UNICODE_NAMES = st.sampled_from(["é", "日本", "naïve_tool", "ß", "a\u00a0b", "\U0001f600"])


def _canonical(value: Any) -> str:
    """The canonical JSON of a dumped document, written by hand."""
    if isinstance(value, dict):
        items = sorted(value.items())
        return "{" + ",".join(f"{_canonical(k)}:{_canonical(v)}" for k, v in items) + "}"
    if isinstance(value, list):
        return "[" + ",".join(_canonical(v) for v in value) + "]"
    if isinstance(value, str):
        out = ['"']
        for ch in value:
            if ch in '"\\':
                out.append("\\" + ch)
            elif ord(ch) < 0x20:
                short = {"\n": "\\n", "\r": "\\r", "\t": "\\t", "\b": "\\b", "\f": "\\f"}
                out.append(short.get(ch, f"\\u{ord(ch):04x}"))
            else:
                out.append(ch)
        return "".join(out) + '"'
    if value is True:
        return "true"
    if value is False:
        return "false"
    if value is None:
        return "null"
    return repr(value)  # an int, or a float (written as Python writes it)


def _expected(policy: Policy) -> str:
    doc = json.loads(dump_policy(policy, "json"))
    return "sha256:" + hashlib.sha256(_canonical(doc).encode("utf-8")).hexdigest()


@st.composite
def unicode_policies(draw: st.DrawFn) -> Policy:
    """A generated policy with non-ASCII tool names in its lists and tables."""
    p = draw(policies)
    extra = draw(st.lists(UNICODE_NAMES, min_size=1, max_size=3, unique=True))
    deny = {**p.deny, **{n: "POLICY_BLOCK" for n in extra}}
    return dataclasses.replace(p, allow=(*p.allow, *extra), deny=deny)


@pytest.mark.fak_theorem("D2.1")
@given(policies | unicode_policies())
def test_the_digest_is_the_sha256_of_the_canonical_json(policy: Policy) -> None:
    digest = policy_digest(policy)
    assert digest == _expected(policy)
    # the same after a round trip, and for the same tables built in the other order
    assert policy_digest(load_policy(dump_policy(policy, "json"), "json")) == digest
    reordered = dataclasses.replace(
        policy,
        deny=dict(reversed(list(policy.deny.items()))),
        sources=dict(reversed(list(policy.sources.items()))),
        schemas=dict(reversed(list(policy.schemas.items()))),
    )
    assert reordered == policy and policy_digest(reordered) == digest


@pytest.mark.fak_theorem("D2.1")
def test_the_shipped_default_policy_digest_is_canonical() -> None:
    p = default_policy()
    assert policy_digest(p) == _expected(p)
    assert policy_digest(load_policy(dump_policy(p, "json"), "json")) == policy_digest(p)


@pytest.mark.fak_theorem("D2.1")
def test_a_hand_written_policy_has_its_hand_written_digest() -> None:
    policy = Policy(allow=("é",), deny={"b": "POLICY_BLOCK", "a": "SECRET_EXFIL"})
    text = (
        '{"allow":["é"],"allow_prefix":[],"arg_rules":[],"authorize":[],'
        '"deny":{"a":"SECRET_EXFIL","b":"POLICY_BLOCK"},"deny_hosts":[],'
        '"gated_sinks":["EGRESS","DESTRUCTIVE"],"posture":"fail_closed","redact_fields":[],'
        '"safe_sinks":["transfer_to_human","transfer_to_human_agents"],"schemas":{},'
        '"secret_patterns":[],"self_modify_globs":[],"sources":{},'
        '"version":"fak-policy/v1"}'
    )
    assert policy_digest(policy) == "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()
