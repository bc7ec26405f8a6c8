"""The ``fak`` command line: subcommands are found through the ``fak.commands`` entry points.

Each entry point names a module with ``register(subparsers)``; the kernel's own
commands (``policy``) live here. ``fak_core`` never imports the plugin: ``fak proofs``
arrives through the entry point that ``pytest_fak`` declares.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from importlib.metadata import entry_points
from typing import Any

from fak_core import __version__
from fak_core.policy import (
    Policy,
    PolicyError,
    default_policy,
    dump_policy,
    load_policy,
    policy_digest,
)

__all__ = ["main"]

#: the gateway's libraries: the ``gateway`` extra (``fak serve``, ``fak mcp``, ``fak mcp-proxy``)
_GATEWAY_LIBS = frozenset(
    {"starlette", "uvicorn", "httpx", "httpx_aiohttp", "aiohttp", "httpx_sse", "mcp", "anyio"}
)
_GATEWAY_HINT = "pip install 'pytest-fak[gateway]'"


def _missing_gateway_lib(exc: BaseException) -> str | None:
    """The gateway library whose absence raised ``exc``, if that is what it is."""
    if isinstance(exc, ModuleNotFoundError) and exc.name:
        top = exc.name.split(".", 1)[0]
        if top in _GATEWAY_LIBS:
            return top
    return None


def _needs_gateway(command: str, lib: str) -> str:
    return (
        f"fak {command}: the gateway's libraries are not installed ({lib} is missing); "
        f"install them with: {_GATEWAY_HINT}"
    )


def _load(path: str | None) -> Policy | None:
    """The policy at ``path`` (the built-in one if none); None after printing the error."""
    try:
        return load_policy(path) if path else default_policy()
    except PolicyError as exc:
        print(f"fak: {exc}", file=sys.stderr)
        return None


def _policy_check(ns: argparse.Namespace) -> int:
    policy = _load(ns.file)
    if policy is None:
        return 2
    print(f"ok: {ns.file or 'default policy'} {policy_digest(policy)}")
    for line in explain_sinks(policy):
        print(line)
    from fak_core.sinks import guess_warning

    warning = guess_warning(policy)
    if warning is not None:
        print(f"warning: {warning}")
    return 0


def explain_sinks(policy: Policy) -> list[str]:
    """Tool by tool, the sink class the gate gives each tool the policy names, and why;
    for a declared tool also its grounded arguments, whether an ungrounded call is held for
    approval, and the result fields it declares identifiers and confidential."""
    from fak_core.sinks import sink_class

    gated = set(policy.gated_sinks)
    names = sorted(set(policy.allow) | set(policy.tools) | set(policy.sources))
    lines = [f"sinks: gated {', '.join(policy.gated_sinks) or '(none)'}"]
    for tool in names:
        sink, why = sink_class(policy, tool, None)
        decl = policy.tools.get(tool)
        note = {
            "declared": "declared",
            "heuristic": "by the name heuristics",
            "strict_sinks": "undeclared, a sink under strict_sinks",
        }[why]
        state = "not a sink" if sink == "NONE" else ("gated" if sink in gated else "not gated")
        if sink == "UNDECLARED":
            state = "gated"
        extra = ""
        if decl is not None and (decl.destinations or decl.content):
            extra = f"; grounded: {', '.join((*decl.destinations, *decl.content))}"
        elif why == "heuristic":
            extra = "; EGRESS too when an argument names a URL, e-mail address or host"
        if decl is not None:
            if decl.approve:
                grounds = decl.destinations or decl.content
                extra += "; ungrounded: held for approval" if grounds else "; held for approval"
            if decl.identifiers:
                extra += f"; identifiers: {', '.join(decl.identifiers)}"
            if decl.confidential:
                extra += f"; confidential: {', '.join(decl.confidential)}"
        lines.append(f"  {tool}: {sink} ({note}, {state}{extra})")
    if policy.allow_prefix:
        lines.append(
            f"  tools under allow_prefix {', '.join(policy.allow_prefix)}: "
            + (
                "sinks under strict_sinks unless declared"
                if policy.strict_sinks
                else "classified by the name heuristics and their arguments"
            )
        )
    return lines


def _policy_dump(ns: argparse.Namespace) -> int:
    policy = _load(ns.file)
    if policy is None:
        return 2
    sys.stdout.write(dump_policy(policy, ns.format))
    return 0


def _decide(ns: argparse.Namespace) -> int:
    from fak_core.calls import ToolCall
    from fak_core.kernel import Kernel

    policy = _load(ns.policy)
    if policy is None:
        return 2
    kernel = Kernel(policy)
    v = kernel.decide(ToolCall(ns.tool, ns.args, ns.trace or "cli"))
    out = {
        "kind": kernel.kinds.name(v.kind),
        "reason": kernel.reasons.name(v.reason),
        "by": v.by,
        "claim": v.claim,
    }
    if v.repaired_args is not None:
        out["repaired_arguments"] = v.repaired_args
    print(json.dumps(out))
    return 0


def _approve(ns: argparse.Namespace) -> int:
    from fak_core.approvals import APPROVAL_ENV, approval_key_from_env, mint_approval

    try:
        key = approval_key_from_env()
        json.loads(ns.args)
    except (ValueError, json.JSONDecodeError) as exc:
        print(f"fak: {exc}", file=sys.stderr)
        return 2
    if key is None:
        print(f"fak: set {APPROVAL_ENV} to the gateway's approval key", file=sys.stderr)
        return 2
    print(mint_approval(key, ns.trace, ns.tool, ns.args, ns.ttl))
    return 0


def _journal_verify(ns: argparse.Namespace) -> int:
    from fak_core.journal import JournalError, verify_chains

    try:
        chains = verify_chains(ns.files)
    except JournalError as exc:
        print(f"fak: {exc}", file=sys.stderr)
        return 2
    if len(chains) == 1 and not chains[0][0]:  # one lone gateway's chain
        print(chains[0][1].describe())
    for replica, report in chains if len(chains) > 1 or chains[0][0] else ():
        print(f"replica {replica or '(none)'}: {report.describe()}")
    return 0 if all(report.ok for _, report in chains) else 1


def _journal_rows(ns: argparse.Namespace) -> int:
    from itertools import islice

    from fak_core.journal import JournalError, read_rows

    try:
        rows = list(read_rows(ns.file))
    except JournalError as exc:
        print(f"fak: {exc}", file=sys.stderr)
        return 2
    if ns.journal_command == "tail":
        rows = rows[-ns.n :] if ns.n > 0 else []
        for row in rows:
            print(
                f"{row['seq']:>8} {row['ts']} {row['event']:<11} {row['trace']:<16} "
                f"{row['tool']:<24} {row['verdict']}/{row['reason']} by {row['by']}"
            )
    else:
        for row in islice(rows, None):
            print(json.dumps(row, sort_keys=True))
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="fak", description="tool-call adjudication kernel")
    parser.add_argument("--version", action="version", version=f"fak {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    pol = sub.add_parser("policy", help="check or print a policy file")
    psub = pol.add_subparsers(dest="policy_command", metavar="ACTION", required=True)
    chk = psub.add_parser("check", help="validate a policy file and print its digest")
    chk.add_argument("file", nargs="?", help="policy file (.json or .toml); default: built in")
    chk.set_defaults(func=_policy_check)
    dmp = psub.add_parser("dump", help="print a policy in canonical form")
    dmp.add_argument("file", nargs="?", help="policy file; default: the built-in policy")
    dmp.add_argument("--format", choices=("json", "toml"), default="json")
    dmp.set_defaults(func=_policy_dump)

    dec = sub.add_parser("decide", help="adjudicate one tool call in-process")
    dec.add_argument("tool")
    dec.add_argument("args", nargs="?", default="{}", help="arguments as JSON text")
    dec.add_argument("--policy", help="policy file; default: the built-in policy")
    dec.add_argument("--trace", help="trace id")
    dec.set_defaults(func=_decide)

    apr = sub.add_parser(
        "approve", help="mint a single-use approval token for one call (key: FAK_APPROVAL_KEY)"
    )
    apr.add_argument("--trace", required=True, help="the session (trace id) of the call")
    apr.add_argument("--tool", required=True)
    apr.add_argument("--args", default="{}", help="the call's arguments as JSON text")
    apr.add_argument("--ttl", type=float, default=300.0, help="seconds it stays valid")
    apr.set_defaults(func=_approve)

    jr = sub.add_parser("journal", help="verify or read a decision journal")
    jsub = jr.add_subparsers(dest="journal_command", metavar="ACTION", required=True)
    ver = jsub.add_parser("verify", help="check the hash chain; name the first broken row")
    ver.add_argument(
        "files",
        nargs="+",
        help="journal file(s), oldest first when rotated; several replicas' files are "
        "verified as one chain per replica",
    )
    ver.set_defaults(func=_journal_verify)
    tail = jsub.add_parser("tail", help="print the last rows")
    tail.add_argument("file")
    tail.add_argument("-n", type=int, default=20, help="how many rows (default 20)")
    tail.set_defaults(func=_journal_rows)
    exp = jsub.add_parser("export", help="print every row as JSON lines")
    exp.add_argument("file")
    exp.add_argument("--jsonl", action="store_true", default=True, help="JSON lines (the default)")
    exp.set_defaults(func=_journal_rows)

    for ep in sorted(entry_points(group="fak.commands"), key=lambda e: e.name):
        try:
            module = ep.load()
        except Exception as exc:  # a broken extension must not take the CLI down
            lib = _missing_gateway_lib(exc)
            if lib is None:
                print(f"fak: command {ep.name!r} could not load: {exc}", file=sys.stderr)
            else:
                _stub(sub, ep.name, lib)
            continue
        module.register(sub)
    return parser


def _stub(sub: Any, name: str, lib: str) -> None:
    """``fak <name>`` whose module needs the gateway extra: it says how to install it."""
    message = _needs_gateway(name, lib)

    def run(ns: argparse.Namespace) -> int:
        print(message, file=sys.stderr)
        return 2

    run.takes_any_arguments = True  # type: ignore[attr-defined]
    p = sub.add_parser(name, help=f"(not installed: {_GATEWAY_HINT})", add_help=False)
    p.set_defaults(func=run)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    ns, extra = parser.parse_known_args(argv)
    func = getattr(ns, "func", None)
    if extra and not getattr(func, "takes_any_arguments", False):
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    if func is None:
        parser.print_help()
        return 2
    try:
        return int(func(ns))
    except ModuleNotFoundError as exc:
        lib = _missing_gateway_lib(exc)
        if lib is None:
            raise
        print(_needs_gateway(str(ns.command), lib), file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
