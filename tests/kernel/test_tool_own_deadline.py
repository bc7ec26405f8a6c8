"""A tool that raises a ``DeadlineExceeded`` of its own is a tool error, not a timeout (D1.2).

A tool may use a deadline pool of its own and let its ``DeadlineExceeded`` out. The kernel
read every ``DeadlineExceeded`` as its tool pool's deadline: under ``tool_timeout`` it was
counted in ``tool_timeouts`` with the timeout message, and without ``tool_timeout`` the
message could not be written (``None`` has no ``:g`` format) and a ``TypeError`` escaped
``syscall``. The expected messages are written out here from D1.2's wording; a tool that
really outlives ``tool_timeout`` is still the timeout.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator

import pytest

from fak_core import Kernel, Policy
from fak_core.calls import Status, ToolCall
from fak_core.deadline import DeadlineExceeded


def _raises_own(args: dict[str, object]) -> None:
    raise DeadlineExceeded(0.25)


def _raises_long(args: dict[str, object]) -> None:
    exc = DeadlineExceeded(0.25)
    exc.args = ("x" * 600,)  # a message of its own, past the 512-character cut
    raise exc


@contextlib.contextmanager
def _kernel_with(
    tool: Callable[[dict[str, object]], object], tool_timeout: float | None
) -> Iterator[Kernel]:
    """A kernel that allows one tool ``t``, closed on the way out."""
    k = Kernel(Policy(allow=("t",)), tool_timeout=tool_timeout, tool_workers=1)
    k.register_tool("t", tool)
    try:
        yield k
    finally:
        k.close()


@pytest.mark.fak_theorem("D1.2")
@pytest.mark.parametrize("tool_timeout", [None, 5.0])
def test_a_deadline_the_tool_raises_itself_is_a_tool_error(tool_timeout: float | None) -> None:
    with _kernel_with(_raises_own, tool_timeout) as k:
        result, _ = k.syscall(ToolCall("t", "{}", "s"))
        assert result.status is Status.ERROR
        assert result.meta["error"] == (
            "tool 't' raised DeadlineExceeded: did not finish within 0.25s"
        )
        assert (k.counters.tool_errors, k.counters.tool_timeouts) == (1, 0)


@pytest.mark.fak_theorem("D1.2")
def test_a_tool_past_its_deadline_is_still_the_timeout() -> None:
    release = threading.Event()
    try:
        with _kernel_with(lambda args: release.wait(5), 0.05) as k:
            result, _ = k.syscall(ToolCall("t", "{}", "s"))
            assert result.status is Status.ERROR
            assert result.meta["error"] == "tool 't' timed out after 0.05s"
            assert (k.counters.tool_errors, k.counters.tool_timeouts) == (0, 1)
    finally:
        release.set()  # the worker still in the tool returns, and stops (close never waits)


@pytest.mark.fak_theorem("D1.2")
@pytest.mark.parametrize("tool_timeout", [None, 5.0])
def test_a_tool_error_of_its_own_deadline_is_cut_at_512(tool_timeout: float | None) -> None:
    with _kernel_with(_raises_long, tool_timeout) as k:
        result, _ = k.syscall(ToolCall("t", "{}", "s"))
        head = "tool 't' raised DeadlineExceeded: "
        assert result.meta["error"] == head + "x" * (512 - len(head))
        assert (k.counters.tool_errors, k.counters.tool_timeouts) == (1, 0)
