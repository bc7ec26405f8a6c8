"""``fak flow``: preflight a flow into a frozen manifest, verify a manifest, show its projection.

Registered through the ``fak.commands`` entry point group (``register(subparsers)``).
Exit codes: 0 success, 1 a failed preflight or a refused manifest (the structured
result is printed as JSON on stdout), 2 unusable arguments or files.
"""

from __future__ import annotations

import argparse
import json
import sys
import uuid
from pathlib import Path
from typing import Any

from fak_core.flow.manifest import ManifestError
from fak_core.flow.preflight import STEPS, ExistingFlow, preflight
from fak_core.flow.projection import project
from fak_core.flow.runner import RunnerRefused, load_verified_manifest

__all__ = ["register"]


def _print_json(doc: Any) -> None:
    sys.stdout.write(json.dumps(doc, indent=2, ensure_ascii=False) + "\n")


def _progress(number: int, name: str, status: str) -> None:
    if status == "running":
        print(f"[{number}/{len(STEPS)}] {name} ...", file=sys.stderr, flush=True)
    else:
        print(f"[{number}/{len(STEPS)}] {name}: {status}", file=sys.stderr, flush=True)


def _preflight(ns: argparse.Namespace) -> int:
    task_id = ns.task or f"task-{uuid.uuid4().hex[:12]}"
    outcome = preflight(
        ExistingFlow(Path(ns.flow), ns.flow_version),
        identity=ns.identity,
        workspace=Path(ns.workspace),
        task_id=task_id,
        on_progress=None if ns.quiet else _progress,
    )
    if not outcome.ok or outcome.manifest is None:
        _print_json(outcome.to_dict())
        if outcome.repair is not None:
            r = outcome.repair
            print(
                f"fak: preflight failed at step {r.number} ({r.step}): {r.reason}", file=sys.stderr
            )
            for change in r.changes:
                print(f"  fix: {change}", file=sys.stderr)
        return 1
    out = Path(ns.out)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(outcome.manifest.to_json(), encoding="utf-8")
        digest_file = out.with_name(out.name + ".sha256")
        digest_file.write_text(outcome.manifest.digest + "\n", encoding="utf-8")
    except OSError as exc:
        print(f"fak: cannot write {out}: {exc.strerror}", file=sys.stderr)
        return 2
    print(f"{outcome.manifest.digest}  {out}")
    return 0


def _load(ns: argparse.Namespace) -> Any:
    try:
        return load_verified_manifest(ns.manifest, ns.digest)
    except RunnerRefused as exc:
        _print_json({"ok": False, "findings": [f.to_dict() for f in exc.findings]})
        print(f"fak: {exc}", file=sys.stderr)
        return 1
    except ManifestError as exc:
        print(f"fak: {exc}", file=sys.stderr)
        return 2


def _verify(ns: argparse.Namespace) -> int:
    manifest = _load(ns)
    if isinstance(manifest, int):
        return manifest
    print(f"ok: {ns.manifest} {manifest.digest}")
    return 0


def _show(ns: argparse.Namespace) -> int:
    manifest = _load(ns)
    if isinstance(manifest, int):
        return manifest
    try:
        _print_json(project(manifest))
    except ManifestError as exc:
        print(f"fak: {exc}", file=sys.stderr)
        return 1
    return 0


def register(subparsers: Any) -> None:
    """Add ``fak flow`` and its actions to the ``fak`` parser."""
    flow = subparsers.add_parser("flow", help="preflight, freeze and verify agent flows")
    sub = flow.add_subparsers(dest="flow_command", metavar="ACTION", required=True)

    pre = sub.add_parser("preflight", help="re-check a flow and write its frozen manifest")
    pre.add_argument("flow", help="flow file (.json, .toml, .yaml)")
    pre.add_argument("--workspace", required=True, help="workspace file (users, grants, versions)")
    pre.add_argument("--identity", required=True, help="the user the task runs as")
    pre.add_argument("--out", default="flow-manifest.json", help="manifest file to write")
    pre.add_argument("--task", help="task id (default: a fresh random id)")
    pre.add_argument("--flow-version", help="label of the chosen flow version (recorded)")
    pre.add_argument("--quiet", action="store_true", help="do not show step progress")
    pre.set_defaults(func=_preflight)

    ver = sub.add_parser("verify", help="re-validate a manifest as the runner does")
    ver.add_argument("manifest")
    ver.add_argument("--digest", help="the digest the execution specification expects")
    ver.set_defaults(func=_verify)

    show = sub.add_parser("show", help="print the UI projection of a verified manifest")
    show.add_argument("manifest")
    show.add_argument("--digest", help="the digest the execution specification expects")
    show.set_defaults(func=_show)
