"""``fak serve --tool-timeout/--decide-timeout/--max-tool-calls`` end to end: a tool that
sleeps for two minutes is an error result after the timeout, the gateway keeps serving, and
the stuck worker thread does not keep the process from stopping."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
from pathlib import Path

import httpx

LINE = re.compile(r"^fak serve: listening on (http://127\.0\.0\.1:\d+) ")


def test_stuck_tool_times_out_and_the_server_still_stops(tmp_path: Path) -> None:
    policy = tmp_path / "policy.json"
    policy.write_text(json.dumps({"version": "fak-policy/v1", "allow": ["nap", "ping"]}))
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "fak_core.gateway.cli",
            "--port",
            "0",
            "--policy",
            str(policy),
            "--tools",
            "tests.fuzz.nap_tools",
            "--tool-timeout",
            "0.5",
            "--decide-timeout",
            "2",
            "--max-tool-calls",
            "8",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": os.getcwd()},
    )
    try:
        box: list[str] = []
        reader = threading.Thread(target=lambda: box.append(proc.stdout.readline()))  # type: ignore[union-attr]
        reader.start()
        reader.join(30)
        m = LINE.match(box[0] if box else "")
        assert m, f"no start-up line: {box}"
        url = m.group(1)
        r = httpx.post(url + "/v1/fak/syscall", json={"tool": "nap"}, timeout=20)
        assert r.status_code == 200
        body = r.json()
        assert body["verdict"]["kind"] == "ALLOW"
        assert body["result"]["status"] == "ERROR"
        assert body["result"]["meta"]["error"] == "tool 'nap' timed out after 0.5s"
        ping = httpx.post(url + "/v1/fak/syscall", json={"tool": "ping"}, timeout=20)
        assert ping.json()["result"]["content"] == "pong"
        assert httpx.get(url + "/healthz", timeout=20).status_code == 200
        proc.send_signal(signal.SIGTERM)
        # uvicorn re-raises the signal after a clean shutdown; the nap has ~2 minutes left
        assert proc.wait(20) in (0, -signal.SIGTERM), "the stuck tool kept the gateway up"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        assert proc.stdout is not None and proc.stderr is not None
        proc.stdout.close()
        err = proc.stderr.read()
        proc.stderr.close()
        assert "Traceback" not in err, err
