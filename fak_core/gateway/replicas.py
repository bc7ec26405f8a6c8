"""Several gateway processes, one session state: wiring ``fak serve --state`` and ``--workers``.

:func:`open_shared` connects to the Redis named by ``--state`` and refuses one that could
forget taint (:meth:`fak_core.redis_state.RedisState.check`); :func:`shared_kernel_options`
gives the kernel its shared ledger, held store, rate limiter, grounding store (identifiers
included), confidential values and spent approval nonces, and :func:`attach_shared` gives
the gateway the shared owner table, the STATE_DOWN reason and the ``/healthz`` probe.
:func:`run_workers` forks ``--workers`` processes that serve one listening socket, each
with its own replica id (and so its own journal chain).
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fak_core.gateway.bootstrap import BootstrapError
from fak_core.gateway.state import GatewayState
from fak_core.statedown import register_state_down

if TYPE_CHECKING:
    from fak_core.redis_state import RedisState

__all__ = [
    "attach_shared",
    "journal_path_for",
    "open_shared",
    "run_workers",
    "shared_kernel_options",
]


def open_shared(url: str, timeout: float | None = None, ttl: float | None = None) -> RedisState:
    """The checked shared state at ``url`` (``ttl``: the sessions' expiry in seconds, None
    for the default); a :class:`BootstrapError` saying what to fix."""
    try:
        from fak_core.redis_state import RedisState, StateConfigError
    except ModuleNotFoundError as exc:
        raise BootstrapError(
            f"--state {url}: the Redis client is not installed ({exc.name}); "
            "pip install 'pytest-fak[redis]'"
        ) from None
    try:
        options: dict[str, float] = {}
        if timeout is not None:
            options["timeout"] = timeout
        if ttl is not None:
            options["ttl"] = ttl
        shared = RedisState(url, **options)
        shared.check()
    except StateConfigError as exc:
        raise BootstrapError(str(exc)) from None
    return shared


def shared_kernel_options(shared: RedisState) -> dict[str, Any]:
    """Kernel keyword arguments that put its session stores in ``shared``."""
    from fak_core.ratelimit import RateLimit
    from fak_core.redis_confidential import RedisConfidential
    from fak_core.redis_stores import (
        RedisGroundingStore,
        RedisHeldStore,
        RedisLedger,
        RedisNonces,
        RedisRateLimiter,
    )

    def limiter(limit: RateLimit) -> RedisRateLimiter:
        return RedisRateLimiter(limit, shared)

    return {
        "ledger": RedisLedger(shared),
        "held": RedisHeldStore(shared),
        "rate_limiter": limiter,
        "approval_nonces": RedisNonces(shared),
        "confidential": RedisConfidential(shared),
        "grounding": RedisGroundingStore(shared),
    }


def attach_shared(state: GatewayState, shared: RedisState) -> None:
    """Give the gateway the shared owner table, the STATE_DOWN reason and the probe."""
    from fak_core.gateway.redis_sessions import RedisSessions

    state.sessions = RedisSessions(shared)
    state.shared = shared
    register_state_down(state.kernel.reasons)


def journal_path_for(path: str, replica: str, workers: int) -> str:
    """Each worker its own chain: ``j.db`` becomes ``j-<replica>.db`` when forked."""
    if workers <= 1:
        return path
    p = Path(path)
    return str(p.with_name(f"{p.stem}-{replica}{p.suffix}"))


def run_workers(workers: int, sock: socket.socket, child: Callable[[int], int]) -> int:
    """Fork ``workers`` processes that each run ``child(index)`` on the inherited socket;
    forward SIGINT/SIGTERM to them and return once all have exited (the worst exit code).
    Fork happens before any thread starts: each child builds its own state."""
    pids: list[int] = []
    for index in range(workers):
        pid = os.fork()
        if pid == 0:  # the child: serve, then leave without running the parent's cleanup
            code = 1
            try:
                code = child(index)
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(code)
        pids.append(pid)
    sock.close()

    forwarded: set[int] = set()

    def forward(signum: int, frame: Any) -> None:
        forwarded.add(signum)
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signum)

    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, forward)
    worst = 0
    for pid in pids:
        _, status = os.waitpid(pid, 0)
        code = os.waitstatus_to_exitcode(status)
        if code < 0 and -code in forwarded:  # stopped by the signal we passed on: a clean stop
            code = 0
        worst = max(worst, code & 0xFF)
    return worst
