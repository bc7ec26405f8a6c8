"""One instance of every secret shape the kernel's screen knows, written by hand, for the
witnesses that split a secret at every position across the strings of one value
(D10.4, D11.1). :func:`check_shapes` fails when the screen learns a shape with no instance
here."""

from __future__ import annotations

import re
from collections.abc import Iterator

from fak_core.admission import SECRET_PATTERNS

SPLIT_SECRETS = (
    "sk-Zq7_w9-Lm3Xc8Vb2Nn4Rt6Yp",
    "AKIAQ7W3E9R1T5Y2U8I4",
    "-----BEGIN RSA PRIVATE KEY-----",
    "ghp_Aa1Bb2Cc3Dd4Ee5Ff6Gg7Hh8Ii9Jj0KkLl",
    "xoxb-1234567890-abcdEFGH",
    "AIzaSyA1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q",
)


def check_shapes() -> None:
    """Each shape of the screen has its instance here, matching it whole."""
    for shape, secret in zip(SECRET_PATTERNS, SPLIT_SECRETS, strict=True):
        assert re.fullmatch(shape, secret), (shape, secret)


def splits() -> Iterator[tuple[str, int]]:
    """Every (secret, position) that cuts a secret into two non-empty halves."""
    for secret in SPLIT_SECRETS:
        for at in range(1, len(secret)):
            yield secret, at


def long_halves(secret: str, at: int) -> list[str]:
    """The halves long enough (6+) that finding one in a text means it leaked."""
    return [h for h in (secret[:at], secret[at:]) if len(h) >= 6]
