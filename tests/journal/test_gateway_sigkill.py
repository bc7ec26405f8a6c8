"""``fak serve --journal`` killed with SIGKILL under load: every decision the gateway
acknowledged is in the journal, the chain verifies, and a restart continues it (no fork),
rotating by size with the chain carried across files."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx

from fak_core.journal import read_rows, verify_files

FAK = shutil.which("fak", path=os.path.dirname(sys.executable)) or "fak"
LINE = re.compile(r"^fak serve: listening on (http://127\.0\.0\.1:\d+) ")
THREADS = 8
ACKED_BEFORE_KILL = 300
DEADLINE = 25.0


def _start(journal: Path, *extra: str) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        [FAK, "serve", "--port", "0", "--journal", str(journal), *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": os.getcwd()},
    )
    box: list[str] = []
    reader = threading.Thread(target=lambda: box.append(proc.stdout.readline()), daemon=True)  # type: ignore[union-attr]
    reader.start()
    reader.join(30)
    match = LINE.match(box[0]) if box else None
    if match is None:
        proc.kill()
        proc.wait(10)
        raise AssertionError(f"fak serve did not start: {box} {proc.stderr.read()}")  # type: ignore[union-attr]
    return proc, match.group(1)


def _finish(proc: subprocess.Popen[str]) -> str:
    if proc.poll() is None:
        proc.kill()
    proc.wait(10)
    err = proc.stderr.read() if proc.stderr else ""
    for stream in (proc.stdout, proc.stderr):
        if stream is not None:
            stream.close()
    return err


def _load(url: str, acked: dict[str, str], stop: threading.Event, worker: int) -> None:
    """Post decisions until stopped or the server dies; keep every 200 that came back."""
    tools = ("get_user_details", "shell_rm_rf", "nope_tool")
    with httpx.Client(base_url=url, timeout=5) as c:
        for i in range(100_000):
            if stop.is_set():
                return
            trace = f"w{worker}-{i}"
            try:
                r = c.post("/v1/fak/adjudicate", json={"tool": tools[i % 3], "trace_id": trace})
            except httpx.HTTPError:
                return  # the server is gone
            if r.status_code == 200:
                acked[trace] = r.json()["verdict"]["kind"]


def test_acknowledged_decisions_survive_sigkill_and_the_chain_continues(tmp_path: Path) -> None:
    journal = tmp_path / "gw.db"
    proc, url = _start(journal, "--journal-durability", "full")
    acked: dict[str, str] = {}
    stop = threading.Event()
    workers = [
        threading.Thread(target=_load, args=(url, acked, stop, w), daemon=True)
        for w in range(THREADS)
    ]
    try:
        for w in workers:
            w.start()
        deadline = time.monotonic() + DEADLINE
        while len(acked) < ACKED_BEFORE_KILL and time.monotonic() < deadline:
            time.sleep(0.02)
        os.kill(proc.pid, signal.SIGKILL)  # mid-load: requests are in flight
        proc.wait(10)
    finally:
        stop.set()
        for w in workers:
            w.join(10)
        _finish(proc)
    assert len(acked) >= ACKED_BEFORE_KILL, f"only {len(acked)} decisions before the deadline"
    assert proc.returncode == -signal.SIGKILL

    rows = list(read_rows(journal))
    decided = {r["trace"]: r["verdict"] for r in rows if r["event"] == "decide"}
    lost = [t for t in acked if t not in decided]
    assert not lost, f"{len(lost)} acknowledged decisions are not in the journal: {lost[:5]}"
    assert all(decided[t] == kind for t, kind in acked.items())
    assert verify_files([journal]).ok
    last_seq, last_hash = int(rows[-1]["seq"]), str(rows[-1]["hash"])
    assert [int(r["seq"]) for r in rows] == list(range(1, last_seq + 1))

    # Restart on the same journal, rotating small, and stop it cleanly.
    proc, url = _start(journal, "--journal-rotate-bytes", "65536")
    try:
        with httpx.Client(base_url=url, timeout=5) as c:
            for i in range(150):
                r = c.post(
                    "/v1/fak/adjudicate", json={"tool": "get_user_details", "trace_id": f"r{i}"}
                )
                assert r.status_code == 200
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(20)
        finally:
            err = _finish(proc)
    assert proc.returncode in (0, -signal.SIGTERM), err  # uvicorn re-raises the signal
    assert "Traceback" not in err, err

    rotated = sorted(tmp_path.glob("gw.db.*[0-9]"), key=lambda p: int(p.name.rsplit(".", 1)[1]))
    assert rotated, "the restarted gateway did not rotate past 64 KiB"
    files = [*rotated, journal]
    report = verify_files(files)
    assert report.ok, report.describe()
    everything = [row for f in files for row in read_rows(f)]
    seqs = [int(r["seq"]) for r in everything]
    assert seqs == list(range(1, len(seqs) + 1)), "the chain forked or lost a row"
    first_new = next(r for r in everything if r["trace"] == "r0")
    assert int(first_new["seq"]) == last_seq + 1
    assert first_new["prev_hash"] == last_hash, "the restart did not continue the chain"
    assert {f"r{i}" for i in range(150)} <= {r["trace"] for r in everything}
