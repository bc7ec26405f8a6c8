"""Regular expressions a policy supplies, compiled with RE2 so they run in linear time.

An operator's pattern (``arg_rules[].deny_regex``, ``secret_patterns``) runs on attacker
text, so it never goes to Python's backtracking ``re``: :func:`compile_policy_pattern`
compiles it with RE2 (``google-re2``), whose matcher is an automaton, linear in the text.
A pattern RE2 refuses (backreferences, lookaround, possessive quantifiers, repeats above
1000) is a :class:`PolicyError` that names the key and says what to change.
"""

from __future__ import annotations

from typing import TypeAlias

import re2

__all__ = ["PolicyPattern", "PolicyPatternError", "compile_policy_pattern"]

#: A compiled policy pattern (RE2): ``search`` and ``match`` as in ``re``.
PolicyPattern: TypeAlias = "re2._Regexp[str]"


class PolicyPatternError(ValueError):
    """A policy pattern RE2 cannot compile (the policy module re-raises it as PolicyError)."""


def _options() -> re2.Options:
    options = re2.Options()
    options.log_errors = False  # the error goes into the exception, not onto stderr
    return options


_OPTIONS = _options()


def compile_policy_pattern(text: str, where: str) -> PolicyPattern:
    """``text`` compiled with RE2; refused with a message naming ``where`` and the fix."""
    try:
        return re2.compile(text, _OPTIONS)
    except UnicodeEncodeError:  # RE2 reads UTF-8: a lone surrogate has no encoding
        raise PolicyPatternError(
            f"policy key {where!r}: invalid regular expression {text!r}: it holds a lone "
            f"surrogate (half of a \\uD800-\\uDFFF pair), which is not text and RE2 cannot "
            f"read; remove it"
        ) from None
    except re2.error as exc:
        detail = exc.args[0] if exc.args else exc
        if isinstance(detail, bytes):
            detail = detail.decode("utf-8", "replace")
        raise PolicyPatternError(
            f"policy key {where!r}: invalid regular expression {text!r} for RE2 ({detail}); "
            f"policy patterns run in linear time (RE2): drop backreferences "
            f"(\\1), lookahead/lookbehind ((?=, (?!, (?<=, (?<!), possessive quantifiers "
            f"(a++, a*+) and atomic groups ((?>...)), keep repeat counts at most 1000"
        ) from None
