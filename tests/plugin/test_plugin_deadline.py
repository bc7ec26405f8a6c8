"""A generated mutant that hangs in a thread the witness waits on is stopped at its deadline.

The real case: a mutant looped for ever inside the event-loop thread of Starlette's
``TestClient``; the deadline raised in the main thread, whose way out (the client's exit)
joined that thread, so the proof run never ended. Each witness here runs in a subprocess
with a time limit, so a plugin that gets stuck fails the test instead of hanging the suite.
"""

from __future__ import annotations

import pytest

from pytest_fak.generated import generate

from .plugin_project import make_small_project, verdicts
from .test_plugin_generated import SPIN_DOC, SPIN_LIB, SPIN_TEST

# the spin theorem of the generated-mutant tests, its loop run in another thread
LOOP_DOC = (
    SPIN_DOC.replace("# Spin", "# Loop")
    .replace("SP1 — spin counts up", "LP1 — the count comes back")
    .replace("`spin(n)`", "`{entry}(n)`")
    .replace("`spinlib:spin` counts up to n.", "`looplib:count` counts up to n, in another thread.")
    .replace("`spinlib:spin`", "`looplib:count`")
    .replace("`off-by-one` — spin returns n + 1", "`off-by-one` — count returns n + 1")
)

LOOP_LIB = (
    SPIN_LIB.replace("def spin(", "def count(")
    + '''
import threading

from starlette.applications import Starlette
from starlette.responses import JSONResponse
from starlette.routing import Route
from starlette.testclient import TestClient


async def _route(request):
    return JSONResponse(count(int(request.query_params["n"])))


app = Starlette(routes=[Route("/", _route)])


def served(n):
    """count(n) computed by a route, through a test client (its exit joins the loop)."""
    with TestClient(app) as client:
        return client.get("/", params={"n": n}).json()


def signalled(n):
    """count(n) from a thread that signals when done; the way out waits for the signal."""
    done = threading.Event()
    box = []

    def work():
        box.append(count(n))
        done.set()

    threading.Thread(target=work, daemon=True).start()
    try:
        done.wait()
    finally:
        done.wait()
    return box[0]
'''
)

LOOP_TEST = (
    SPIN_TEST.replace("spinlib", "looplib")
    .replace('"spin"', '"count"')
    .replace("SP1", "LP1")
    .replace("looplib.spin(3)", "looplib.{entry}(3)")
)


@pytest.mark.parametrize(
    "entry",
    [
        # the mutant loops in the client's event-loop thread; the client's exit joins it
        "served",
        # the mutant's thread, once stopped, never signals: the main thread is raised
        # into again
        "signalled",
    ],
)
def test_a_mutant_looping_in_a_thread_the_witness_waits_on_is_stopped(
    pytester: pytest.Pytester, entry: str
) -> None:
    make_small_project(
        pytester,
        LOOP_DOC.format(entry=entry),
        looplib=LOOP_LIB,
        test_loop=LOOP_TEST.format(entry=entry),
    )
    result = pytester.runpytest_subprocess(
        "--fak-theorems",
        "--fak-mutate=full",
        "--fak-mutant-timeout=0.5",
        "--fak-fail-on=none",
        "-p",
        "no:cacheprovider",
        timeout=120,
    )
    assert result.ret == 0, result.stdout.str()
    g = verdicts(pytester)["LP1"]["generated"]
    hang = next(m for m in generate("looplib:count").mutants if "i -= 1" in m.diff)
    assert hang.id not in {s["id"] for s in g["survivors"] + g["unmeasured"]}
