"""D1.2: a call the deadline pool answers late is a ``DeadlineExceeded`` that says so.

The queued call (every worker held) and the running one are each answered a
``TimeoutError`` carrying the deadline it missed as ``timeout`` and the message
``did not finish within <N>s``; the expected texts are written out by hand per deadline.
"""

from __future__ import annotations

import itertools
import threading

import pytest

from fak_core.deadline import DeadlineExceeded, DeadlinePool

#: (deadline in seconds, the message it must give), written out by hand.
DEADLINES = (
    (0.02, "did not finish within 0.02s"),
    (0.05, "did not finish within 0.05s"),
    (0.125, "did not finish within 0.125s"),
)
_RUN = itertools.count(1)


def _late(pool: DeadlinePool, release: threading.Event, deadline: float) -> DeadlineExceeded:
    with pytest.raises(DeadlineExceeded) as info:
        pool.run(release.wait, timeout=deadline)
    return info.value


@pytest.mark.fak_theorem("D1.2")
@pytest.mark.parametrize(("deadline", "message"), DEADLINES)
def test_a_late_call_is_a_timeout_error_naming_its_deadline(deadline: float, message: str) -> None:
    release = threading.Event()
    pool = DeadlinePool(1, f"kdx-{next(_RUN)}")
    try:
        running = _late(pool, release, deadline)  # holds the only worker
        queued = _late(pool, release, deadline)  # never starts
        for exc in (running, queued):
            assert isinstance(exc, TimeoutError)
            assert exc.timeout == deadline
            assert str(exc) == message
            assert exc.args == (message,)
    finally:
        release.set()
        pool.close()
