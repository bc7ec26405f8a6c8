"""D11 and D11.2 at the proxy's MCP front, through the official SDK client.

``tools/list`` over real downstream servers (subprocesses): each tool is listed under
``<server>__<tool>`` when the proxy aggregates (by its own name when it does not), and
exactly when the policy could allow that name; the oracle is the policy rule written out
here. A ``tools/call`` the proxy itself fails on is an error result saying nothing was
sent downstream, and the downstream indeed received nothing.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from fak_core import Kernel, Policy
from tests.mcp_proxy.conftest import TOOLS, Downstream, running_proxy, session

pytestmark = pytest.mark.anyio

#: the tools of the ``tools`` test server
LISTED = ("read_file", "fetch_url", "send_email", "crash", "hang")
assert set(LISTED) == set(TOOLS)


def could_allow(policy: Policy, server: str | None, tool: str) -> bool:
    """The listing rule: never what a deny names (the exposed name, or the tool's own
    name), else an exact allow of the exposed name, a prefix entry (with ``__``: of the
    exposed name; without: of the tool's own name), or the posture ``admit_and_log``."""
    exposed = f"{server}__{tool}" if server else tool
    if exposed in policy.deny or tool in policy.deny:
        return False
    if exposed in policy.allow:
        return True
    for entry in policy.allow_prefix:
        if ("__" in entry and exposed.startswith(entry)) or (
            "__" not in entry and tool.startswith(entry)
        ):
            return True
    return policy.posture == "admit_and_log"


POLICIES = [
    Policy(
        allow=("files__read_file", "web__hang"),
        allow_prefix=("web__fe", "send_"),
        deny={"web__send_email": "POLICY_BLOCK", "crash": "POLICY_BLOCK"},
    ),
    Policy(posture="admit_and_log", deny={"files__fetch_url": "POLICY_BLOCK"}),
    Policy(allow_prefix=("fi",)),
]


@pytest.mark.fak_theorem("D11.2")
async def test_tools_list_names_each_tool_by_its_server_and_shows_what_could_be_allowed(
    tmp_path: Path,
) -> None:
    files, web = Downstream(tmp_path / "files"), Downstream(tmp_path / "web")
    for d in (files, web):
        d.dir.mkdir()
    specs = [files.spec("files"), web.spec("web")]
    async with running_proxy(specs, POLICIES[0]) as (proxy, _), session(proxy) as client:
        for policy in POLICIES:
            proxy.kernel.set_policy(policy)
            listed = {t.name for t in (await client.list_tools()).tools}
            want = {
                f"{server}__{tool}"
                for server in ("files", "web")
                for tool in LISTED
                if could_allow(policy, server, tool)
            }
            assert listed == want, (policy, listed ^ want)
            assert proxy.visible("files__read_file") is could_allow(policy, "files", "read_file")


@pytest.mark.fak_theorem("D11.2")
async def test_one_server_is_listed_by_its_tools_own_names(tmp_path: Path) -> None:
    files = Downstream(tmp_path)
    policy = Policy(allow=("read_file", "files__fetch_url"), allow_prefix=("sen",))
    async with (
        running_proxy([files.spec("files")], policy, prefix=False) as (proxy, _),
        session(proxy) as client,
    ):
        listed = {t.name for t in (await client.list_tools()).tools}
        assert listed == {t for t in LISTED if could_allow(policy, None, t)}, listed
        assert listed == {"read_file", "send_email"}


def _body(result: Any) -> dict[str, Any]:
    doc: dict[str, Any] = orjson.loads(result.content[0].text)
    return doc


@pytest.mark.fak_theorem("D11")
async def test_a_call_the_proxy_fails_on_is_an_error_result_and_nothing_is_sent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    files = Downstream(tmp_path)
    why = "boom " * 100  # past the 300 characters the answer carries

    def broken(self: Kernel, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError(why)

    async with running_proxy([files.spec("files")], Policy(allow=TOOLS), prefix=False) as (
        proxy,
        _,
    ):
        log: list[str] = []
        proxy.errlog = _Log(log)  # type: ignore[assignment]
        async with session(proxy) as client:
            assert (await client.call_tool("read_file", {"path": "/nonexistent"})) is not None
            monkeypatch.setattr(Kernel, "authorize", broken)
            result = await client.call_tool(
                "send_email", {"to": "a@b.c", "subject": "s", "body": "b"}
            )
    assert result.is_error is True
    body = _body(result)
    assert body == {
        "error": "proxy internal error",
        "tool": "send_email",
        "detail": f"RuntimeError: {why}"[:300],
        "instead": "Nothing was sent downstream. Report this to the operator.",
    }, body
    assert files.calls("send_email") == [] and files.mails() == []
    assert any("internal error on tools/call 'send_email'" in line for line in log), log


class _Log:
    """A text stream that keeps what the proxy logs."""

    def __init__(self, lines: list[str]) -> None:
        self.lines = lines

    def write(self, text: str) -> int:
        self.lines.append(text)
        return len(text)

    def flush(self) -> None:
        return None
