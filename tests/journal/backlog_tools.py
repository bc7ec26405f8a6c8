"""A victim tool for the journal backlog attack (``fak serve --tools``): each run leaves a
marker file named after the call's ``marker`` argument in ``$FAK_TEST_MARKERS``, so the
test can see which tool runs happened, whatever the gateway answered."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

SCHEMAS = {
    "get_user_details": {
        "type": "object",
        "properties": {"marker": {"type": "string", "pattern": "^[a-z0-9-]{1,40}$"}},
        "required": ["marker"],
    }
}


def get_user_details(args: dict[str, Any]) -> dict[str, str]:
    marker = Path(os.environ["FAK_TEST_MARKERS"]) / str(args["marker"])
    with open(marker, "x") as f:  # the side effect: this run happened
        f.write("ran")
        f.flush()
        os.fsync(f.fileno())
    return {"user": "victim", "marker": marker.name}


TOOLS = {"get_user_details": get_user_details}
