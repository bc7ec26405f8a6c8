"""A ``--tools`` module for the gateway tests: TOOLS, SCHEMAS and SOURCES."""

from __future__ import annotations

from typing import Any


def get_user_details(args: dict[str, Any]) -> dict[str, Any]:
    return {"user": args.get("user_id", "")}


def echo(args: dict[str, Any]) -> dict[str, Any]:
    return {"echo": args}


TOOLS = {"get_user_details": get_user_details, "echo": echo}
SCHEMAS = {"echo": {"type": "object"}}
SOURCES = {"echo": "untrusted"}
