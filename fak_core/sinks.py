"""Sink classification and the sink gate: tainted sessions cannot reach gated sinks.

A call is an EXEC, DESTRUCTIVE or EGRESS sink by its name, or EGRESS by an external
destination anywhere in its arguments (a URL, an e-mail address, a dotted host name, an
IPv4 address). The gate denies a gated sink on a tainted or quarantined trace with
DENY/TRUST_VIOLATION and a claim naming the sink and the flow, unless the policy
authorises that tool for that sink. It only ever denies or defers; allowing is the floor's job.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from enum import StrEnum
from typing import Any

from fak_core.hosts import names_network_host
from fak_core.ledger import TaintLedger
from fak_core.nonblocking import nonblocking
from fak_core.policy import Policy
from fak_core.reasons import Reason
from fak_core.taint import Taint
from fak_core.verdicts import Verdict
from fak_core.view import CallView

__all__ = [
    "Sink",
    "SinkGate",
    "classify",
    "external_destinations",
    "has_external_destination",
    "looks_external",
]

BY = "ifc-sink"
_NO_OPINION = Verdict.defer(BY)
_AUTHORIZED = Verdict.defer(BY + "(authorized)")


class Sink(StrEnum):
    NONE = "NONE"
    EXEC = "EXEC"
    DESTRUCTIVE = "DESTRUCTIVE"
    EGRESS = "EGRESS"


_EXEC = re.compile(r"exec|shell|bash|eval|run_command|spawn|system|subprocess")
_DESTRUCTIVE = re.compile(r"delete|remove|rm_|drop|truncate|destroy|purge|wipe")
_EGRESS = re.compile(
    r"send|email|mail|http|post|fetch|upload|webhook|publish|exfil|tweet|slack|notify|"
    r"forward|sms|request|curl|wget"
)
_DEST_KEYS = frozenset(
    {
        "url",
        "uri",
        "endpoint",
        "to",
        "cc",
        "bcc",
        "recipient",
        "recipients",
        "dest",
        "destination",
        "address",
        "webhook",
        "callback",
        "host",
        "server",
    }
)
# Path-like keys name files: only a network URL under one of them is a destination.
_PATH_KEYS = frozenset(
    {
        "path",
        "file",
        "file_path",
        "filepath",
        "filename",
        "dir",
        "directory",
        "cwd",
        "glob",
        "pattern",
        "source",
        "src",
    }
)
# A dotted word ending in one of these is a file name, not a host name.
_FILE_SUFFIXES = frozenset(
    {
        "txt",
        "md",
        "rst",
        "py",
        "pyi",
        "json",
        "yaml",
        "yml",
        "toml",
        "ini",
        "cfg",
        "conf",
        "csv",
        "tsv",
        "log",
        "lock",
        "js",
        "ts",
        "tsx",
        "jsx",
        "css",
        "html",
        "htm",
        "xml",
        "sh",
        "go",
        "rs",
        "c",
        "h",
        "cpp",
        "java",
        "rb",
        "php",
        "sql",
        "pdf",
        "png",
        "jpg",
        "jpeg",
        "gif",
        "svg",
        "zip",
        "gz",
        "tar",
        "tgz",
        "whl",
        "ipynb",
        "env",
        "bak",
        "tmp",
        "out",
        "diff",
    }
)
# These run on attacker text, so none of them may backtrack: every repeat is possessive
# (``*+``, ``++``, ``?+``), which leaves each one what it would match with backtracking
# (a repeat's class never holds the character that ends it), and each is anchored, so
# one attempt per string: linear. tests/kernel/test_guards.py compares every pattern with
# its backtracking original on generated strings.
# local@domain, the domain holding a dot that is neither its first nor its last character
_EMAIL = re.compile(r"^[^@\s]++@[^@\s][^@\s.]*+\.[^@\s]++$")
# a label is taken only when another label follows its dot, so the last one is the TLD
_HOST = re.compile(
    r"^(?:[a-z0-9-]++\.(?=[a-z0-9-]))++[a-z]{2,63}+\.?+(?::\d++)?+(?:/\S*+)?+$", re.I
)


def looks_external(value: str, keyed: bool) -> bool:
    """Whether a string names somewhere outside the process.

    Under a destination key (``keyed``) anything but a bare word counts; elsewhere the
    whole value must be a URL, an e-mail address, a dotted host or an IPv4 address.
    """
    v = value.strip()
    if not v:
        return False
    if keyed:
        return not v.replace("_", "").replace("-", "").isalnum() or v.isdigit()
    if " " in v or not ("." in v or "@" in v or ":" in v or not v.isascii()):
        return False
    if _HOST.match(v) and v.rsplit(".", 1)[-1].lower() in _FILE_SUFFIXES and "/" not in v:
        return False
    # URLs, IP addresses and host names are read by the kernel's one host canonicaliser
    return bool(_EMAIL.match(v) or "xn--" in v.lower() or names_network_host(v))


def _is_destination(value: str, key: str) -> bool:
    low = key.lower()
    if low in _PATH_KEYS:
        url = value.lstrip().lower()
        return not url.startswith("file:") and names_network_host(value, bare=False)
    return looks_external(value, key in _DEST_KEYS or low in _DEST_KEYS)


def external_destinations(args: Any, first_only: bool = False) -> list[str]:
    """Every string in ``args`` (at any depth) that names an external destination."""
    found: list[str] = []
    stack: list[tuple[Any, str]] = [(args, "")]
    pop, push = stack.pop, stack.append
    while stack:
        value, key = pop()
        if type(value) is str:
            if _is_destination(value, key):
                found.append(value)
                if first_only:
                    break
        elif type(value) is dict:
            for k, v in value.items():
                push((v, k))
        elif type(value) is list:
            for v in value:
                push((v, key))
    return found


def has_external_destination(args: Any) -> bool:
    """Whether any string in ``args`` names an external destination (stops at the first)."""
    return bool(external_destinations(args, first_only=True))


def classify(tool: str, args: Any, safe_sinks: Iterable[str] = ()) -> Sink:
    """EXEC, then DESTRUCTIVE by name; then EGRESS by destination or name; else NONE."""
    name = tool.lower()
    if _EXEC.search(name):
        return Sink.EXEC
    if _DESTRUCTIVE.search(name):
        return Sink.DESTRUCTIVE
    if args is not None and has_external_destination(args):
        return Sink.EGRESS
    if _EGRESS.search(name) and tool not in safe_sinks:
        return Sink.EGRESS
    return Sink.NONE


@nonblocking
class SinkGate:
    """The control-plane half of IFC: deny gated sinks on tainted traces."""

    def __init__(self, ledger: TaintLedger, policy: Policy | None = None) -> None:
        self.ledger = ledger
        self.set_policy(policy if policy is not None else Policy())

    def set_policy(self, policy: Policy) -> None:
        self._safe = frozenset(policy.safe_sinks)
        self._gated = frozenset(Sink(s) for s in policy.gated_sinks)
        self._authorized = frozenset((r.tool, Sink(r.sink)) for r in policy.authorize)

    def adjudicate(self, view: CallView) -> Verdict:
        call = view.call
        flow = self.ledger.level(call.trace_id)
        if call.args_taint == Taint.QUARANTINED:
            flow = Taint.QUARANTINED
        if flow == Taint.TRUSTED:
            return _NO_OPINION
        sink = classify(call.tool, view.args(), self._safe)
        if sink is Sink.NONE or sink not in self._gated:
            return _NO_OPINION
        if (call.tool, sink) in self._authorized:
            return _AUTHORIZED
        return Verdict.deny(
            Reason.TRUST_VIOLATION,
            BY,
            claim=f"{sink.value} sink fed {flow.label} data",
            meta={"ifc_sink": sink.value, "ifc_flow": flow.label},
        )
