"""A ``--tools`` module for ``fak serve`` tests: ``nap`` sleeps far past any test timeout."""

from __future__ import annotations

import time
from typing import Any


def nap(args: dict[str, Any]) -> str:
    time.sleep(120)
    return "woke"


TOOLS = {"nap": nap, "ping": lambda args: "pong"}
