"""Sink classification and the sink gate: tainted sessions cannot reach gated sinks.

A call is an EXEC, DESTRUCTIVE or EGRESS sink by its name, or EGRESS by an external
destination anywhere in its arguments (a URL, an e-mail address, a dotted host name, an
IPv4 address). The gate denies a gated sink on a tainted or quarantined trace with
DENY/TRUST_VIOLATION and a claim naming the sink and the flow, unless the policy
authorises that tool for that sink. It only ever denies or defers; allowing is the floor's job.

The name heuristics read a tool's name as words (snake_case, camelCase, kebab-case,
dotted) and call it a sink when a word is a side-effecting verb: the CRUD writes (create,
add, update, set, ...), communication (send, reply, comment, share, invite, ...),
publication and transfer (push, publish, upload, transfer, pay, ...), in base, ``-ed`` and
``-ing`` forms; a write to a system others read carries the session's data out of it, so
these are EGRESS. A guess is only a guess: :func:`guessed_sinks` names every tool a policy
leaves to it, and :func:`guess_warning` says so when the policy loads.

A ``fak-policy/v2`` declaration overrides the name heuristics for its tool: its sink
class (``NONE``: never a sink), and its destination arguments (JSON Pointers). A declared
sink with destinations is let through a tainted session when every destination value is
grounded (:class:`fak_core.grounding.GroundingStore`) or in the tool's destination
allow-list; otherwise it is denied with a claim naming the argument, the value and where
the value came from. Under ``strict_sinks`` (a v2 policy's default) every undeclared tool
is a gated sink.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from enum import StrEnum
from typing import Any

from fak_core.confidential import ConfidentialStore, leaves
from fak_core.grounding import (
    GroundingStore,
    NotAnIndex,
    canonical_value,
    destination_pieces,
    is_missing,
    resolve_pointer,
)
from fak_core.hosts import names_network_host
from fak_core.ledger import TaintLedger
from fak_core.linkviews import MAX_LINK_TEXT, TooLongToRead, decoded_views, percent_nested
from fak_core.nonblocking import nonblocking
from fak_core.policy import Policy, ToolDecl
from fak_core.reasons import Reason
from fak_core.sinkclasses import NOT_A_SINK
from fak_core.taint import Taint
from fak_core.verdicts import Verdict
from fak_core.view import CallView

__all__ = [
    "Sink",
    "SinkGate",
    "classify",
    "embedded_destinations",
    "external_destinations",
    "guess_warning",
    "guessed_sinks",
    "has_external_destination",
    "looks_external",
    "name_words",
    "sink_class",
]

BY = "ifc-sink"
_NO_OPINION = Verdict.defer(BY)
_AUTHORIZED = Verdict.defer(BY + "(authorized)")
_GROUNDED = Verdict.defer(BY + "(grounded)")
_NOTHING: frozenset[tuple[str, str]] = frozenset()
#: The sink class of an undeclared tool under ``strict_sinks`` when no heuristic names one.
UNDECLARED = "UNDECLARED"


class Sink(StrEnum):
    NONE = "NONE"
    EXEC = "EXEC"
    DESTRUCTIVE = "DESTRUCTIVE"
    EGRESS = "EGRESS"
    SPEND = "SPEND"
    CREDENTIAL = "CREDENTIAL"


_EXEC = re.compile(r"exec|shell|bash|eval|run_command|spawn|system|subprocess")
_DESTRUCTIVE = re.compile(r"delete|remove|rm_|drop|truncate|destroy|purge|wipe")
_EGRESS = re.compile(
    r"send|email|mail|http|post|fetch|upload|webhook|publish|exfil|tweet|slack|notify|"
    r"forward|sms|request|curl|wget"
)
#: Side-effecting verbs, by family (a name holding one as a word is a sink). Words that are
#: mostly nouns in tool names (order, text, call, label, tag, contact, message, report)
#: are left out; a policy
#: declares such tools (v2), and :func:`guess_warning` names every tool left to a guess.
_DESTRUCTIVE_VERBS = (
    "delete", "remove", "drop", "truncate", "destroy", "purge", "wipe", "erase", "kill",
    "terminate", "uninstall", "unlink", "revoke", "cancel", "clear", "reset", "overwrite",
)  # fmt: skip
_EGRESS_VERBS = (
    # communication
    "send", "email", "mail", "reply", "respond", "comment", "forward", "notify",
    "announce", "broadcast", "share", "invite", "mention", "tweet", "retweet", "sms", "dm",
    "ping", "cc",
    # publication and transfer of data
    "post", "publish", "upload", "push", "export", "sync", "submit", "transmit", "deploy",
    "release", "emit", "fetch", "request", "download", "webhook",
    # CRUD writes: a write to a system others read carries the session's data out of it
    "create", "add", "insert", "write", "update", "edit", "modify", "set", "put", "patch",
    "append", "save", "commit", "merge", "rename", "move", "copy", "assign",
    "grant", "enable", "disable", "schedule", "book", "reserve", "register", "subscribe",
    "unsubscribe", "follow", "unfollow", "fork", "approve", "reject", "accept", "decline",
    "archive", "restore", "upsert", "configure", "install", "replace", "react", "vote",
    "upvote",
    # moving money or goods
    "transfer", "pay", "purchase", "buy", "sell", "refund", "withdraw", "deposit", "charge",
    "donate", "checkout", "invoice",
)  # fmt: skip


def _forms(verbs: Iterable[str]) -> frozenset[str]:
    """Each verb in its base, ``-ed`` and ``-ing`` forms (regular English spelling, the
    final consonant doubled too), never the ``-s`` form (the plural of a noun: comments)."""
    out: set[str] = set()
    for v in verbs:
        stem = v[:-1] if v.endswith("e") else v
        out.update((v, stem + "ed", stem + "ing", v + v[-1] + "ed", v + v[-1] + "ing"))
        if v.endswith("y"):
            out.add(v[:-1] + "ied")
    return frozenset(out)


_DESTRUCTIVE_WORDS = _forms(_DESTRUCTIVE_VERBS)
_EGRESS_WORDS = _forms(_EGRESS_VERBS)


def name_words(name: str) -> list[str]:
    """The words of a tool name, lower case: split at every character that is not a
    letter or digit, between a lower-case letter or digit and an upper-case one
    (``sendMail``), before the last capital of a run followed by a lower-case letter
    (``HTTPServer``: ``http``, ``server``), and between letters and digits; linear."""
    words: list[str] = []
    cur: list[str] = []
    n = len(name)
    for i, ch in enumerate(name):
        if not ch.isalnum():
            if cur:
                words.append("".join(cur).lower())
                cur = []
            continue
        if cur:  # the character before this one is in the word, a letter or a digit
            prev = name[i - 1]
            if (
                (ch.isupper() and (prev.islower() or prev.isdigit()))
                or (ch.isupper() and prev.isupper() and i + 1 < n and name[i + 1].islower())
                or (ch.isdigit() != prev.isdigit())
            ):
                words.append("".join(cur).lower())
                cur = []
        cur.append(ch)
    if cur:
        words.append("".join(cur).lower())
    return words


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


def embedded_destinations(text: str) -> list[str]:
    """Every word of free text that names an external destination (a URL, an e-mail
    address, a host), surrounding punctuation stripped, and every one written inside a
    word (:func:`fak_core.grounding.destination_pieces`), in every view of the text a
    reader may see (:func:`fak_core.linkviews.decoded_views`: HTML character references,
    Markdown escapes, percent-encoding decoded); linear in the text."""
    found: dict[str, None] = {}
    for word in text.split():
        if word.isascii() and _NO_DESTINATION.isdisjoint(word):
            continue  # no view of it holds a dot, a colon or a non-ASCII character
        for w in _word_destinations(word):
            found.setdefault(w, None)
    return list(found)


#: An ASCII word with none of these names no destination in any view: a destination holds
#: a dot, a colon or a non-ASCII character (:func:`looks_external`), and only a character
#: reference (``&``) or a percent triplet (``%``) writes one that is not there as written.
_NO_DESTINATION = frozenset(".:&%")


def _word_destinations(word: str) -> list[str]:
    """The destinations one word of free text names, in every view of it."""
    found: list[str] = []
    views = decoded_views(word)
    # a word a reader decodes is read as decoded: as written, it names at most a host
    # holding "&" (no DNS name does) or the decoded link's host with another path
    for view in views[1:] or views:
        for raw in view.split():
            # the word, and every link inside it (``[x](https://y/)``, ``href="..."``)
            pieces = destination_pieces(raw)
            for piece in tuple(pieces):
                pieces.extend(_nested(piece))
            found.extend(w for w in pieces if looks_external(w, False))
    return found


#: where a link starts in a decoded query: an authority's ``//`` (with or without a
#: scheme: a redirect to ``//host`` is one) or ``mailto:``
_NESTED_START = re.compile(r"//|mailto:", re.IGNORECASE)
_SCHEME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+-.:")


def _nested(piece: str) -> list[str]:
    """The links a piece holds once percent-decoded (a server decodes its query once:
    ``x.org/r?u=https%3A%2F%2Fy``): each link start of the decoded text but the piece's
    own first one, read from its scheme; the piece itself is read as written."""
    words = percent_nested(piece)
    if not words:
        return []
    decoded = " ".join(words)
    starts = [m.start() for m in _NESTED_START.finditer(decoded)]
    if starts and _NESTED_START.search(piece[: starts[0] + 2]) is not None:
        starts = starts[1:]  # the piece's own scheme
    out: list[str] = []
    for start in starts:
        first = start
        while first and decoded[first - 1] in _SCHEME_CHARS:
            first -= 1
        link = decoded[first:].split(maxsplit=1)[0]
        out.extend(destination_pieces(link))
    return out


def has_external_destination(args: Any) -> bool:
    """Whether any string in ``args`` names an external destination (stops at the first)."""
    return bool(external_destinations(args, first_only=True))


def classify(tool: str, args: Any, safe_sinks: Iterable[str] = ()) -> Sink:
    """EXEC, then DESTRUCTIVE by name; then EGRESS by destination or name; else NONE.

    A name is matched by its letters (``_EXEC``, ``_DESTRUCTIVE``, ``_EGRESS``) and by its
    words (:func:`name_words`) against the side-effecting verb families."""
    name = tool.lower()
    if _EXEC.search(name):
        return Sink.EXEC
    words = name_words(tool)
    if _DESTRUCTIVE.search(name) or not _DESTRUCTIVE_WORDS.isdisjoint(words):
        return Sink.DESTRUCTIVE
    if args is not None and has_external_destination(args):
        return Sink.EGRESS
    if tool not in safe_sinks and (_EGRESS.search(name) or not _EGRESS_WORDS.isdisjoint(words)):
        return Sink.EGRESS
    return Sink.NONE


def sink_class(policy: Policy, tool: str, args: Any) -> tuple[str, str]:
    """``(class, why)`` of a call under ``policy``: the declaration if any, else the name
    heuristics (:func:`classify`), else ``UNDECLARED`` under ``strict_sinks``, else NONE."""
    decl = policy.tools.get(tool)
    if decl is not None:
        return decl.sink, "declared"
    sink = classify(tool, args, policy.safe_sinks)
    if sink is not Sink.NONE:
        return sink.value, "heuristic"
    if policy.strict_sinks:
        return UNDECLARED, "strict_sinks"
    return Sink.NONE.value, "heuristic"


def _named_tools(policy: Policy) -> list[str]:
    """Every tool a policy names (allowed, given a source, authorised, ruled, schema'd)."""
    names = set(policy.allow) | set(policy.tools) | set(policy.sources)
    names.update(r.tool for r in policy.authorize)
    names.update(r.tool for r in policy.arg_rules)
    names.update(r.tool for r in policy.rules)
    names.update(policy.schemas)
    return sorted(names)


def guessed_sinks(policy: Policy) -> list[tuple[str, str]]:
    """``(tool, guessed class)`` for each tool the policy names whose sink class only the
    name heuristics give: every undeclared tool unless ``strict_sinks`` (which gates it)."""
    if policy.strict_sinks:
        return []
    out: list[tuple[str, str]] = []
    for tool in _named_tools(policy):
        sink, why = sink_class(policy, tool, None)
        if why == "heuristic":
            out.append((tool, sink))
    return out


def guess_warning(policy: Policy) -> str | None:
    """The warning a policy that leaves tools' sink classes to the name heuristics loads
    with, naming each such tool and its guessed class (and the ``allow_prefix`` patterns,
    whose tools are guessed too); None when nothing is guessed."""
    if policy.strict_sinks:
        return None
    guessed = guessed_sinks(policy)
    if not guessed and not policy.allow_prefix:
        return None
    parts = [f"{tool} ({sink})" for tool, sink in guessed]
    if policy.allow_prefix:
        prefixes = ", ".join(repr(p) for p in policy.allow_prefix)
        parts.append(f"every tool under allow_prefix {prefixes}")
    fix = (
        "declare them under 'tools' in a fak-policy/v2 policy (whose strict_sinks gates "
        "every undeclared tool)"
        if not policy.is_v2
        else "declare them under 'tools', or leave strict_sinks at its default (true)"
    )
    return (
        f"{policy.version} leaves the sink class of these tools to a guess from their "
        f"names (a tainted session reaches every one guessed NONE): {', '.join(parts)}; "
        f"{fix}"
    )


def _strings(value: Any) -> list[str]:
    """Every string in ``value`` at any depth (keys of tables included)."""
    return [v for v in leaves(value) if type(v) is str]


def _as_text(item: Any) -> str | None:
    if type(item) is str:
        return item
    if type(item) is int or type(item) is float:
        return str(item)
    return None


def _held(tool: str, claim: str, meta: dict[str, str]) -> Verdict:
    """A refusal of a tool declared ``approve = true``: held for a human's token."""
    advice = f"; a human may approve this exact call: fak approve --trace ... --tool {tool}"
    return Verdict.require_witness(
        claim + advice, BY, Reason.TRUST_VIOLATION, meta={**meta, "approval": "required"}
    )


@nonblocking
class SinkGate:
    """The control-plane half of IFC: deny gated sinks on tainted traces."""

    def __init__(
        self,
        ledger: TaintLedger,
        policy: Policy | None = None,
        grounding: GroundingStore | None = None,
        confidential: ConfidentialStore | None = None,
    ) -> None:
        self.ledger = ledger
        self.grounding = grounding
        self.confidential = confidential
        self.set_policy(policy if policy is not None else Policy())

    def set_policy(self, policy: Policy) -> None:
        self._safe = frozenset(policy.safe_sinks)
        self._gated = frozenset(policy.gated_sinks)
        self._authorized = frozenset((r.tool, r.sink) for r in policy.authorize)
        self._decls = dict(policy.tools)
        self._strict = bool(policy.strict_sinks)
        # a policy that declares no confidential fields asks no store
        self._confidential = any(d.confidential for d in policy.tools.values())
        # an entry with no canonical form allows nothing (the parser refuses one)
        self._allowed_dest = {
            tool: frozenset(c for c in map(canonical_value, d.allow_destinations) if c[1])
            for tool, d in policy.tools.items()
            if d.allow_destinations
        }

    def adjudicate(self, view: CallView) -> Verdict:
        call = view.call
        flow = self.ledger.level(call.trace_id)
        if call.args_taint == Taint.QUARANTINED:
            flow = Taint.QUARANTINED
        if flow == Taint.TRUSTED:
            return _NO_OPINION
        tool = call.tool
        decl = self._decls.get(tool)
        sink = self._gated_class(tool, decl, view)
        if sink is None:
            return _NO_OPINION
        if (tool, sink) in self._authorized:
            return _AUTHORIZED
        if decl is not None and (decl.destinations or decl.content):
            args = view.args()
            bad = self._ungrounded(call.trace_id, tool, decl, args)
            if bad is None:
                store = self.confidential if self._confidential else None
                leak = store.carried(call.trace_id, args) if store is not None else None
                if leak is None:
                    return _GROUNDED
                pointer, origin = leak
                meta = {"ifc_sink": str(sink), "ifc_flow": flow.label, "ifc_confidential": pointer}
                claim = (
                    f"{sink} sink fed {flow.label} data: {pointer or 'the call'} carries a "
                    f"confidential value of {origin}"
                )
            else:
                pointer, value = bad
                meta = {"ifc_sink": str(sink), "ifc_flow": flow.label, "ifc_ungrounded": pointer}
                claim = self._ungrounded_claim(call.trace_id, sink, flow, pointer, value)
            if decl.approve:
                return _held(tool, claim, meta)
            return Verdict.deny(Reason.TRUST_VIOLATION, BY, claim=claim, meta=meta)
        meta = {"ifc_sink": str(sink), "ifc_flow": flow.label}
        claim = f"{sink} sink fed {flow.label} data"
        if sink == UNDECLARED:
            claim = f"undeclared tool {tool} is a sink under strict_sinks, fed {flow.label} data"
        elif decl is not None and decl.approve:
            # nothing to ground: no value can vouch for the call, a human may
            return _held(tool, claim + " (nothing to ground)", meta)
        return Verdict.deny(Reason.TRUST_VIOLATION, BY, claim=claim, meta=meta)

    def _gated_class(self, tool: str, decl: ToolDecl | None, view: CallView) -> str | None:
        """The gated sink class of a call, or None when the gate has no opinion: the
        declaration if any (``NONE`` or an ungated class: None), else the heuristics, and
        under ``strict_sinks`` every undeclared tool (``UNDECLARED`` if nothing else)."""
        if decl is not None:
            sink = decl.sink
            return None if sink == NOT_A_SINK or sink not in self._gated else sink
        found = classify(tool, view.args(), self._safe)
        if found is Sink.NONE:
            return UNDECLARED if self._strict else None
        return found.value if found in self._gated or self._strict else None

    def _ungrounded(
        self, trace_id: str, tool: str, decl: ToolDecl, args: Any
    ) -> tuple[str, Any] | None:
        """The first destination (pointer, value) that is not grounded, or (pointer,
        :class:`NotAnIndex`) for a pointer with a token that is no array index where it
        meets an array; None if all are grounded."""
        if args is None:
            return ("", None)
        allowed = self._allowed_dest.get(tool, _NOTHING)
        store = self.grounding
        read = 0  # characters of content read for links, all pointers together
        for pointer in decl.destinations:
            found = resolve_pointer(args, pointer)
            if is_missing(found):
                continue
            # a NotAnIndex is no text: it is returned as the value at fault, as any other
            for item in found if type(found) is list else (found,):
                text = _as_text(item)
                if text is None:
                    return (pointer, item)
                if allowed and canonical_value(text) in allowed:
                    continue
                if store is None or not store.grounded(trace_id, text):
                    return (pointer, text)
        for pointer in decl.content:
            found = resolve_pointer(args, pointer)
            if is_missing(found):
                continue
            if type(found) is NotAnIndex:
                return (pointer, found)
            strings = _strings(found)
            read += sum(map(len, strings))
            if read > MAX_LINK_TEXT:
                return (pointer, TooLongToRead(read))
            for item in strings:
                for dest in embedded_destinations(item):
                    if allowed and canonical_value(dest) in allowed:
                        continue
                    if store is None or not store.grounded(trace_id, dest):
                        return (pointer, dest)
        return None

    def _ungrounded_claim(
        self, trace_id: str, sink: str, flow: Taint, pointer: str, value: Any
    ) -> str:
        if type(value) is NotAnIndex:
            return (
                f"{sink} sink fed {flow.label} data: {pointer}: {value.token!r} where it meets "
                "an array is not an RFC 6901 array index"
            )
        if type(value) is TooLongToRead:
            return (
                f"{sink} sink fed {flow.label} data: {pointer}: {value}; refused unread: "
                "send less content in one call"
            )
        shown = repr(value)
        if len(shown) > 80:
            shown = shown[:77] + "..."
        where = "in no content this session admitted"
        if isinstance(value, str) and self.grounding is not None:
            origin = self.grounding.origin_of(trace_id, value)
            if origin is not None:
                where = f"only in the untrusted result of {origin}"
        return (
            f"{sink} sink fed {flow.label} data: {pointer} = {shown} is not grounded; "
            f"it appears {where}"
        )
