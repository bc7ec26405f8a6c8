"""The secret scanner: no secret-shaped key or value may sit in a manifest or projection.

Values are matched against the kernel's secret shapes (:data:`fak_core.admission.SECRET_PATTERNS`)
plus flow-specific ones: credential references (``vault://``, ``${{ secrets.X }}`` …),
bearer tokens, JWTs, URLs carrying a password, ``password=…`` assignments, and every
private value the resolver knows (gateway addresses, credential references, extension
authentication, platform system prompts). Keys are split into words and refused when a
word names a credential, an auth field, a gateway or a system prompt. Findings name the
path and the kind of match, never the secret itself.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable
from typing import Any

from fak_core.admission import SECRET_PATTERNS
from fak_core.flow.findings import Finding

__all__ = ["FORBIDDEN_KEY_WORDS", "SecretScanner", "scan"]

_VALUE_PATTERNS: tuple[tuple[str, str], ...] = (
    *(("provider key or token", p) for p in SECRET_PATTERNS),
    (
        "credential reference",
        r"(?i)\b(?:vault|secrets?|op|env|awssm|aws-secretsmanager|gcpsm|azure-kv|k8s-secret)://",
    ),
    ("credential reference", r"\$\{\{\s*secrets\."),
    ("bearer token", r"(?i)\bbearer\s+[A-Za-z0-9._~+/\-]{8,}=*"),
    ("JSON web token", r"\beyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}"),
    ("URL with a password", r"(?i)\b[a-z][a-z0-9+.\-]*://[^/\s:@]+:[^/\s@]+@"),
    (
        "secret assignment",
        r"(?i)\b(?:password|passwd|pwd|secret|api[_-]?key|access[_-]?key|token)\s*[:=]\s*\S{6,}",
    ),
)
_VALUE_RE = [(label, re.compile(p)) for label, p in _VALUE_PATTERNS]

#: Words that may not appear in any key of a manifest or projection.
FORBIDDEN_KEY_WORDS = frozenset(
    {
        "secret", "secrets", "password", "passwd", "pwd", "token", "apikey", "credential",
        "credentials", "auth", "authorization", "authentication", "oauth", "gateway",
        "bearer", "cookie", "privatekey", "systemprompt", "sysprompt", "accesskey",
    }
)  # fmt: skip
_SPLIT = re.compile(r"[^A-Za-z0-9]+|(?<=[a-z0-9])(?=[A-Z])")
_JOINED = ("api", "key"), ("private", "key"), ("system", "prompt"), ("access", "key")
_MIN_PRIVATE = 8


def _key_words(key: str) -> set[str]:
    words = [w.lower() for w in _SPLIT.split(key) if w]
    joined = {a + b for a, b in itertools.pairwise(words) if (a, b) in _JOINED}
    return set(words) | joined | {key.lower().replace("_", "").replace("-", "")}


class SecretScanner:
    """Scans a JSON document; ``private`` are exact values that must never appear."""

    def __init__(self, private: Iterable[str] = ()) -> None:
        self.private = tuple(p for p in dict.fromkeys(private) if len(p) >= _MIN_PRIVATE)

    def value_problem(self, text: str) -> str | None:
        for label, rx in _VALUE_RE:
            if rx.search(text):
                return label
        for p in self.private:
            if p in text:
                return "private execution-layer value (gateway, credential, auth or system prompt)"
        return None

    def key_problem(self, key: str) -> str | None:
        bad = _key_words(key) & FORBIDDEN_KEY_WORDS
        return f"key names a secret-bearing field ({sorted(bad)[0]})" if bad else None

    def scan(self, doc: Any, path: str = "") -> list[Finding]:
        out: list[Finding] = []
        self._walk(doc, path, out)
        return out

    def _walk(self, value: Any, path: str, out: list[Finding]) -> None:
        if isinstance(value, str):
            label = self.value_problem(value)
            if label:
                out.append(Finding("SECRET_IN_MANIFEST", path, f"secret-shaped value: {label}"))
        elif isinstance(value, dict):
            for k, v in value.items():
                sub = f"{path}.{k}" if path else str(k)
                problem = self.key_problem(str(k)) or self.value_problem(str(k))
                if problem:
                    out.append(Finding("SECRET_IN_MANIFEST", sub, problem))
                self._walk(v, sub, out)
        elif isinstance(value, list):
            for i, v in enumerate(value):
                self._walk(v, f"{path}[{i}]", out)


def scan(doc: Any, private: Iterable[str] = (), path: str = "") -> list[Finding]:
    """Findings for every secret-shaped key or value in ``doc``."""
    return SecretScanner(private).scan(doc, path)
