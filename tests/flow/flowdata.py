"""Shared test data: the shipped example flow and workspace, as documents and objects."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from fak_core.flow import FileWorkspace, flow_to_dict, load_flow
from fak_core.flow.model import load_document

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "flow"
_FLOW_DOC = flow_to_dict(load_flow(EXAMPLE / "flow.yaml"))
_WS_DOC = load_document(EXAMPLE / "workspace.yaml")


def example_flow_doc() -> dict[str, Any]:
    return copy.deepcopy(_FLOW_DOC)


def example_workspace_doc() -> dict[str, Any]:
    return copy.deepcopy(_WS_DOC)


def workspace(doc: dict[str, Any] | None = None) -> FileWorkspace:
    return FileWorkspace(doc if doc is not None else example_workspace_doc(), "ws", EXAMPLE)
