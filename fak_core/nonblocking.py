"""The non-blocking declaration: which parts of a decision may run on an event loop.

A host's adjudicator may wait (on a lock, a socket, a remote service), so the gateway
decides on a worker thread under a deadline and answers DENY when the decision is late.
That hop costs a thread hand-off each way. A part declared :func:`nonblocking` promises
never to wait: it does bounded work on what it is given and returns (no I/O, no sleep,
no lock held across either). When every part a decision runs is so declared
(:meth:`fak_core.kernel.Kernel.decides_without_waiting`), the gateway decides inline:
such a decision cannot hang, and a deadline could not interrupt the CPU work it does.

The kernel's own parts are declared here; a host declares its own with the decorator
(on a function, a class, or an instance whose class allows attributes). Anything not
declared is assumed to wait: the default is the worker thread and the deadline.
"""

from __future__ import annotations

from typing import Any, TypeVar

from fak_core.adjudicators import FunctionAdjudicator, FunctionAdmitter

__all__ = ["is_nonblocking", "nonblocking"]

T = TypeVar("T")

_ATTR = "__fak_nonblocking__"


def nonblocking(obj: T) -> T:
    """Declare that calling ``obj`` (or any instance of it, for a class) never waits."""
    setattr(obj, _ATTR, True)
    return obj


def is_nonblocking(obj: Any) -> bool:
    """True only when ``obj`` (or the function a kernel wrapper holds) declared it."""
    if isinstance(obj, FunctionAdjudicator | FunctionAdmitter):
        obj = obj.fn
    return getattr(obj, _ATTR, False) is True
