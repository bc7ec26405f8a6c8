"""The text the kernel screens of a value made of several strings from one untrusted party.

The strings are joined one a line: an injection split across them reads as one text, and
the join makes no secret (a newline is in no secret shape's alphabet, and a shape with a
boundary still sees its own string's end). That join alone lets a secret split across two
consecutive strings through: its halves sit on two lines, and neither is a secret. So the
strings are also read end to end without a separator, in document order, keys included and
values only; when such a seamless text holds a secret the line join does not, it is
appended to what the kernel screens, so the screen holds the whole value. A seamless text
is appended only then: a clean value is screened as it always was (page-out sizes and
injection markers see the line join only). Linear in the strings: one join and one
secret search per order.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from fak_core.admission import SECRET_PATTERNS

__all__ = ["builtin_secret", "joined_text", "json_strings"]

_BUILTIN = re.compile("|".join(f"(?:{p})" for p in SECRET_PATTERNS))


def builtin_secret(text: str) -> bool:
    """Whether ``text`` holds one of the kernel's built-in secret shapes."""
    return _BUILTIN.search(text) is not None


def json_strings(value: Any, *, keys: bool = True) -> list[str]:
    """Every string in a JSON value in document order (an object's key before its value),
    keys included unless ``keys`` is false. Iterative: no recursion limit on depth."""
    out: list[str] = []
    stack: list[Any] = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, str):
            out.append(v)
        elif isinstance(v, dict):
            for k, item in reversed(v.items()):
                stack.append(item)
                if keys:
                    stack.append(str(k))
        elif isinstance(v, list | tuple):
            stack.extend(reversed(v))
    return out


def joined_text(
    parts: Sequence[str],
    has_secret: Callable[[str], bool] = builtin_secret,
    orders: Iterable[Sequence[str]] = (),
) -> str:
    """``parts`` one a line, followed by the first seamless reading (``parts`` end to end,
    then each of ``orders``) that holds a secret the line join does not."""
    text = "\n".join(parts)
    seqs = [seq for seq in (parts, *orders) if len(seq) > 1]
    if not seqs or has_secret(text):
        return text
    for seq in seqs:
        seamless = "".join(seq)
        if has_secret(seamless):
            return f"{text}\n{seamless}"
    return text
