"""The capability floor: the rank-100 monitor that allows only what the policy allows.

Order of checks: the deny map; unparseable arguments; self-modification (a write-shaped
tool aimed at a protected path); per-argument rules; denied egress hosts (every string
argument, read by ``fak_core.hosts`` in canonical form); then, for an
allowed tool, redaction (TRANSFORM) or ALLOW; everything else is DEFAULT_DENY. Under the
opt-in posture ``admit_and_log`` a default deny becomes an ALLOW that records it.
"""

from __future__ import annotations

import fnmatch
import posixpath
import re
from typing import Any

import orjson

from fak_core.hosts import HostDenyList
from fak_core.nonblocking import nonblocking
from fak_core.policy import ArgRule, Policy
from fak_core.reasons import Reason, ReasonRegistry
from fak_core.verdicts import Verdict
from fak_core.view import CallView

__all__ = ["CapabilityFloor", "glob_matches", "is_write_shaped"]

BY = "floor"
_ALLOWED = Verdict.allow(BY)
_WRITE = re.compile(r"write|edit|delete|patch|put|exec|run|modify|create|move|rename|remove|save")
_PATH_KEYS = (
    "path",
    "file_path",
    "filePath",
    "filepath",
    "file",
    "target",
    "filename",
    "dir",
    "directory",
    "destination",
)


def is_write_shaped(tool: str) -> bool:
    """Whether a tool name says it writes, edits, deletes, runs or creates something."""
    return bool(_WRITE.search(tool.lower()))


def glob_matches(path: str, glob: str, anchored: bool = False) -> bool:
    """Whether ``glob`` matches ``path`` (``anchored``) or else any trailing part of it.

    A glob ending in ``/`` covers everything under that directory. Paths are normalised
    first, so ``a/../fak_core/x`` and ``./fak_core/x`` are both under ``fak_core/``.
    """
    p = posixpath.normpath(path.replace("\\", "/"))
    pattern = glob + "*" if glob.endswith("/") else glob
    if anchored:
        return fnmatch.fnmatchcase(p, pattern)
    parts = p.split("/")
    return any(fnmatch.fnmatchcase("/".join(parts[i:]), pattern) for i in range(len(parts)))


@nonblocking
class CapabilityFloor:
    """The default-deny monitor over one :class:`Policy`."""

    def __init__(self, policy: Policy, reasons: ReasonRegistry | None = None) -> None:
        self.reasons = reasons if reasons is not None else ReasonRegistry()
        self._write_memo: dict[str, bool] = {}
        self.set_policy(policy)

    def set_policy(self, policy: Policy) -> None:
        code = self.reasons.code
        self.policy = policy
        self._deny = {tool: code(name) for tool, name in policy.deny.items()}
        self._allow = frozenset(policy.allow)
        self._prefixes = tuple(policy.allow_prefix)
        self._globs = tuple(policy.self_modify_globs)
        self._redact = frozenset(f.lower() for f in policy.redact_fields)
        # every string in the arguments is read as a URL and as a host (fak_core.hosts)
        self._hosts = HostDenyList(policy.deny_hosts) if policy.deny_hosts else None
        rules: dict[str, list[tuple[ArgRule, Any, int]]] = {}
        for r in policy.arg_rules:
            compiled = re.compile(r.deny_regex) if r.deny_regex is not None else None
            rules.setdefault(r.tool.lower(), []).append((r, compiled, code(r.reason)))
        self._rules = rules
        self._log_only = policy.posture == "admit_and_log"

    def adjudicate(self, view: CallView) -> Verdict:
        tool = view.call.tool
        denied = self._deny.get(tool)
        if denied is not None:
            return Verdict.deny(denied, BY, claim=f"policy denies tool {tool}")
        args = view.args()
        if args is None:
            return Verdict.deny(Reason.MALFORMED, BY, claim="arguments are not a JSON object")
        if self._globs and self._write_shaped(tool):
            v = self._self_modify(args)
            if v is not None:
                return v
        if self._rules:
            rules = self._rules.get(tool.lower())
            if rules:
                v = self._arg_rules(rules, args)
                if v is not None:
                    return v
        if self._hosts is not None:
            why = self._hosts.refusal(args)
            if why is not None:
                return Verdict.deny(Reason.EGRESS_BLOCK, BY, claim=why)
        if tool in self._allow or (self._prefixes and tool.startswith(self._prefixes)):
            redact = self._redact
            if redact and self._names_redacted(args):
                kept = {k: v for k, v in args.items() if k.lower() not in redact}
                return Verdict.transform(
                    orjson.dumps(kept).decode("utf-8"),
                    BY,
                    meta={"redacted": ",".join(sorted(k for k in args if k not in kept))},
                )
            return _ALLOWED
        if self._log_only:
            return Verdict.allow(
                BY, meta={"posture": "admit_and_log", "would_deny": "DEFAULT_DENY"}
            )
        return Verdict.deny(Reason.DEFAULT_DENY, BY, claim=f"no policy rule allows tool {tool}")

    def _names_redacted(self, args: dict[str, Any]) -> bool:
        redact = self._redact
        # most keys are lower case already: skip the .lower() copy then (a loop beats any())
        for key in args:  # noqa: SIM110
            if key in redact or (not key.islower() and key.lower() in redact):
                return True
        return False

    def _write_shaped(self, tool: str) -> bool:
        # memoised per floor: tool names repeat; the memo is bounded and private
        memo = self._write_memo
        hit = memo.get(tool)
        if hit is None:
            if len(memo) >= 4096:
                memo.clear()
            hit = memo[tool] = is_write_shaped(tool)
        return hit

    def _self_modify(self, args: dict[str, Any]) -> Verdict | None:
        for key in _PATH_KEYS:
            path = args.get(key)
            if isinstance(path, str) and path:
                for glob in self._globs:
                    if glob_matches(path, glob):
                        return Verdict.deny(Reason.SELF_MODIFY, BY, claim=glob)
                return None
        return None

    def _arg_rules(
        self, rules: list[tuple[ArgRule, Any, int]], args: dict[str, Any]
    ) -> Verdict | None:
        for rule, regex, reason in rules:
            present = rule.arg in args
            value = args.get(rule.arg)
            text = (
                value
                if isinstance(value, str)
                else (orjson.dumps(value).decode("utf-8") if present else "")
            )
            if rule.allow_glob is not None:
                if (
                    not present
                    or not isinstance(value, str)
                    or not glob_matches(value, rule.allow_glob, anchored=True)
                ):
                    return Verdict.deny(
                        reason, BY, claim=f"{rule.arg} must match {rule.allow_glob}"
                    )
            elif regex is not None:
                if present and regex.search(text):
                    return Verdict.deny(reason, BY, claim=f"{rule.arg} matches {rule.deny_regex}")
            elif (
                rule.max_bytes is not None
                and present
                and len(text.encode("utf-8")) > rule.max_bytes
            ):
                return Verdict.deny(reason, BY, claim=f"{rule.arg} is over {rule.max_bytes} bytes")
        return None
