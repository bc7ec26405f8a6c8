"""The self-modify guard's readers at their edges (D2.4): ANSI-C quoting read as bash reads
it, every glob kind read in every place (a glob starting with '-', a wildcard or a class,
one whose '?' or class matches a '=' or ':' of the path, one holding '=' or ':'), and names
that merely contain a protected name.

The oracles never call the code under test: bash itself (``$'...'`` is bash's; its
reading is the specification), a table of bash 5.2's answers recorded by hand (so the
witness stands where no bash is installed), and hand-written paths with their twins
spelled the same way under an unprotected name.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from fak_core import Kernel, Policy, ToolCall, selfmodify

BASH = shutil.which("bash")

# ----------------------------------------------------------------- ANSI-C quoting ($'...')
# Escapes and the characters that follow them: every escape bash names, octal and hex
# digits (so an escape may read one, two or three of them), \c with its special cases,
# unknown escapes (whose backslash bash keeps), and an escaped NUL (which ends the string).
_ESCAPES = [
    *(f"\\{c}" for c in "abefnrtvE\\'\"?qz8/_.xuUc"),
    *(f"\\{c}" for c in "01234567"),
    "\\x4",
    "\\x5f",
    "\\x2F",
    "\\u2f",
    "\\U0000005f",
    "\\457",
    "\\400",
    "\\777",
    "\\0",
    "\\x00",
    "\\c@",
    "\\c?",
    "\\c\\",
    "\\c\\\\",
    "\\xc3",
    "\\xa9",
    "\\u00e9",
    "\\ud800",
    "\\U0010FFFF",
    "\\U00110000",
    "\\U7FFFFFFF",
    "\\U80000000",
    "\\U04000000",
    "\\u007f",
    "\\u0080",
    "\\u07ff",
    "\\u0800",
    "\\uffff",
    "\\U00010000",
    "\\U001FFFFF",
    "\\U00200000",
    "\\U03FFFFFF",
    "\\xff",
    "\\x80",
    "\\c\u00e9",
    "\\\u00e9",
]
_PLAIN = [*'ab/_.-?"0123456789abcdefABCDEFxuU', " ", "\u00e9", "\u20ac"]


def _closed(body: str) -> str:
    """``body`` as the text of a ``$'...'`` string, read the way bash's lexer reads it (a
    backslash and the character after it are a pair, whatever the decoder makes of them
    later): a quote the pairing leaves bare (``\\c\\`` then ``\\'``) would end the string
    early, so it is escaped; a final unpaired backslash would escape the closing quote, so a
    letter follows it."""
    out = []
    i = 0
    while i < len(body):
        if body[i] == "\\":
            out.append(body[i : i + 2] if i + 1 < len(body) else "\\x")
            i += 2
        else:
            out.append("\\'" if body[i] == "'" else body[i])
            i += 1
    return "".join(out)


ANSI_BODIES = st.lists(st.sampled_from(_ESCAPES + _PLAIN), max_size=10).map("".join).map(_closed)


def _bash_ansi_c(bodies: list[str]) -> list[bytes]:
    """The words bash makes of ``$'body'`` for each body (one bash per call)."""
    assert BASH is not None
    script = "printf '%s\\0' " + " ".join(f"x$'{b}'" for b in bodies)
    env = {**os.environ, "LC_ALL": "C.UTF-8"}
    out = subprocess.run(
        [BASH, "--norc", "--noprofile", "-c", script], capture_output=True, env=env, check=True
    ).stdout
    return [w[1:] for w in out.split(b"\0")[:-1]]


def _ours(body: str) -> bytes:
    """The bytes the reader's text stands for (a byte no character holds is a surrogate
    escape, as in a file name Python reads)."""
    return selfmodify.ansi_c(body).encode("utf-8", "surrogateescape")


@pytest.mark.fak_theorem("D2.4")
@pytest.mark.skipif(BASH is None, reason="no bash to compare with (the table below stands)")
@given(st.lists(ANSI_BODIES, min_size=8, max_size=8))
@example([_closed("\\c\\" + "\\'"), *[""] * 7])  # a quote \\c\\ left bare ended the string
def test_ansi_c_strings_read_as_bash_reads_them(bodies: list[str]) -> None:
    """Differential against bash: the bytes of ``$'body'`` (escapes, \\c, unknown escapes,
    octal overflow, UTF-8 past U+10FFFF, an escaped NUL) are bash's."""
    for body, want in zip(bodies, _bash_ansi_c(bodies), strict=True):
        assert _ours(body) == want, body


# (body, bash 5.2's word), recorded from ``printf '%s' $'body'`` under LC_ALL=C.UTF-8
BASH_TABLE = [
    ("fak_core\\457kernel.py", b"fak_core/kernel.py"),  # octal keeps its low byte
    ("a\\0b", b"a"),  # an escaped NUL ends the string
    ("a\\x00b", b"a"),
    ("a\\c@b", b"a"),
    ("\\400", b""),  # 0o400 & 0xff is NUL
    ("\\x", b"\\x"),  # no digit: the backslash is kept
    ("\\u", b"\\u"),
    ("\\q\\8\\/", b"\\q\\8\\/"),  # unknown escapes keep their backslash
    ("\\c", b"\\c"),
    ("\\c?", b"\x7f"),
    ("\\cA\\ca\\c1\\c[", b"\x01\x01\x11\x1b"),
    ("\\c\\\\x", b"\x1cx"),  # \c\\ is one control character
    ("\\c\\x", b"\x1cx"),
    ("\\x414\\0101", b"A4\x081"),  # at most two hex and three octal digits
    ("\\\"\\?\\'\\\\", b"\"?'\\"),
    ("\\E\\e\\a\\b\\f\\n\\r\\t\\v", b"\x1b\x1b\x07\x08\x0c\n\r\t\x0b"),
    ("\\u2f\\U0000005f", b"/_"),
    ("\\xc3\\xa9\\u00e9", "\u00e9\u00e9".encode()),  # bytes, and UTF-8
    ("\\U0010FFFF\\U00110000", b"\xf4\x8f\xbf\xbf\xf4\x90\x80\x80"),
    ("\\U7FFFFFFF\\U80000000", b"\xfd\xbf\xbf\xbf\xbf\xbf"),  # RFC 2279, then nothing
    ("\\ud800", b"\xed\xa0\x80"),
    ("\\c\u00e9", b"\x03\xa9"),  # \c reads one byte
]


@pytest.mark.fak_theorem("D2.4")
@pytest.mark.parametrize(("body", "word"), BASH_TABLE)
def test_ansi_c_strings_as_bash_5_reads_them(body: str, word: bytes) -> None:
    assert _ours(body) == word


_GUARD = Kernel(
    Policy(
        allow=("run_shell",),
        self_modify_globs=("secrets/*.pem", "My Docs/", "fak-policy.json", "donn\u00e9es/"),
    )
)


@pytest.mark.fak_theorem("D2.4")
@pytest.mark.parametrize(
    ("command", "glob"),
    [
        ("echo x > $'secrets\\457k.pem'", "secrets/*.pem"),  # bash writes secrets/k.pem
        ("echo x > $'My Docs\\457x'", "My Docs/"),
        ("echo x > $'fak-policy.json\\0.bak'", "fak-policy.json"),  # the NUL ends the name
        ("echo x > $'fak-policy.json\\c@'", "fak-policy.json"),
        ("echo x > $'fak-policy.json\\x00'", "fak-policy.json"),
        ("echo x > $'donn\\xc3\\xa9es/x'", "donn\u00e9es/"),  # bash writes UTF-8 bytes
        ("echo x > $'donn\\u00e9es/x'", "donn\u00e9es/"),
    ],
)
def test_a_path_spelled_by_bash_escapes_is_read_as_bash_spells_it(command: str, glob: str) -> None:
    v = _GUARD.decide(ToolCall("run_shell", json.dumps({"command": command})))
    assert (_GUARD.kinds.name(v.kind), _GUARD.reasons.name(v.reason), v.claim) == (
        "DENY",
        "SELF_MODIFY",
        glob,
    ), command


# ----------------------------------------------------------------- every glob kind
# (glob, a path it covers, the same path spelled the same way that it does not cover):
# globs that start with '-', a wildcard or a class (a leading '-x' of a path is then no
# option to cut off), globs whose '?' or class matches the '=' or ':' in a path's part, and
# globs that hold '=' or ':' themselves (which must then not end a part)
GLOB_KINDS = [
    ("-state/", "-state/x.db", "-xtate/x.db"),
    ("*rsa", "-rsa", "-rsb"),
    ("?rsa", "-rsa", "-rsb"),
    ("[-_]rsa", "-rsa", "+rsa"),
    ("secrets/k?.pem", "secrets/k=.pem", "xecrets/k=.pem"),
    ("secrets/k?.pem", "secrets/k:.pem", "xecrets/k:.pem"),
    ("secrets/k?[0-9].pem", "secrets/k=1.pem", "xecrets/k=1.pem"),
    ("secrets/k[=:]*.pem", "secrets/k:x.pem", "xecrets/k:x.pem"),
    ("k=v/", "k=v/x", "k=w/x"),
    ("c:data/", "c:data/x", "c:xata/x"),
]
# where the path stands: a whole string, a key, a shell word (bare, quoted, a
# redirection's target) and a patch header
PLACES = ("{}", "KEY", "echo x > {}", "cp a {}", "cp a '{}'", "*** Update File: {}")


def _args(place: str, path: str) -> dict[str, object]:
    if place == "KEY":
        return {"files": {path: "x"}}
    return {"input": place.format(path)}


# an option's value glued by '=' or ':', read for a glob without a class, '=' or ':'
OPTION_PLACES = ("tee --out={} <x", "robocopy a b /log:{}")


@pytest.mark.fak_theorem("D2.4")
@pytest.mark.parametrize(("glob", "path", "twin"), GLOB_KINDS)
def test_every_glob_kind_is_read_and_its_twin_is_not(glob: str, path: str, twin: str) -> None:
    k = Kernel(Policy(allow=("write_file",), self_modify_globs=(glob,)))
    options = () if any(c in glob for c in "[=:") else OPTION_PLACES
    for place in (*PLACES, *options):
        v = k.decide(ToolCall("write_file", json.dumps(_args(place, path))))
        assert (k.reasons.name(v.reason), v.claim) == ("SELF_MODIFY", glob), (place, path)
        v = k.decide(ToolCall("write_file", json.dumps(_args(place, twin))))
        assert k.kinds.name(v.kind) == "ALLOW", (place, twin)


@pytest.mark.fak_theorem("D2.4")
@pytest.mark.parametrize(
    ("glob", "name"),
    [
        ("fak-policy.json", "fak-policy.json.bak"),
        ("fak-policy.json", "x/fak-policy.jsonl"),
        ("fak_core/", "docs/fak_core.md"),
        ("fak_core/", "fak_core_notes/x"),
        ("secrets/*.pem", "secrets/k.pem.txt"),
    ],
)
def test_a_name_that_merely_contains_a_protected_name_is_allowed(glob: str, name: str) -> None:
    k = Kernel(Policy(allow=("write_file",), self_modify_globs=(glob,)))
    for place in PLACES:
        v = k.decide(ToolCall("write_file", json.dumps(_args(place, name))))
        assert k.kinds.name(v.kind) == "ALLOW", (place, name)
