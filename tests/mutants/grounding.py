"""Mutants for policy v2: declared tool semantics (D2.8) and destination grounding (C4.6).
Each puts back one plausible way the declarations or the grounding check could be wrong."""

from __future__ import annotations

import contextlib
import importlib
import re
import unicodedata
from typing import Any
from unittest import mock

from fak_core.grounding import GroundingStore
from fak_core.policy import Policy, ToolDecl
from fak_core.sinks import SinkGate
from pytest_fak import mutant
from tests.mutants.sourcepatch import edited

_grounding = importlib.import_module("fak_core.grounding")
_kernel_mod = importlib.import_module("fak_core.kernel")
_user_words = importlib.import_module("fak_core.gateway.user_words")
_sinks = importlib.import_module("fak_core.sinks")
_real_set_policy = SinkGate.set_policy
_real_ungrounded = SinkGate._ungrounded
_real_grounded = GroundingStore.grounded


@mutant("D2.8/declarations-ignored")
def declarations_ignored() -> Any:
    """The gate classifies every tool by the name heuristics, declared or not."""

    def set_policy(self: SinkGate, policy: Policy) -> None:
        _real_set_policy(self, policy)
        self._decls = {}

    return mock.patch.object(SinkGate, "set_policy", set_policy)


@mutant("D2.8/strict-ignored")
def strict_ignored() -> Any:
    """``strict_sinks`` is read but an undeclared harmless tool is still no sink."""

    def set_policy(self: SinkGate, policy: Policy) -> None:
        _real_set_policy(self, policy)
        self._strict = False

    return mock.patch.object(SinkGate, "set_policy", set_policy)


@mutant("D2.8/strict-sinks-opt-in")
def strict_sinks_opt_in() -> Any:
    """A v2 policy that leaves ``strict_sinks`` out reads it as false (the original bug):
    an undeclared tool the name heuristics call harmless reaches a tainted session."""
    policy_mod = importlib.import_module("fak_core.policy")
    real_bool = policy_mod._bool
    real_post = Policy.__post_init__

    def _bool(doc: Any, key: str, default: bool) -> bool:
        return bool(real_bool(doc, key, False if key == "strict_sinks" else default))

    def post_init(self: Policy) -> None:
        if self.strict_sinks is None:
            object.__setattr__(self, "strict_sinks", False)
        real_post(self)

    return _chain(
        mock.patch.object(policy_mod, "_bool", _bool),
        mock.patch.object(Policy, "__post_init__", post_init),
    )


@mutant("D2.8/verbs-unread")
def verbs_unread() -> Any:
    """The name heuristics read only their letter patterns, never the name's words (the
    original bug): git_push, create_issue, add_comment, invite_user are no sinks in v1."""
    return mock.patch.object(_sinks, "name_words", return_value=[])


@mutant("D2.8/read-file-trusted-default")
def read_file_trusted_default() -> Any:
    """Local read tools (read_file, cat, Read, ...) are trusted sources unless the policy
    says otherwise (the original bug): what a file says is taken as trusted."""
    provenance = importlib.import_module("fak_core.provenance")
    real_init = provenance.SourceRegistry.__init__

    def init(self: Any, sources: Any = None) -> None:
        real_init(
            self, {**dict.fromkeys(provenance.BUILTIN_TRUSTED, "trusted_local"), **(sources or {})}
        )

    return mock.patch.object(provenance.SourceRegistry, "__init__", init)


@mutant("C4.6/untrusted-grounds")
def untrusted_grounds() -> Any:
    """Every admitted result grounds destinations, untrusted ones included."""

    def record_untrusted(self: GroundingStore, trace_id: str, text: str, origin: str) -> None:
        self.record_trusted(trace_id, text, origin)

    return mock.patch.object(GroundingStore, "record_untrusted", record_untrusted)


@mutant("C4.6/lone-percent-joins-triplet")
def lone_percent_joins_triplet() -> Any:
    """A lone ``%`` is left as it is while the triplet after it is decoded (the bug fixed):
    ``x.org/%%341`` becomes ``x.org/%41``, a new triplet for ``A``, so the canonical form
    names another place and is not its own form."""
    return mock.patch.object(_grounding, "_PERCENT", re.compile(r"%([0-9A-Fa-f]{2})"))


@mutant("C4.6/substring-grounding")
def substring_grounding() -> Any:
    """A value is grounded when its text occurs anywhere in a trusted text, whole words
    or not (``ali`` grounded by ``alice``, ``x.org/p`` by ``x.org/px``)."""

    def grounded(self: GroundingStore, trace_id: str, value: str) -> bool:
        _kind, canon = _grounding.canonical_value(value)
        s = self._sessions.get(trace_id)
        if s is None or not canon:
            return False
        return any(canon in c.text or any(canon in sp[1] for sp in c.specials) for c in s.trusted)

    return mock.patch.object(GroundingStore, "grounded", grounded)


@mutant("C4.6/first-destination-only")
def first_destination_only() -> Any:
    """Only the first declared destination is checked (``/cc`` rides along)."""

    def ungrounded(self: SinkGate, trace_id: str, tool: str, decl: ToolDecl, args: Any) -> Any:
        first = ToolDecl(decl.sink, decl.destinations[:1], decl.allow_destinations, decl.content)
        return _real_ungrounded(self, trace_id, tool, first, args)

    return mock.patch.object(SinkGate, "_ungrounded", ungrounded)


@mutant("C4.6/content-unread")
def content_unread() -> Any:
    """Links written inside declared content arguments are not read as destinations."""

    def ungrounded(self: SinkGate, trace_id: str, tool: str, decl: ToolDecl, args: Any) -> Any:
        bare = ToolDecl(decl.sink, decl.destinations, decl.allow_destinations, ())
        return _real_ungrounded(self, trace_id, tool, bare, args)

    return mock.patch.object(SinkGate, "_ungrounded", ungrounded)


@mutant("C4.6/case-sensitive")
def case_sensitive() -> Any:
    """Values are compared as written: ``Alice`` in the user's words does not ground
    ``alice`` (a refusal of a grounded destination)."""

    def grounded(self: GroundingStore, trace_id: str, value: str) -> bool:
        return _real_grounded(self, trace_id, value) and any(
            value.strip() in c.text for c in self._sessions[trace_id].trusted
        )

    return mock.patch.object(GroundingStore, "grounded", grounded)


@mutant("C4.6/tool-results-as-user-words")
def tool_results_as_user_words() -> Any:
    """The proxies read every part of a user or tool message as the user's words, an
    Anthropic ``tool_result`` block and an OpenAI ``tool`` message included."""

    def texts(content: Any) -> list[str]:
        if isinstance(content, str):
            return [content]
        out: list[str] = []
        for part in content if isinstance(content, list) else ():
            if isinstance(part, dict):
                for key in ("text", "content"):
                    if isinstance(part.get(key), str):
                        out.append(part[key])
        return out

    roles = {**_user_words._OPENAI_ROLES, "tool": "user"}
    return _chain(
        mock.patch.object(_user_words, "_texts", texts),
        mock.patch.object(_user_words, "_OPENAI_ROLES", roles),
    )


def _uncached(*patches: Any) -> Any:
    """``patches`` in force with the canonical-value cache emptied on entry and exit, so
    no form computed by the real code answers for the mutant (and none of the mutant's
    outlives it)."""

    @contextlib.contextmanager
    def entered() -> Any:
        _grounding._canonical.cache_clear()
        try:
            with _chain(*patches):
                yield
        finally:
            _grounding._canonical.cache_clear()

    return entered()


_real_host = _grounding._host
_real_url = _grounding._url


@mutant("C4.6/host-folded-before-idna")
def host_folded_before_idna() -> Any:
    """A host is NFKC-case-folded by Python before the WHATWG host parser reads it (the
    original bug): ``faß.de`` becomes ``fass.de``, another registrable name."""

    def host(text: str) -> str | None:
        return _real_host(unicodedata.normalize("NFKC", text).casefold())

    return _uncached(mock.patch.object(_grounding, "_host", host))


@mutant("C4.6/deviation-grounded")
def deviation_grounded() -> Any:
    """A host holding an IDNA deviation character (ß, ς, ZWJ, ZWNJ) is grounded by its
    WHATWG reading, though ``urllib`` (IDNA 2003) resolves it to another name."""
    return _uncached(mock.patch.object(_grounding, "_DEVIATIONS", frozenset()))


@mutant("C4.6/local-part-folded")
def local_part_folded() -> Any:
    """An e-mail local part is NFKC-case-folded (the original bug): the mailbox
    ``\u017fam@x`` (long s) is grounded by ``sam@x``."""

    def fold(text: str) -> str:
        return unicodedata.normalize("NFKC", text).casefold()

    return _uncached(mock.patch.object(_grounding, "_ascii_lower", fold))


@mutant("C4.6/path-case-folded")
def path_case_folded() -> Any:
    """A URL's path and query are compared in lower case (the original bug):
    ``x.org/Report`` is grounded by ``x.org/report``."""

    def url(text: str) -> str | None:
        found = _real_url(text)
        return None if found is None else found.lower()

    return _uncached(mock.patch.object(_grounding, "_url", url))


@mutant("C4.6/links-in-words-unread")
def links_in_words_unread() -> Any:
    """Only whole words of declared content are read (the original bug): a Markdown link
    ``[here](https://evil.example/)`` or ``href="..."`` is no destination."""

    def whole_word(word: str) -> list[str]:
        return [word.lstrip(_grounding._LEAD).rstrip(_grounding._TRAIL)]

    return _uncached(mock.patch.object(_sinks, "destination_pieces", whole_word))


def _as_written(text: str) -> list[str]:
    return [text]


@mutant("C4.6/links-raw-text")
def links_raw_text() -> Any:
    """Links inside content are read from the raw text (the original bug): a link whose
    scheme or host is written with HTML character references (``https&#58;//``), Markdown
    escapes, or percent-encoded in a grounded URL's query is no destination."""
    return _uncached(
        mock.patch.object(_sinks, "decoded_views", _as_written),
        mock.patch.object(_grounding, "decoded_views", _as_written),
        mock.patch.object(_sinks, "percent_nested", return_value=[]),
    )


def _chain(*patches: Any) -> Any:
    stack = contextlib.ExitStack()

    @contextlib.contextmanager
    def entered() -> Any:
        with stack:
            for p in patches:
                stack.enter_context(p)
            yield

    return entered()


# ---------------------------------------------------------------- C4.8 approvals
_approvals = importlib.import_module("fak_core.approvals")


@mutant("C4.8/mac-unchecked")
def mac_unchecked() -> Any:
    """The token's MAC is compared with itself: any payload passes for signed."""
    return mock.patch.object(_approvals.hmac, "compare_digest", return_value=True)


@mutant("C4.8/args-unbound")
def args_unbound() -> Any:
    """The token carries no real digest of the arguments: every call's digest is equal."""
    return mock.patch.object(_approvals, "canonical_args_digest", return_value="unbound")


@mutant("C4.8/replayable")
def replayable() -> Any:
    """Spent nonces are never remembered: a token approves its call again and again."""

    def spend(self: Any, nonce: str, expires: int, now: float) -> str | None:
        return None

    return mock.patch.object(_approvals.MemoryNonces, "spend", spend)


@mutant("C4.8/nonces-forget-on-restart")
def nonces_forget_on_restart() -> Any:
    """The in-process nonce store claims to remember every spend for ever (the original
    bug): a token spent before a restart releases its call again after it."""

    def remembers_since(self: Any) -> float | None:
        return None

    return mock.patch.object(_approvals.MemoryNonces, "remembers_since", remembers_since)


@mutant("C4.8/expiry-ignored")
def expiry_ignored() -> Any:
    """The expiry is read from the token but the clock is never consulted."""
    real_init = _approvals.ApprovalResolver.__init__

    def init(
        self: Any, key: bytes, max_used: int = 65536, clock: Any = None, nonces: Any = None
    ) -> None:
        real_init(self, key, max_used, lambda: 0.0, nonces)

    return mock.patch.object(_approvals.ApprovalResolver, "__init__", init)


@mutant("C4.8/mac-malleable")
def mac_malleable() -> Any:
    """The MAC is compared after lenient base64 decoding (the original bug): a token with
    its MAC respelled ('-' as '+', a stray character, the last character's spare bits
    changed) decodes to the same bytes and passes for the minted token."""
    real = _approvals.ApprovalResolver.verify

    def verify(self: Any, call: Any, token: str) -> str | None:
        signed, dot, mac = token.rpartition(".")
        try:
            given = _approvals._unb64(mac)
        except ValueError:
            return real(self, call, token)
        if dot and given == _approvals._mac(self._key, signed):
            token = signed + "." + _approvals._b64(given)
        return real(self, call, token)

    return mock.patch.object(_approvals.ApprovalResolver, "verify", verify)


@mutant("C4.8/payload-read-first")
def payload_read_first() -> Any:
    """The payload is decoded (base64, then JSON) before the MAC is checked, as before the
    bug was fixed: what a party without the key wrote is parsed, and a forged token with a
    malformed payload is refused as malformed rather than as a bad signature."""
    check = (
        "    if not token.isascii() or not hmac.compare_digest(\n"
        "        mac.encode(), _b64(_mac(self._key, signed)).encode()\n"
        "    ):\n"
        '        return "the approval token\'s signature does not match"\n'
    )
    decode = (
        "    try:\n"
        "        payload = orjson.loads(_unb64(signed[len(_PREFIX) :]))\n"
        "    except (ValueError, orjson.JSONDecodeError):\n"
        '        return "a malformed approval token"\n'
    )
    return edited(_approvals.ApprovalResolver.verify, (check + decode, decode + check))


# ---------------------------------------------------------------- D2.9 argument rules
_rules = importlib.import_module("fak_core.rules")
_real_set_rules = _rules.RuleGate.set_rules


@mutant("D2.9/last-match-wins")
def last_match_wins() -> Any:
    """The rules are tried in reverse order: the last matching rule decides."""

    def set_rules(self: Any, rules: Any) -> None:
        _real_set_rules(self, rules)
        self._rules = {tool: entries[::-1] for tool, entries in self._rules.items()}

    return mock.patch.object(_rules.RuleGate, "set_rules", set_rules)


@mutant("D2.9/priority-ignored")
def priority_ignored() -> Any:
    """Rules are tried in file order whatever their priority."""

    def set_rules(self: Any, rules: Any) -> None:
        _real_set_rules(self, rules)
        self._rules = {t: sorted(e, key=lambda x: x[1]) for t, e in self._rules.items()}

    return mock.patch.object(_rules.RuleGate, "set_rules", set_rules)


@mutant("D2.9/taint-condition-ignored")
def taint_condition_ignored() -> Any:
    """A rule's taint condition is read but every rule applies on every session."""

    def set_rules(self: Any, rules: Any) -> None:
        _real_set_rules(
            self,
            tuple(
                r.__class__(r.tool, r.effect, r.when, "any", r.priority, r.reason, r.claim)
                for r in rules
            ),
        )

    return mock.patch.object(_rules.RuleGate, "set_rules", set_rules)


@mutant("C4.6/special-cost-in-characters")
def special_cost_in_characters() -> Any:
    """A chunk's index is sized by its canonical forms' characters, not their UTF-8 bytes
    (the original accounting): a text of non-ASCII words costs less than it holds."""
    return edited(
        _grounding._specials_cost,
        ('len(s[1].encode("utf-8", "surrogatepass")) + 48', "len(s[1]) + 48"),
    )


@mutant("C4.6/ambiguous-text-digest")
def ambiguous_text_digest() -> Any:
    """A trusted text is named by its origin and text joined with a NUL (the original
    digest): ``("user\\0x", "y")`` and ``("user", "x\\0y")`` are one text, the second never
    recorded."""
    return edited(
        _grounding._digest,
        (
            'json.dumps([origin, text]).encode("ascii")',
            'f"{origin}\\0{text}".encode("utf-8", "surrogatepass")',
        ),
    )


@mutant("C4.6/host-label-stands-for-tool")
def host_label_stands_for_tool() -> Any:
    """The host's labels share the kernel's namespace (the original): a text the host
    recorded under ``tool:<name>`` stands for that trusted tool's result, which is then
    never a record of its own and leaves with the host's."""
    return edited(_kernel_mod._host_origin, ('return "host:" + origin', "return origin"))


@mutant("C4.6/pointer-index-isdigit")
def pointer_index_isdigit() -> Any:
    """A pointer's token at an array is an index when ``str.isdigit`` says so (the original
    bug): ``01`` and ``-1`` name nothing, a superscript two breaks ``int()``, and an
    Arabic-Indic one is read as element 1, never refused as no RFC 6901 array index."""
    return edited(
        _grounding.resolve_pointer,
        (
            '            if token == "-":\n'
            "                return _MISSING\n"
            "            if not _ARRAY_INDEX.fullmatch(token):\n"
            "                return NotAnIndex(token)\n",
            '            if not token.isdigit() or (token != "0" and token.startswith("0")):\n'
            "                return _MISSING\n",
        ),
    )
