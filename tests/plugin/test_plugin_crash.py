"""Mutants that blow up the process: the per-mutant address-space budget (a MemoryError
under a mutant kills it, the run goes on) and xdist workers that die under a mutant (the
other witnesses on that worker keep their evidence, the report names the crash)."""

from __future__ import annotations

import json
import os
import re

import pytest

from pytest_fak import crash

from .plugin_project import make_small_project, verdicts

pytestmark = pytest.mark.skipif(
    crash.memory_limit_unsupported() is not None, reason="needs RLIMIT_AS and /proc (Linux)"
)

MIB = 1 << 20


def _unlimited() -> None:
    import resource

    if resource.getrlimit(resource.RLIMIT_AS)[0] != resource.RLIM_INFINITY:
        pytest.skip("this process already runs under an address-space limit")


def test_parse_size_reads_binary_units_and_off() -> None:
    assert crash.parse_size("2G") == 2 << 30
    assert crash.parse_size("512MiB") == 512 * MIB
    assert crash.parse_size("1.5k") == 1536
    assert crash.parse_size("4096") == 4096
    assert crash.parse_size("off") is None
    for bad in ("lots", "-1G", "2X", "0.0001"):
        with pytest.raises(ValueError, match=r"expected a size|must be positive"):
            crash.parse_size(bad)


def test_memory_limit_caps_allocation_inside_and_restores_the_old_limit() -> None:
    import resource

    _unlimited()
    before = resource.getrlimit(resource.RLIMIT_AS)
    with crash.memory_limit(64 * MIB):
        inside = resource.getrlimit(resource.RLIMIT_AS)[0]
        with pytest.raises(MemoryError):
            bytearray(256 * MIB)
    assert inside != resource.RLIM_INFINITY
    assert resource.getrlimit(resource.RLIMIT_AS) == before
    assert len(bytearray(256 * MIB)) == 256 * MIB  # outside the block: no limit
    with crash.memory_limit(None):
        assert resource.getrlimit(resource.RLIMIT_AS) == before


def test_is_memory_error_sees_through_causes_and_groups() -> None:
    try:
        try:
            raise MemoryError
        except MemoryError as inner:
            raise RuntimeError("wrapped") from inner
    except RuntimeError as exc:
        wrapped = exc
    assert crash.is_memory_error(wrapped)
    assert crash.is_memory_error(ExceptionGroup("g", [ValueError(), MemoryError()]))
    assert not crash.is_memory_error(ValueError("no"))


def test_flight_recorder_overwrites_one_record_and_clears() -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "gw0.json")
        rec = crash.FlightRecorder(path)
        rec.record({"nodeid": "t.py::test_long_name", "mutant": "M" * 50})
        rec.record({"nodeid": "t.py::b", "mutant": "N"})
        assert crash.read_flight(path) == {"nodeid": "t.py::b", "mutant": "N"}
        rec.clear()
        assert crash.read_flight(path) is None
        rec.close()
    assert crash.read_flight(os.path.join(d, "missing.json")) is None


# ---------------------------------------------------------------- the memory budget

FILL_LIB = """
def fill(n):
    out = []
    i = 0
    while i < n:
        out.append(bytes(1 << 16))
        i += 1
    return out


def inc(x):
    return x + 1
"""

FILL_DOC = """# Fill

## FI1 — fill makes n chunks

**THEOREM.** `fill(n)` returns n chunks of 64 KiB.

**REGIME.** A

**PROOF.** `filllib:fill` appends one chunk per turn of its loop.

**ANCHORS.**
- `filllib:fill`

**MUTANTS.**
- `grows` — fill never stops allocating

**CAVEATS.**
- Small n only.

## FI2 — inc adds one

**THEOREM.** `inc(x)` is x + 1.

**REGIME.** A

**PROOF.** `filllib:inc` adds one.

**ANCHORS.**
- `filllib:inc`

**MUTANTS.**
- `adds-two` — inc adds two

**CAVEATS.**
- One input.
"""

FILL_TEST = """
import itertools
import os
import resource
from unittest import mock
import pytest
import filllib
from pytest_fak import mutant

@mutant("FI1/grows")
def grows():
    return mock.patch.object(
        filllib, "fill", lambda n: [bytes(1 << 16) for _ in itertools.count()]
    )

@mutant("FI2/adds-two")
def adds_two():
    return mock.patch.object(filllib, "inc", lambda x: x + 2)

@pytest.mark.fak_theorem("FI1")
def test_fill():
    with open(os.environ["FAK_LIMITS_LOG"], "a") as fh:
        fh.write(f"{resource.getrlimit(resource.RLIMIT_AS)[0]}\\n")
    chunks = filllib.fill(3)
    assert [len(c) for c in chunks] == [1 << 16] * 3

@pytest.mark.fak_theorem("FI2")
def test_inc():
    assert filllib.inc(1) == 2
"""


def _fill_project(pytester: pytest.Pytester) -> None:
    make_small_project(pytester, FILL_DOC, filllib=FILL_LIB, test_fill=FILL_TEST)


def test_a_mutant_that_allocates_without_bound_is_killed_by_the_memory_budget(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    import resource

    _unlimited()
    log = pytester.path / "limits.log"
    monkeypatch.setenv("FAK_LIMITS_LOG", str(log))
    _fill_project(pytester)
    result = pytester.runpytest(
        "--fak-theorems",
        "--fak-mutate=full",
        "--fak-mutant-memory=64M",
        "--fak-mutant-timeout=60",
        "--fak-fail-on=none",
    )
    assert result.ret == 0
    v = verdicts(pytester)
    fill = v["FI1"]
    (w,) = fill["witnesses"]
    # the declared mutant's MemoryError is its kill; the generated one that loops forever
    # allocating (i -= 1) is killed by ``memory``, long before its 60 s deadline
    assert w["mutants"] == {"FI1/grows": "killed"}
    assert fill["mutants"][0]["killed_by"] == ["test_fill.py::test_fill"]
    cache = json.loads((pytester.path / ".fak-cache" / "mutants.json").read_text())
    rows = [(k.split("/")[0], r[1]) for k, rs in cache["mutants"].items() for r in rs]
    assert ("filllib:fill", "memory") in rows
    assert fill["generated"]["killed"] > 0
    # the run went on: the other theorem ran its mutants after the blow-up
    assert v["FI2"]["verdict"] == "PROVEN"
    # the witness's own run and its control run had no limit; every re-run under a
    # mutant had one, and the limit was gone after each
    limits = [int(x) for x in log.read_text().split()]
    assert limits[0] == limits[-1] == resource.RLIM_INFINITY
    assert resource.RLIM_INFINITY not in limits[1:-1] and len(limits) > 3
    assert resource.getrlimit(resource.RLIMIT_AS)[0] == resource.RLIM_INFINITY
    env = json.loads((pytester.path / "proofs" / "verdicts.json").read_text())["environment"]
    assert env["mutant_memory"] == {"budget_bytes": 64 * MIB, "enforced": True, "why_not": None}


def test_running_out_of_memory_is_no_kill_when_the_real_code_needs_more_than_the_budget(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    _unlimited()
    monkeypatch.setenv("FAK_LIMITS_LOG", str(pytester.path / "limits.log"))
    _fill_project(pytester)
    test = FILL_TEST.replace(
        "    chunks = filllib.fill(3)",
        "    big = bytearray(96 << 20)\n    chunks = filllib.fill(3)",
    )
    pytester.makepyfile(test_fill=test)
    args = ("--fak-theorems", "--fak-mutant-memory=32M", "--fak-fail-on=none")
    assert pytester.runpytest(*args).ret == 0
    fill = verdicts(pytester)["FI1"]
    assert fill["witnesses"][0]["mutants"] == {"FI1/grows": "inconclusive"}
    assert fill["verdict"] == "OPEN"
    # with a budget the real code fits in, the same mutant is killed
    assert pytester.runpytest("--fak-theorems", "--fak-mutant-memory=512M").ret == 0
    assert verdicts(pytester)["FI1"]["witnesses"][0]["mutants"] == {"FI1/grows": "killed"}


def test_the_memory_budget_can_be_turned_off_and_is_checked(pytester: pytest.Pytester) -> None:
    _fill_project(pytester)
    pytester.makeini("[pytest]\naddopts = -p no:schemathesis\nfak_mutant_memory = lots\n")
    result = pytester.runpytest("--fak-theorems", "-k", "test_inc")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*fak_mutant_memory*'lots'*"])
    args = ("--fak-theorems", "-k", "test_inc", "--fak-mutant-memory=off", "--fak-fail-on=none")
    assert pytester.runpytest(*args).ret == 0
    env = json.loads((pytester.path / "proofs" / "verdicts.json").read_text())["environment"]
    assert env["mutant_memory"]["enforced"] is False
    assert "off" in env["mutant_memory"]["why_not"]


# ---------------------------------------------------------------- crashed workers

CRASH_LIB = """
def double(x):
    return 2 * x


def inc(x):
    return x + 1


def neg(x):
    return -x
"""

CRASH_DOC = """# Crash

## CR1 — double doubles

**THEOREM.** `double(x)` is 2x.

**REGIME.** A

**PROOF.** `crashlib:double` multiplies by two.

**ANCHORS.**
- `crashlib:double`

**MUTANTS.**
- `off` — double adds one
- `seven-aborts` — double(7) kills the process

**CAVEATS.**
- Two inputs.

## CR2 — inc adds one

**THEOREM.** `inc(x)` is x + 1.

**REGIME.** A

**PROOF.** `crashlib:inc` adds one.

**ANCHORS.**
- `crashlib:inc`

**MUTANTS.**
- `adds-two` — inc adds two

**CAVEATS.**
- One input.

## CR3 — neg negates

**THEOREM.** `neg(x)` is -x.

**REGIME.** A

**PROOF.** `crashlib:neg` negates.

**ANCHORS.**
- `crashlib:neg`

**MUTANTS.**
- `identity` — neg returns x

**CAVEATS.**
- One input.
"""

CRASH_TEST = """
import os
from unittest import mock
import pytest
import crashlib
from pytest_fak import mutant

@mutant("CR1/off")
def off():
    return mock.patch.object(crashlib, "double", lambda x: 2 * x + 1)

def _seven_aborts(x):
    if x == 7:
        os.abort()
    return 2 * x

@mutant("CR1/seven-aborts")
def seven_aborts():
    return mock.patch.object(crashlib, "double", _seven_aborts)

@mutant("CR2/adds-two")
def adds_two():
    return mock.patch.object(crashlib, "inc", lambda x: x + 2)

@mutant("CR3/identity")
def identity():
    return mock.patch.object(crashlib, "neg", lambda x: x)

@pytest.mark.fak_theorem("CR2")
def test_a_inc():
    assert crashlib.inc(1) == 2

@pytest.mark.fak_theorem("CR1")
def test_b_double_seven():
    assert crashlib.double(7) == 14

@pytest.mark.fak_theorem("CR1")
def test_c_double_three():
    assert crashlib.double(3) == 6

@pytest.mark.fak_theorem("CR3")
def test_d_neg():
    assert crashlib.neg(2) == -2
"""


def _crash_project(pytester: pytest.Pytester, test: str = CRASH_TEST) -> None:
    make_small_project(
        pytester, CRASH_DOC, "-p no:cacheprovider", crashlib=CRASH_LIB, test_crash=test
    )


def test_a_worker_that_dies_under_a_mutant_loses_only_that_witness(
    pytester: pytest.Pytester,
) -> None:
    _crash_project(pytester)
    result = pytester.runpytest_subprocess("--fak-theorems", "-n", "2", "-v", "--fak-fail-on=none")
    seven = "test_crash.py::test_b_double_seven"
    result.stdout.fnmatch_lines(
        [f"*fak: worker gw? crashed in {seven} under mutant CR1/seven-aborts (counted as killed)*"]
    )
    out = result.stdout.str()
    worker = out.split(f"crashed in {seven}")[0].rsplit("fak: worker ", 1)[1].strip()
    # xdist's load scheduling gave the first two witnesses to one worker, in order
    assert re.search(rf"\[{worker}\] \[ *\d+%\] PASSED test_crash.py::test_a_inc", out), out
    v = verdicts(pytester)
    # the witness that passed on the dying worker before the crash kept its anchors and
    # kills (they travelled on its report), and the other worker's witnesses ran
    assert v["CR2"]["verdict"] == "PROVEN", v["CR2"]["reasons"]
    assert v["CR3"]["verdict"] == "PROVEN", v["CR3"]["reasons"]
    cr1 = v["CR1"]
    by_id = {w["nodeid"]: w for w in cr1["witnesses"]}
    crashed = by_id[seven]
    assert crashed["outcome"] == "passed"  # on the real code, before the mutants
    assert crashed["crash"]["mutant"] == "CR1/seven-aborts"
    assert crashed["crash"]["kind"] == "declared"
    # its kill of CR1/off came before the crash and is lost; the crash is its only outcome
    assert crashed["mutants"] == {"CR1/seven-aborts": "crashed"}
    assert crashed["anchors"] == {"crashlib:double": True}
    status = {m["id"]: (m["status"], m["killed_by"]) for m in cr1["mutants"]}
    assert status == {
        "CR1/off": ("killed", ["test_crash.py::test_c_double_three"]),
        "CR1/seven-aborts": ("killed", [seven]),
    }
    # the crash counts as a kill: with the other witness killing CR1/off, CR1 is PROVEN
    assert cr1["verdict"] == "PROVEN"
    md = (pytester.path / "proofs" / "PROOFS.md").read_text()
    assert "crashed worker gw" in md and "under mutant `CR1/seven-aborts`" in md


def test_a_crash_that_loses_evidence_leaves_the_theorem_open_and_named(
    pytester: pytest.Pytester,
) -> None:
    # without the second witness, the crashed one's other mutant (CR1/off) never ran
    _crash_project(
        pytester, CRASH_TEST.replace('@pytest.mark.fak_theorem("CR1")\ndef test_c', "def test_c")
    )
    result = pytester.runpytest_subprocess("--fak-theorems", "-n", "2", "--fak-fail-on=none")
    assert result.ret == pytest.ExitCode.TESTS_FAILED  # xdist reports the crashed test
    cr1 = verdicts(pytester)["CR1"]
    assert cr1["verdict"] == "OPEN"
    assert any("CR1/off is not-run" in r for r in cr1["reasons"]), cr1["reasons"]
    assert any(
        "test_b_double_seven crashed worker gw" in r and "CR1/seven-aborts" in r
        for r in cr1["reasons"]
    ), cr1["reasons"]


def test_a_worker_that_dies_outside_any_mutant_is_an_error(pytester: pytest.Pytester) -> None:
    test = CRASH_TEST.replace("assert crashlib.double(7) == 14", "os.abort()")
    _crash_project(pytester, test)
    result = pytester.runpytest_subprocess("--fak-theorems", "-n", "2", "--fak-fail-on=none")
    result.stdout.fnmatch_lines(["*fak: worker gw? crashed in *test_b_double_seven outside any*"])
    v = verdicts(pytester)
    cr1 = v["CR1"]
    assert cr1["verdict"] == "ERROR"
    assert any("crashed its worker outside any mutant" in r for r in cr1["reasons"])
    (w,) = [w for w in cr1["witnesses"] if w["nodeid"].endswith("test_b_double_seven")]
    assert (w["outcome"], w["error_kind"], w["crash"]["mutant"]) == ("error", "crashed", None)
    assert v["CR2"]["verdict"] == v["CR3"]["verdict"] == "PROVEN"


def test_without_xdist_a_crash_under_a_mutant_stops_the_run_and_writes_nothing(
    pytester: pytest.Pytester,
) -> None:
    _crash_project(pytester)
    result = pytester.runpytest_subprocess("--fak-theorems", "-p", "no:xdist")
    # the process itself died: no verdicts, the previous report (none here) stays
    assert result.ret not in (0, 1)
    result.stderr.fnmatch_lines(["*Fatal Python error: Aborted*"])
    assert not (pytester.path / "proofs" / "verdicts.json").exists()


PEEK_LIB = """
import ctypes

_BUF = ctypes.create_string_buffer(b"abcdef")


def head(n):
    base = ctypes.addressof(_BUF)
    return ctypes.string_at(base * 1, n)
"""

PEEK_DOC = """# Peek

## PK1 — head reads the buffer

**THEOREM.** `head(n)` is the first n bytes of the buffer.

**REGIME.** A

**PROOF.** `peeklib:head` reads from the buffer's address.

**ANCHORS.**
- `peeklib:head`

**MUTANTS.**
- `short` — head reads one byte less

**CAVEATS.**
- One length.
"""

PEEK_TEST = """
from unittest import mock
import pytest
import peeklib
from pytest_fak import mutant

@mutant("PK1/short")
def short():
    real = peeklib.head
    return mock.patch.object(peeklib, "head", lambda n: real(n - 1))

@pytest.mark.fak_theorem("PK1")
def test_head():
    assert peeklib.head(3) == b"abc"
"""


def test_a_generated_mutant_that_segfaults_is_cached_as_crashed_and_the_next_run_goes_on(
    pytester: pytest.Pytester,
) -> None:
    make_small_project(
        pytester, PEEK_DOC, "-p no:cacheprovider", peeklib=PEEK_LIB, test_peek=PEEK_TEST
    )
    args = ("--fak-theorems", "-n", "2", "--fak-mutate=incremental", "--fak-fail-on=none")
    # string_at(base * 2, n) reads an unmapped address (string_at(0, n) does not crash:
    # ctypes allocates a fresh buffer for NULL)
    segfault = "peeklib:head/constant/b8a654b5"
    crashes: list[str] = []
    # each run loses the witness's re-runs after a crash; the crash is cached, so the
    # next run skips that mutant and goes on (at most one run per generated mutant)
    for _ in range(5):
        result = pytester.runpytest_subprocess(*args)
        pk1 = verdicts(pytester)["PK1"]
        (w,) = pk1["witnesses"]
        if w["crash"] is None:
            break
        crashes.append(w["crash"]["mutant"])
        assert w["crash"]["kind"] == "generated"
        result.stdout.fnmatch_lines(["*crashed in test_peek.py::test_head under mutant *"])
        assert any("crashed worker gw" in r for r in pk1["reasons"]) or pk1["verdict"] == "PROVEN"
    assert segfault in crashes
    assert len(crashes) == len(set(crashes))  # a cached crash is not run again
    assert pk1["verdict"] == "PROVEN", pk1["reasons"]
    assert pk1["generated"]["killed"] == pk1["generated"]["generated"] == 4
    cache = json.loads((pytester.path / ".fak-cache" / "mutants.json").read_text())
    outcomes = [r[1] for rs in cache["mutants"].values() for r in rs]
    assert outcomes.count("crashed") == len(crashes)
