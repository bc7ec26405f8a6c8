"""C4.4: the STATE_DOWN reason a gateway on shared state refuses with, on a kernel's registry.

Naming it on a fresh kernel's reason registry, once or several times over (every shared
store and replica wiring asks), leaves the reason registered exactly as the README's table
states: named ``STATE_DOWN``, disposition WAIT, its name read back to its code; before, the
code is nameless (``REASON_<n>``).
"""

from __future__ import annotations

import pytest

from fak_core import Kernel, Policy
from fak_core.reasons import Disposition
from fak_core.statedown import STATE_DOWN, register_state_down


@pytest.mark.fak_theorem("C4.4")
@pytest.mark.parametrize("times", [1, 2, 3])
def test_state_down_is_named_once_with_disposition_wait(times: int) -> None:
    reasons = Kernel(Policy(allow=("t",))).reasons
    assert reasons.name(STATE_DOWN) == f"REASON_{int(STATE_DOWN)}"
    for _ in range(times):
        register_state_down(reasons)
    assert reasons.name(STATE_DOWN) == "STATE_DOWN"
    assert reasons.code("STATE_DOWN") == STATE_DOWN
    assert reasons.disposition(STATE_DOWN) == Disposition.WAIT
