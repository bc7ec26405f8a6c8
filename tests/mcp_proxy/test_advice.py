"""D11: a refusal says what to do instead, by its reason, else by its disposition.

A test adjudicator on the scripted downstream's ``reply`` refuses with the reason its
arguments name, so every class is reached through the real ``tools/call`` path: reasons the
proxy has advice for (DEFAULT_DENY, MALFORMED, TRUST_VIOLATION, UNKNOWN_TOOL) get that
advice, any other reason the advice of its disposition (WAIT: wait and retry; RETRYABLE:
fix the call; TERMINAL: do not retry). The words each piece of advice must carry are written
here by hand.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fak_core import Kernel, Policy, Reason, Verdict
from fak_core.view import CallView

from .conftest import session
from .test_call_path import GHOST, proxy_over

pytestmark = pytest.mark.anyio

#: (tool, arguments, the words the advice carries)
CASES: list[tuple[str, dict[str, str], tuple[str, ...]]] = [
    ("nobody_allows_this", {}, ("No policy rule allows",)),
    (GHOST, {}, ("List the tools",)),
    ("reply", {"deny": "RATE_LIMITED"}, ("Wait",)),
    ("reply", {"deny": "LEASE_HELD"}, ("Wait",)),
    ("reply", {"deny": "MISROUTE"}, ("Fix the call",)),
    ("reply", {"deny": "POLICY_BLOCK"}, ("will not be allowed",)),
    ("reply", {"deny": "OVERSIZE"}, ("will not be allowed",)),
    ("reply", {"deny": "MALFORMED"}, ("input schema",)),
    ("reply", {"deny": "TRUST_VIOLATION"}, ("untrusted data",)),
]


def _denies(view: CallView) -> Verdict:
    args = view.args() or {}
    name = args.get("deny")
    if isinstance(name, str):
        return Verdict.deny(Reason[name], "test-denier", claim=f"the test denies {name}")
    return Verdict.allow("test-denier")


@pytest.mark.fak_theorem("D11")
async def test_every_refusal_says_what_to_do_instead(tmp_path: Path) -> None:
    kernel = Kernel(Policy(allow=("reply", GHOST)))
    kernel.add_adjudicator(_denies, 50, tools=["reply"])
    async with proxy_over(tmp_path, kernel=kernel) as (proxy, _, _s), session(proxy) as client:
        for tool, args, words in CASES:
            result = await client.call_tool(tool, args)
            assert result.is_error is True, (tool, args)
            body = json.loads(result.content[0].text)
            for word in words:
                assert word in body["instead"], (tool, args, body["instead"])
