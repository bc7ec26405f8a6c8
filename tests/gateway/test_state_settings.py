"""A gateway state with a setting it cannot keep is refused at construction.

The per-turn limit on proposed tool calls and the cap on inbound tool results must be at
least 1 (a turn may always carry one), and the decision deadline a positive finite number
of seconds, or none (no deadline); the policing of the model's text (D10.8) is ``police``
or ``off``, nothing else. Each setting is tried at its edges; the expected
outcome of each value is written out by hand, and a refusal must name the setting.
"""

from __future__ import annotations

import math
from typing import Any

import pytest

from fak_core import Kernel
from fak_core.gateway.state import GatewayState

#: (setting, value, accepted?)
CASES: list[tuple[str, Any, bool]] = [
    ("max_tool_calls", 1, True),
    ("max_tool_calls", 2, True),
    ("max_tool_calls", 0, False),
    ("max_tool_calls", -1, False),
    ("max_tool_results", 1, True),
    ("max_tool_results", 2, True),
    ("max_tool_results", 0, False),
    ("max_tool_results", -1, False),
    ("decide_timeout", None, True),
    ("decide_timeout", 1e-9, True),
    ("decide_timeout", 0.5, True),
    ("decide_timeout", 1.0, True),
    ("decide_timeout", 30.0, True),
    ("decide_timeout", 0.0, False),
    ("decide_timeout", -0.5, False),
    ("decide_timeout", -1.0, False),
    ("decide_timeout", math.inf, False),
    ("decide_timeout", math.nan, False),
    ("text_links", "police", True),
    ("text_links", "off", True),
    ("text_links", "", False),
    ("text_links", "Police", False),
    ("text_links", "on", False),
    ("text_links", None, False),
]


@pytest.mark.parametrize(("setting", "value", "accepted"), CASES)
@pytest.mark.fak_theorem("D10.2")
def test_a_limit_the_gateway_cannot_keep_is_refused_at_construction(
    setting: str, value: Any, accepted: bool
) -> None:
    kernel = Kernel()
    if accepted:
        state = GatewayState(kernel, **{setting: value})
        try:
            assert getattr(state, setting) == value
        finally:
            state.close()
        return
    with pytest.raises(ValueError, match=setting):
        GatewayState(kernel, **{setting: value})
