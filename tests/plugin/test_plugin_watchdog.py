"""A deadline starts no thread when it fires.

The real case: a proof run stopped for good in a worker that held 1,200 threads other
witnesses had left behind. A re-run passed its deadline; the alarm handler, running in
the main thread under the re-run's address-space cap, started the watchdog thread, which
died before it ran, and ``Thread.start`` waited for it for ever. The watchdog is now
started when the deadline is entered; here, a thread that cannot start at the moment the
alarm lands must not change what the deadline does.
"""

from __future__ import annotations

import threading
import time

import pytest

from pytest_fak.mutation import MutantTimeout, deadline


def _spin(seconds: float) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        pass


def _refusing_spin(monkeypatch: pytest.MonkeyPatch, refuse: object) -> None:
    monkeypatch.setattr(threading.Thread, "start", refuse)
    _spin(5.0)


def test_a_deadline_raises_on_time_though_no_thread_can_start_when_it_fires(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    expired: list[float] = []
    started = time.monotonic()

    def refuse(self: threading.Thread) -> None:
        raise RuntimeError("can't start new thread")

    with pytest.raises(MutantTimeout), deadline(0.2, lambda: expired.append(time.monotonic())):
        # from here on, starting a thread fails, as it did under the address-space cap
        _refusing_spin(monkeypatch, refuse)
    monkeypatch.undo()
    assert expired and expired[0] - started < 2.0


def test_a_deadline_left_before_it_fires_leaves_no_watchdog_behind() -> None:
    before = {t.ident for t in threading.enumerate()}
    t0 = time.monotonic()
    with deadline(30.0):
        pass
    assert time.monotonic() - t0 < 1.0  # closing does not wait out a watchdog's turn
    left = [t for t in threading.enumerate() if t.ident not in before and t.is_alive()]
    assert not [t for t in left if t.name == "fak-mutant-watchdog"]
