"""A thread a killed mutant leaves running its code is stopped before the next re-run.

The real case: a journal's drain loop, mutated so it never ends, ran in the writer thread;
the witness failed on time (the mutant was killed well before its deadline), so nothing
stopped the thread, and it spun on, holding the interpreter, through every later re-run of
the proof run for 25 minutes. The witness here fails within half a second under the
looping mutant and leaves its thread spinning; a plain test that runs after it checks that
no such thread is still alive. Run in a subprocess with a time limit.
"""

from __future__ import annotations

import json

import pytest

from pytest_fak import mutcache
from pytest_fak.generated import generate

from .plugin_project import make_small_project, verdicts
from .test_plugin_generated import SPIN_DOC, SPIN_LIB, SPIN_TEST

# the witness counts in a thread of its own and waits for it half a second, no longer
LEFT_TEST = SPIN_TEST.replace(
    """def test_spin():
    assert spinlib.spin(3) == 3
""",
    """def test_spin():
    import threading
    box = []
    t = threading.Thread(target=lambda: box.append(spinlib.spin(3)), name="spinner", daemon=True)
    t.start()
    t.join(0.5)
    assert box == [3]
""",
)

# runs after the witness and its re-runs (modules run in name order)
AFTER = """
import threading
import time


def _spinners():
    return [t for t in threading.enumerate() if t.name == "spinner" and t.is_alive()]


def test_no_spinner_is_left():
    end = time.monotonic() + 3
    while _spinners() and time.monotonic() < end:
        time.sleep(0.05)
    assert not _spinners(), "a thread still runs a mutant's code after its re-run"
"""


def test_a_thread_left_running_a_killed_mutant_is_stopped(pytester: pytest.Pytester) -> None:
    assert "def test_spin():\n    import threading" in LEFT_TEST
    make_small_project(pytester, SPIN_DOC, spinlib=SPIN_LIB, test_spin=LEFT_TEST, test_zz=AFTER)
    result = pytester.runpytest_subprocess(
        "--fak-theorems",
        "--fak-mutate=full",
        # far past the witness's own half second: the looping mutant is killed by the
        # witness failing, not by its deadline
        "--fak-mutant-timeout=30",
        "--fak-fail-on=none",
        "-p",
        "no:cacheprovider",
        timeout=120,
    )
    result.assert_outcomes(passed=2)
    g = verdicts(pytester)["SP1"]["generated"]
    loop = next(m for m in generate("spinlib:spin").mutants if "i -= 1" in m.diff)
    assert loop.id not in {s["id"] for s in g["survivors"] + g["unmeasured"]}
    # killed by the witness's own failure, before its deadline
    cache = json.loads((pytester.path / ".fak-cache" / "mutants.json").read_text())
    key = mutcache.mutant_key(loop.id, generate("spinlib:spin").source_sha256)
    assert [r[:2] for r in cache["mutants"][key]] == [["test_spin.py::test_spin", "killed"]]
