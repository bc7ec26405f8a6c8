"""D11.2: ``tools/list`` shows exactly the tools the policy could allow by name.

Property over generated policies (deny, allow and allow_prefix entries drawn from the
exposed names, the tools' own names and prefixes of both, and either posture) and proxies
that aggregate two servers (``<server>__<tool>``) or pass one server's names through. The
oracle is the theorem's rule, written here: a tool is listed unless a deny entry names it
(its exposed name, or, behind the separator, its own name: a deny without ``__`` denies
that tool on every server), and then exactly when an allow entry names its exposed name,
an allow_prefix entry starts it by the rule of D11.2 (without ``__`` against the tool's own
name, with it against the whole name), or the posture is ``admit_and_log``. The proxies
are constructed, not entered: no downstream process runs.
"""

from __future__ import annotations

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from fak_core import Kernel, Policy
from fak_core.gateway.mcp_downstream import DownstreamSpec
from fak_core.gateway.mcp_proxy import McpProxy

from .test_untrusted_downstream import prefix_oracle

SERVERS = ("alpha", "beta")
TOOLS = ("read_file", "read", "send_email", "calc", "alpha")
EXPOSED = tuple(f"{s}__{t}" for s in SERVERS for t in TOOLS)
PREFIXES = ("re", "read_", "se", "alpha__re", "beta__se", "alpha__", "al", "a", "beta__calc")
NAMES = st.sampled_from((*EXPOSED, *TOOLS))


def listed(policy: Policy, server: str, tool: str, prefixed: bool) -> bool:
    name = f"{server}__{tool}" if prefixed else tool
    if name in policy.deny or (prefixed and tool in policy.deny):
        return False
    if name in policy.allow:
        return True
    for entry in policy.allow_prefix:
        if prefix_oracle(server, tool, entry) if prefixed else name.startswith(entry):
            return True
    return policy.posture == "admit_and_log"


policies = st.builds(
    lambda deny, allow, prefix, posture: Policy(
        deny={n: "POLICY_BLOCK" for n in deny},
        allow=tuple(allow),
        allow_prefix=tuple(prefix),
        posture=posture,
    ),
    st.lists(NAMES, max_size=3, unique=True),
    st.lists(NAMES, max_size=3, unique=True),
    st.lists(st.sampled_from(PREFIXES), max_size=2, unique=True),
    st.sampled_from(["fail_closed", "admit_and_log"]),
)


def _check(policy: Policy) -> None:
    specs = [DownstreamSpec(s, command="unused") for s in SERVERS]
    aggregated = McpProxy(Kernel(policy), specs)
    single = McpProxy(Kernel(policy), specs[:1], prefix=False)
    for server in SERVERS:
        for tool in TOOLS:
            name = f"{server}__{tool}"
            assert aggregated.visible(name) is listed(policy, server, tool, True), name
    for tool in (*TOOLS, *EXPOSED):
        assert single.visible(tool) is listed(policy, "alpha", tool, False), tool


@pytest.mark.fak_theorem("D11.2")
@given(policies)
@example(Policy(deny={"read": "POLICY_BLOCK"}, allow=("alpha__read", "beta__calc")))
@example(Policy(deny={"alpha__calc": "POLICY_BLOCK"}, allow_prefix=("a", "beta__se")))
@example(Policy(posture="admit_and_log", deny={"send_email": "POLICY_BLOCK"}))
@example(Policy(allow=("calc",), allow_prefix=("se",)))
def test_tools_list_shows_exactly_what_the_policy_could_allow_by_name(policy: Policy) -> None:
    _check(policy)
