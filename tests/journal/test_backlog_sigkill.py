"""The journal backlog attack against ``fak serve --journal``, ended by SIGKILL.

One attacker turn on the OpenAI proxy carries a 60 KB trace id and 16,000 tool messages
(each one an admission, each admission a journal row); meanwhile a victim calls
``/v1/fak/syscall`` on a tool whose every run leaves a marker file. The server is killed
with SIGKILL while both are in flight. Then, from the files alone: a tool run (a marker)
always has its ALLOW row on disk (no tool ran on an uncommitted ALLOW), every answer the
victim got is what its rows say (an ALLOW with a result: the ALLOW row and the run; a
refusal: no run), and the journal verifies."""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from fak_core.journal import read_rows, stored_text, verify_files
from tests.journal.test_gateway_sigkill import _finish, _start

TOOLS = str(Path(__file__).with_name("backlog_tools.py"))
TRACE_BYTES = 60_000
TOOL_MESSAGES = 16_000
VICTIM_RUNS = 4
DEADLINE = 40.0


def _attack_body() -> bytes:
    messages: list[dict[str, Any]] = [{"role": "user", "content": "go"}]
    calls = [
        {"id": f"c{i}", "type": "function", "function": {"name": "get_user", "arguments": "{}"}}
        for i in range(TOOL_MESSAGES)
    ]
    messages.append({"role": "assistant", "content": None, "tool_calls": calls})
    messages += [
        {"role": "tool", "tool_call_id": f"c{i}", "content": "x"} for i in range(TOOL_MESSAGES)
    ]
    return orjson.dumps({"model": "m", "messages": messages})


def _attacker(url: str, box: list[Any]) -> None:
    trace = "a" * TRACE_BYTES
    headers = {"x-trace-id": trace, "content-type": "application/json"}
    try:
        with httpx.Client(base_url=url, timeout=DEADLINE) as c:
            box.append(c.post("/v1/chat/completions", content=_attack_body(), headers=headers))
    except httpx.HTTPError as exc:  # the server was killed under it
        box.append(exc)


def _victim(url: str, answers: dict[str, dict[str, Any]], stop: threading.Event) -> None:
    with httpx.Client(base_url=url, timeout=DEADLINE) as c:
        for i in range(1000):
            if stop.is_set():
                return
            marker = f"victim-{i}"
            doc = {"tool": "get_user_details", "arguments": {"marker": marker}, "trace_id": marker}
            try:
                r = c.post("/v1/fak/syscall", json=doc)
            except httpx.HTTPError:
                return  # killed
            answers[marker] = r.json()


def test_a_backlogged_journal_never_lets_a_tool_run_uncommitted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    journal = tmp_path / "gw.db"
    markers = tmp_path / "markers"
    markers.mkdir()
    monkeypatch.setenv("FAK_TEST_MARKERS", str(markers))  # inherited by the server process
    proc, url = _start(journal, "--tools", TOOLS)
    answers: dict[str, dict[str, Any]] = {}
    attacked: list[Any] = []
    stop = threading.Event()
    attacker = threading.Thread(target=_attacker, args=(url, attacked), daemon=True)
    victim = threading.Thread(target=_victim, args=(url, answers, stop), daemon=True)
    try:
        attacker.start()
        time.sleep(1.5)  # thousands of the attacker's rows are queued by now
        victim.start()
        # Kill soon after the first tool run: a run whose ALLOW is not committed by then
        # (the attack on the unfixed gateway) is caught with its row missing.
        deadline = time.monotonic() + DEADLINE
        first_run = None
        while time.monotonic() < deadline:
            if first_run is None and any(markers.iterdir()):
                first_run = time.monotonic()
            if first_run is not None and (
                len(answers) >= VICTIM_RUNS or time.monotonic() - first_run > 0.3
            ):
                break
            time.sleep(0.005)
        os.kill(proc.pid, signal.SIGKILL)  # the attacker's turn and a victim call in flight
        proc.wait(10)
    finally:
        stop.set()
        victim.join(10)
        attacker.join(10)
        _finish(proc)
    ran = {p.name for p in markers.iterdir()}
    assert ran or answers, "the victim got nothing done before the deadline"
    rows = list(read_rows(journal))
    assert verify_files([journal]).ok
    allowed = {r["trace"] for r in rows if r["event"] == "decide" and r["verdict"] == "ALLOW"}
    refused = {r["trace"] for r in rows if r["event"] == "dispatch"}
    # The tool ran only on a committed ALLOW, never after a refusal was recorded.
    assert ran <= allowed, f"tool runs without their ALLOW on disk: {sorted(ran - allowed)}"
    assert not ran & refused
    for marker, body in answers.items():
        v = body["verdict"]
        if v["kind"] == "ALLOW":
            assert body["result"]["status"] == "OK", body
            assert marker in ran and marker in allowed, (marker, body)
        else:  # a refusal is a refusal: no tool ran behind it
            assert marker not in ran, (marker, body)
            assert (v["kind"], v["reason"]) == ("DENY", "JOURNAL_DOWN"), body
    # The attacker's trace is stored bounded, never as 60 KB per row.
    assert all(len(r["trace"]) <= 256 for r in rows)
    attacker_rows = [r for r in rows if r["trace"] == stored_text("a" * TRACE_BYTES)]
    assert len(attacker_rows) < TOOL_MESSAGES  # refused past the per-request bound
