"""The floor's guards against hostile arguments: the self-modify guard and redaction see
every key and string at any depth (D2.4, D2.5), and every check on the decision path is
linear in the arguments (D2.6).

The oracles never call the code under test: a generated call knows where it planted a
protected path or a redacted key, and the expected output of redaction is computed from
the planted names by a plain recursive delete.
"""

from __future__ import annotations

import fnmatch
import json
import posixpath
import re
import shlex
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from fak_core import (
    Kernel,
    Policy,
    ToolCall,
    VerdictKind,
    admission,
    floor,
    jsonargs,
    selfmodify,
    sinks,
)
from fak_core.globmatch import Glob, compile_glob
from fak_core.hosts import names_network_host

# ----------------------------------------------------------------- D2.4 self-modify anywhere
# the last two hold a space and a shell separator: a plain shell word cut at them is not
# the path, so the shell's own reading of the words (and a patch header's name) must be
GLOBS = (
    "fak_core/",
    "theorems/",
    ".fak/",
    "fak-policy.json",
    "secrets/*.pem",
    "My Docs/",
    "data,v2/",
)
WRITERS = ("write_file", "apply_patch", "run_shell", "exec_command", "edit", "save_notes")
# Filler can never spell a protected name: no glob's literal pieces fit in this alphabet.
FILLER = st.text(st.sampled_from("abcde 012\n"), max_size=12)
KEYS = st.text(st.sampled_from("abcde"), min_size=1, max_size=6)
BENIGN_PATH = "notes/todo.txt"
# (glob, a path under it, the same path under a directory no glob covers: it differs in
# its first letter, so no word the readings cut from it is a protected name)
UNDER = {
    "fak_core/": ("fak_core/", "xak_core/"),
    "theorems/": ("theorems/", "xheorems/"),
    ".fak/": (".fak/", ".xak/"),
    "My Docs/": ("My Docs/", "Xy Docs/"),
    "data,v2/": ("data,v2/", "xata,v2/"),
}
TAILS = ("kernel.py", "x/y.md", "deep/er/file", "a b.txt", "-x.py", "a=b:c.txt")
PREFIXES = ("", "./", "/work/repo/", "a/b/", "x/../", "./x/../y/", "a=b/", "-o/")
# Windows spellings: a drive, a drive-relative path, a UNC or device path
WIN_PREFIXES = ("", "C:\\", "C:", "D:\\repo\\", "\\\\server\\share\\", "\\\\?\\C:\\", ".\\")


@st.composite
def path_pairs(draw: st.DrawFn) -> tuple[str, str]:
    """(a concrete path one of GLOBS covers, by construction; the same path, spelled the
    same way, that none covers)."""
    glob = draw(st.sampled_from(GLOBS))
    prefix = draw(st.sampled_from(PREFIXES))
    if glob in UNDER:
        tail = draw(st.sampled_from(TAILS))
        good, bad = UNDER[glob]
        pair = (prefix + good + tail, prefix + bad + tail)
    elif "*" in glob:
        stem = draw(KEYS) + ".pem"
        pair = (prefix + "secrets/" + stem, prefix + "xecrets/" + stem)
    else:
        pair = (prefix + glob, prefix + "xak-policy.json")
    if draw(st.booleans()):  # a Windows spelling
        win = draw(st.sampled_from(WIN_PREFIXES))
        pair = (win + pair[0].replace("/", "\\"), win + pair[1].replace("/", "\\"))
    return pair


@st.composite
def protected_paths(draw: st.DrawFn) -> str:
    """A concrete path that one of GLOBS covers, by construction."""
    return draw(path_pairs())[0]


# The spellings of one word in a POSIX shell (XCU 2.2) and the shells agents drive:
# unquoted (only where nothing in the path is special), single- and double-quoted, quoted
# in part, backslash-escaped, ANSI-C ($'...' with hex and octal escapes), $"...", and with
# a line continuation (backslash-newline) anywhere outside quotes.
QUOTES = (
    "plain",
    "single",
    "double",
    "split",
    "split-double",
    "escaped",
    "ansi",
    "dollar-double",
    "continued",
)
_SPECIAL = set(" \t\n'\"\\;&|<>()`$*?[#~=%{},:")


def _quote_as(how: str, p: str, i: int) -> str:
    """``p`` as one shell word, quoted ``how`` (``i`` picks a position); a Windows path
    (with backslashes) bare or in double quotes as Windows shells take it, otherwise only
    in quotes that keep a backslash."""
    win = "\\" in p
    i = i % max(1, len(p))
    if how == "plain" and win and " " not in p:
        return p  # as cmd.exe and PowerShell take it (a POSIX shell reads escapes)
    if how == "single" or (how in ("plain", "escaped", "continued") and win):
        return f"'{p}'"
    if how == "double":  # a Windows path as cmd.exe takes it, backslashes single
        return '"' + (p if win else p.replace("\\", "\\\\")) + '"'
    if how == "dollar-double":
        return '$"' + p.replace("\\", "\\\\") + '"'
    if how in ("split", "split-double"):  # a'b c'd: the shell joins the pieces
        j = min([i] + [k for k, c in enumerate(p) if c in _SPECIAL])  # (none left bare)
        return f"{p[:j]}'{p[j:]}'" if how == "split" else f'{p[:j]}"{p[j:]}"'
    if how == "ansi":  # every other character as a hex or octal escape
        out = []
        for j, c in enumerate(p):
            if c in "\\'":
                out.append("\\" + c)
            elif j % 2 == i % 2:
                out.append(f"\\x{ord(c):02x}" if j % 4 < 2 else f"\\{ord(c):03o}")
            else:
                out.append(c)
        return "$'" + "".join(out) + "'"
    # each special character (and the one at i, needlessly) escaped by a backslash
    units = ["\\" + c if c in _SPECIAL or j == i else c for j, c in enumerate(p)]
    if how == "continued":  # a backslash-newline is removed before the word is read
        units.insert(i, "\\\n")
    elif how == "plain" and not any(c in _SPECIAL for c in p):
        return p
    return "".join(units)


def _quote(draw: st.DrawFn, p: str) -> str:
    return _quote_as(draw(st.sampled_from(QUOTES)), p, draw(st.integers(0, 64)))


PATCHES = (
    "*** Begin Patch\n*** Update File: {p}\n@@\n-a\n+b\n*** End Patch",
    "*** Begin Patch\n*** Add File: {p}\n+hello\n*** End Patch",
    "*** Begin Patch\n*** Delete File: {p}\n*** End Patch",
    "*** Begin Patch\n*** Update File: notes.txt\n*** Move to: {p}\n@@\n-a\n+b\n*** End Patch",
    "--- a/notes.txt\n+++ b/{p}\t2026-01-01 00:00:00\n@@ -1 +1 @@\n-a\n+b\n",
    "--- a/{p}\n+++ /dev/null\n@@ -1 +0,0 @@\n-a\n",
    "diff --git a/notes.txt b/{p}\nrename from notes.txt\nrename to {p}\n",
    "diff --git a/notes.txt b/notes.txt\ncopy from notes.txt\ncopy to {p}\n",
    "Index: {p}\n===\n--- {p}\n+++ {p}\n",
    "--- a/{p}\t2026-01-01 00:00:00\n+++ /dev/null\n@@ -1 +0,0 @@\n-a\n",
    '--- "a/notes.txt"\n+++ "b/{p}"\n@@ -1 +1 @@\n-a\n+b\n',
    # a quoted name after a body line whose quotes a shell would pair across the headers
    '--- a/x\n+++ b/x\n@@ -1 +1 @@\n-don\'t "quote\n+ok\n--- "a/notes.txt"\n+++ "b/{p}"\n',
    "*** Update File: {p}",  # one header line on its own
    "  *** Delete File: {p}  ",  # indented, trailing blanks
)
# Where a word stands in a command: an argument, a redirection's target (every POSIX
# redirection operator, with an IO number, glued or not), an option's value (--opt=,
# --opt v, -ov, -o v, key=value, /opt:value), after each separator and grouping, in a
# command substitution, and in a nested command string (one level).
SHELL = (
    "echo x > {q}",
    "echo x >{q}",
    "echo x >>{q}",
    "echo x 2>{q}",
    "echo x &>{q}",
    "echo x >|{q}",
    "cat <{q}>/dev/null",
    "exec 3<>{q}",
    "sed -i s/a/b/ {q}",
    "cp notes.txt {q} && ls",
    "true || rm -f {q}",
    "python -c 'print(1)'; rm -f {q}",
    "ls | tee {q}",
    "sleep 1 & touch {q}",
    "tee --output={q} < in.txt",
    "sort --output {q} in.txt",
    "gcc -o{q} main.c",
    "curl -o {q} https://example.com/x",
    "dd if=in.txt of={q}",
    "F={q} make",
    "robocopy src /log:{q}",
    "cat <<EOF >{q}\nhi\nEOF",
    "(cd /tmp;mv x {q})",
    "{{ echo; cat; }} >{q}",
    "echo `cat {q}`",
    "echo $(touch {q})",
    "echo a\ntouch {q}",
    'sh -c "echo x > {q}"',
)


@st.composite
def shell_commands(draw: st.DrawFn, path: str) -> tuple[str, tuple[str, str]]:
    """A command naming ``path``: (template, (how quoted, position))."""
    template = draw(st.sampled_from(SHELL))
    how = draw(st.sampled_from(QUOTES))
    i = draw(st.integers(0, 64))
    if "sh -c" in template and (how in ("double", "dollar-double", "split-double") or "\\" in path):
        how = "single"  # (one level of nesting: the inner word in the outer's quotes)
    return template, (how, str(i))


def in_command(template: str, quoting: tuple[str, str], path: str) -> str:
    return template.format(q=_quote_as(quoting[0], path, int(quoting[1])))


@st.composite
def carrier_pairs(draw: st.DrawFn, pair: tuple[str, str]) -> tuple[str, str, str]:
    """(how, text naming pair[0], the same text naming pair[1]): the path as a whole
    string, a key, inside a patch body, or in a shell command."""
    how = draw(st.sampled_from(["plain", "patch", "shell", "key"]))
    if how == "patch":
        patch = draw(st.sampled_from(PATCHES))
        if draw(st.booleans()):
            patch = patch.replace("\n", "\r\n")
        return how, patch.format(p=pair[0]), patch.format(p=pair[1])
    if how == "shell":
        template, quoting = draw(shell_commands(pair[0]))
        return how, in_command(template, quoting, pair[0]), in_command(template, quoting, pair[1])
    return how, pair[0], pair[1]


@st.composite
def carriers(draw: st.DrawFn, path: str) -> tuple[str, str]:
    """(how, text): ``path`` as a whole string, inside a patch body, or in a shell command."""
    how, text, _ = draw(carrier_pairs((path, path)))
    return how, text


@st.composite
def planted(draw: st.DrawFn, leaf: Any) -> Any:
    """``leaf`` at a random depth (0-8) of objects and arrays with benign siblings."""
    value = leaf
    for _ in range(draw(st.integers(0, 8))):
        if draw(st.booleans()):
            siblings = draw(st.dictionaries(KEYS, FILLER, max_size=3))
            key = draw(KEYS)
            siblings.pop(key, None)
            items = [*siblings.items()]
            items.insert(draw(st.integers(0, len(items))), (key, value))
            value = dict(items)
        else:
            items = draw(st.lists(FILLER, max_size=3))
            items.insert(draw(st.integers(0, len(items))), value)
            value = items
    if not isinstance(value, dict):
        value = {draw(KEYS): value}
    return value


def _embed(draw: st.DrawFn, how: str, text: str) -> Any:
    if how == "key":
        return draw(planted({text: draw(FILLER)}))
    return draw(planted(text))


def _self_modify_kernel(tool: str) -> Kernel:
    return Kernel(Policy(allow=(tool,), self_modify_globs=GLOBS))


@pytest.mark.fak_theorem("D2.4")
@settings(suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_a_protected_path_anywhere_in_the_arguments_is_denied(data: st.DataObject) -> None:
    tool = data.draw(st.sampled_from(WRITERS), label="tool")
    k = _self_modify_kernel(tool)
    for _ in range(4):  # several paths and carriers per example
        pair = data.draw(path_pairs(), label="paths")
        how, text, twin = data.draw(carrier_pairs(pair), label="carrier")
        args = _embed(data.draw, how, text)
        raw = json.dumps(args)
        v = k.decide(ToolCall(tool, raw))
        assert (k.kinds.name(v.kind), k.reasons.name(v.reason)) == ("DENY", "SELF_MODIFY"), args
        assert v.claim in GLOBS
        # the same call naming the same path under an unprotected directory, spelled and
        # placed the same way, is allowed: the deny is about the path, not the shape
        benign = json.loads(raw.replace(json.dumps(text)[1:-1], json.dumps(twin)[1:-1]))
        assert k.decide(ToolCall(tool, json.dumps(benign))).kind == VerdictKind.ALLOW, benign


def _table_paths(glob: str) -> list[tuple[str, str]]:
    """For the exhaustive table: paths under ``glob`` and their twins, with a space in
    a part, POSIX and Windows spellings (bare, drive, drive-relative, UNC)."""
    if glob in UNDER:
        good, bad = UNDER[glob]
        pairs = [(good + t, bad + t) for t in ("kernel.py", "a b.txt")]
    elif "*" in glob:
        pairs = [("secrets/k.pem", "xecrets/k.pem"), ("secrets/a b.pem", "xecrets/a b.pem")]
    else:
        pairs = [(glob, "xak-policy.json"), ("a b/" + glob, "a b/xak-policy.json")]
    good, bad = pairs[0]
    for win in ("", "C:\\", "C:", "\\\\server\\share\\"):
        pairs.append((win + good.replace("/", "\\"), win + bad.replace("/", "\\")))
    return pairs


@pytest.mark.fak_theorem("D2.4")
@pytest.mark.parametrize("glob", GLOBS)
def test_every_spelling_in_every_place_under_every_glob(glob: str) -> None:
    """The whole class, exhaustively for one path of each shape: every command template
    (redirections, option forms, separators, nesting) with every quoting style at two
    positions, and every patch header in LF and CRLF; each denied, each twin allowed."""
    k = _self_modify_kernel("run_shell")
    texts: list[tuple[str, str]] = []
    for good, bad in _table_paths(glob):
        for template in SHELL:
            for how in QUOTES:
                if "sh -c" in template and (
                    how in ("double", "dollar-double", "split-double") or "\\" in good
                ):
                    how = "single"
                for i in (1, 6):
                    q = (how, str(i))
                    texts.append((in_command(template, q, good), in_command(template, q, bad)))
        for patch in PATCHES:
            for eol in ("\n", "\r\n"):
                texts.append(
                    (
                        patch.replace("\n", eol).format(p=good),
                        patch.replace("\n", eol).format(p=bad),
                    )
                )
    for text, twin in texts:
        v = k.decide(ToolCall("run_shell", json.dumps({"c": text})))
        assert (k.reasons.name(v.reason), v.claim) == ("SELF_MODIFY", glob), text
        v = k.decide(ToolCall("run_shell", json.dumps({"c": twin})))
        assert v.kind == VerdictKind.ALLOW, twin


@pytest.mark.fak_theorem("D2.4")
@pytest.mark.parametrize(
    "args",
    [
        {"path": "notes.txt", "file_path": "fak_core/kernel.py"},  # a second path key
        {"edits": [{"file": {"path": "fak_core/floor.py"}}]},  # nested
        {"input": "*** Begin Patch\n*** Update File: fak_core/floor.py\n*** End Patch"},
        {"patch": "--- a/x\n+++ b/theorems/policy.md\n"},
        {"command": "printf x >> fak-policy.json"},
        {"command": "rm -rf 'unbalanced .fak/cache"},  # shlex cannot read it; the split can
        {"files": {"fak_core/x.py": "print(1)"}},  # the path as a key
        {"command": "echo x > data,v2/notes.txt"},  # a plain word holding a separator
        {"input": "*** Update File: My Docs/notes"},  # one header line on its own
    ],
)
def test_each_reported_bypass_is_denied(args: dict[str, Any]) -> None:
    k = _self_modify_kernel("write_file")
    v = k.decide(ToolCall("write_file", json.dumps(args)))
    assert k.reasons.name(v.reason) == "SELF_MODIFY"


@pytest.mark.fak_theorem("D2.4")
def test_what_the_guard_reads_and_what_it_leaves() -> None:
    k = _self_modify_kernel("write_file")

    def reason(args: dict[str, Any]) -> str:
        return k.reasons.name(k.decide(ToolCall("write_file", json.dumps(args))).reason)

    # prose that merely mentions a directory name, or a file elsewhere, is not a target
    assert reason({"content": "the kernel lives in fak_core"}) == "NONE"
    assert reason({"path": "docs/fak_core.md"}) == "NONE"
    assert reason({"path": "fak_core_notes/x"}) == "NONE"
    # but a word that is a protected path is, wherever it stands
    assert reason({"content": "see fak_core/kernel.py"}) == "SELF_MODIFY"
    # a read-shaped tool is not guarded (the guard is for writes)
    r = Kernel(Policy(allow=("read_file",), self_modify_globs=GLOBS))
    assert r.decide(ToolCall("read_file", '{"path": "fak_core/kernel.py"}')).kind == (
        VerdictKind.ALLOW
    )


def _shlex_words(text: str) -> list[str]:
    """The oracle: the words :mod:`shlex` reads in POSIX mode with the shell's operator
    characters, without the operators."""
    lexer = shlex.shlex(text, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    lexer.commenters = ""
    return _no_operators(lexer)


def _no_operators(words: Any) -> list[str]:
    # shlex does not say whether ';' was an operator or a quoted word: neither side has them
    return [w for w in words if not (w and set(w) <= set("();<>|&"))]


SHELL_ALPHABET = "ab '\"\\\t\n\r;|&<>()=-/"


@pytest.mark.fak_theorem("D2.4")
@given(st.text(st.sampled_from(SHELL_ALPHABET), max_size=16))
def test_shell_words_are_the_words_shlex_reads(text: str) -> None:
    """Differential against :mod:`shlex` on its common ground with the POSIX shell (no
    ``$``, no backquote, no backslash-newline, which it reads differently from sh)."""
    got = selfmodify.shlex_words(text)
    try:
        want = _shlex_words(text)
    except ValueError:  # shlex refuses it; the guard's reader still answers, without raising
        assert isinstance(got, list)
        return
    if "\\\n" not in text:
        assert _no_operators(got) == want


@pytest.mark.fak_theorem("D2.4")
@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("a\\\nb c", ["ab", "c"]),  # line continuation outside quotes
        ('"a\\\nb"', ["ab"]),  # and in double quotes
        ("'a\\\nb'", ["a\\\nb"]),  # not in single quotes
        ('"a\\$b\\`c"', ["a$b`c"]),  # \$ and \` escaped in double quotes
        ("$'a\\x41\\101\\u0041\\tb\\'c\\\\'", ["aAAA\tb'c\\"]),  # ANSI-C quoting
        ('$"a b"$c', ["a b$c"]),
        ("echo `cat x`$(y)", ["echo", "cat", "x", "$", "y"]),
        ("a\\", ["a\\"]),  # a final backslash stands for itself
    ],
)
def test_shell_words_as_the_shell_reads_them(text: str, words: list[str]) -> None:
    assert selfmodify.shlex_words(text) == words


@pytest.mark.fak_theorem("D2.4")
def test_a_quoted_path_with_spaces_under_a_wildcard_glob() -> None:
    k = Kernel(Policy(allow=("run_shell",), self_modify_globs=("secrets/*.pem", "My Docs/")))
    for command in ("cp x 'secrets/a b.pem'", 'cat > "My Docs/notes"', "mv x My\\ Docs/y"):
        v = k.decide(ToolCall("run_shell", json.dumps({"command": command})))
        assert k.reasons.name(v.reason) == "SELF_MODIFY", command


# ----------------------------------------------------------------- D2.5 redaction anywhere
FIELDS = ("password", "api_key", "token", "secret", "authorization", "client-secret")
BENIGN_KEYS = st.text(st.sampled_from("xyz0"), min_size=1, max_size=5)
LEAVES = st.one_of(st.text(max_size=6), st.integers(), st.booleans(), st.none())


@st.composite
def spellings(draw: st.DrawFn, field: str) -> str:
    """``field``'s letters in any case, with any of - _ . and space between them."""
    letters = [c for c in field if c.isalnum()]
    out = []
    for i, c in enumerate(letters):
        if i and draw(st.integers(0, 3)) == 0:
            out.append(draw(st.sampled_from("-_. ")))
        out.append(c.upper() if draw(st.booleans()) else c)
    return "".join(out)


@st.composite
def redaction_cases(draw: st.DrawFn) -> tuple[tuple[str, ...], Any, set[str]]:
    """(policy fields, arguments, the exact key spellings planted in them)."""
    fields = tuple(draw(st.lists(st.sampled_from(FIELDS), min_size=1, max_size=3, unique=True)))
    plant: set[str] = set()

    def node(depth: int) -> Any:
        if depth == 0 or draw(st.integers(0, 2)) == 0:
            return draw(LEAVES)
        if draw(st.booleans()):
            return [node(depth - 1) for _ in range(draw(st.integers(0, 3)))]
        obj: dict[str, Any] = {}
        for _ in range(draw(st.integers(0, 3))):
            if draw(st.integers(0, 3)) == 0:
                key = draw(spellings(draw(st.sampled_from(fields))))
                plant.add(key)
            else:
                key = draw(BENIGN_KEYS)
            obj[key] = node(depth - 1)
        return obj

    args = {
        draw(BENIGN_KEYS): node(draw(st.integers(1, 7))) for _ in range(draw(st.integers(1, 3)))
    }
    return fields, args, plant


def _without(value: Any, names: set[str]) -> Any:
    """The oracle: ``value`` with every key in ``names`` deleted, at every depth."""
    if isinstance(value, dict):
        return {k: _without(v, names) for k, v in value.items() if k not in names}
    if isinstance(value, list):
        return [_without(v, names) for v in value]
    return value


def _dropped(value: Any, names: set[str]) -> set[str]:
    """The keys in ``names`` that redaction meets: not those under a key it drops."""
    if isinstance(value, dict):
        here = {k for k in value if k in names}
        return here.union(*(_dropped(v, names) for k, v in value.items() if k not in names))
    if isinstance(value, list):
        return set().union(*(_dropped(v, names) for v in value))
    return set()


@pytest.mark.fak_theorem("D2.5")
@given(redaction_cases())
@example(case=(("api_key",), {"0": [{"api_key": ""}, -(2**63) - 1]}, {"api_key"}))
def test_every_redacted_key_at_every_depth_is_removed(
    case: tuple[tuple[str, ...], Any, set[str]],
) -> None:
    fields, args, plant = case
    k = Kernel(Policy(allow=("get_x",), redact_fields=fields))
    v = k.decide(ToolCall("get_x", json.dumps(args)))
    present = _dropped(args, plant)
    if not present:
        assert v.kind == VerdictKind.ALLOW
        return
    assert v.kind == VerdictKind.TRANSFORM
    # the oracle reads the arguments as rung 0 does (an integer beyond 64 bits is a double)
    read = jsonargs.parse_args(json.dumps(args))
    assert json.loads(v.repaired_args or "") == _without(read, present)
    assert set(v.meta["redacted"].split(",")) == present


@pytest.mark.fak_theorem("D2.5")
def test_the_reported_nested_password_is_redacted() -> None:
    k = Kernel(Policy(allow=("login",), redact_fields=("password", "api_key")))
    v = k.decide(ToolCall("login", '{"auth": {"Password": "hunter2", "user": "u"}, "n": 1}'))
    assert v.kind == VerdictKind.TRANSFORM
    assert json.loads(v.repaired_args or "") == {"auth": {"user": "u"}, "n": 1}
    v = k.decide(ToolCall("login", '{"h": [{"API-Key": "k"}, {"apiKey": "k"}]}'))
    assert json.loads(v.repaired_args or "") == {"h": [{}, {}]}
    # equality after normalisation, not a substring: these stay
    v = k.decide(ToolCall("login", '{"password_hint": "x", "max_tokens": 3}'))
    assert v.kind == VerdictKind.ALLOW


# ----------------------------------------------------------------- D2.6 linear checks
def _old_glob_matches(path: str, glob: str, anchored: bool = False) -> bool:
    """The fnmatch-based matcher this project used before (the semantic reference)."""
    p = posixpath.normpath(path.replace("\\", "/"))
    pattern = glob + "*" if glob.endswith("/") else glob
    if anchored:
        return fnmatch.fnmatchcase(p, pattern)
    parts = p.split("/")
    return any(fnmatch.fnmatchcase("/".join(parts[i:]), pattern) for i in range(len(parts)))


GLOB_ALPHABET = "ab/.*?[]!-\\^"


@pytest.mark.fak_theorem("D2.6")
@given(
    st.text(st.sampled_from("ab/.-[]!\\^"), max_size=12),
    st.text(st.sampled_from(GLOB_ALPHABET), max_size=8),
    st.booleans(),
)
def test_the_linear_glob_matcher_means_what_fnmatch_means(
    path: str, glob: str, anchored: bool
) -> None:
    assert floor.glob_matches(path, glob, anchored) == _old_glob_matches(path, glob, anchored)


ADVERSARIAL_GLOBS = ("fak_core/", "*a*a*a*b", "?*?*?*x", "[!a]*[a-c]*z", "a/*/b/*/c", "**/x")
UNITS = ("a/", "aa/a", "fak_core/..", "a*", "/", "ab", "x/", "a/b", "a/x", "xaz", "a/b/c")


@pytest.mark.fak_theorem("D2.6")
@given(
    st.sampled_from(ADVERSARIAL_GLOBS),
    st.sampled_from(UNITS),
    st.integers(0, 11),
    st.booleans(),
)
def test_glob_matching_takes_one_step_per_character(
    glob: str, unit: str, power: int, anchored: bool
) -> None:
    text = unit * (1 << power)
    path = posixpath.normpath(text)
    matched, steps = compile_glob(selfmodify.glob_pattern(glob)).run(path, anchored)
    assert steps <= len(path)
    if len(text) <= 64:  # the reference is quadratic: only on small inputs
        assert matched == _old_glob_matches(text, glob, anchored)


@pytest.mark.fak_theorem("D2.6")
@settings(suppress_health_check=[HealthCheck.too_slow])
@given(
    st.sampled_from(
        [
            "x/fak_corex/" + "a/" * 600,  # names a glob's piece but never matches
            "fak_core" + "/a" * 600,
            "'fak_core'" + " fak_corey/a" * 200,
            "*** Update File: fak_corez/" + "a/" * 400 + "\n" + "--- fak_coreq\n" * 100,
            "a@" + "." * 1500 + "@",
            ("a." * 700) + "!",
        ]
    ),
    st.integers(0, 3),
)
def test_the_guard_walk_is_linear_in_the_arguments(text: str, depth: int) -> None:
    """Every character the guard's glob matchers read, summed over a decision, is at most
    a constant times the size of the arguments (5 candidate readings per glob)."""
    args: Any = {"content": text, text[:40]: [text[::-1]]}
    for _ in range(depth):
        args = {"d": [args]}
    raw = json.dumps(args)
    steps = 0
    real_run = Glob.run

    def counting(self: Glob, t: str, anchored: bool) -> tuple[bool, int]:
        nonlocal steps
        out = real_run(self, t, anchored)
        steps += out[1]
        return out

    k = _self_modify_kernel("write_file")
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(Glob, "run", counting)
        k.decide(ToolCall("write_file", raw))
    assert steps <= 5 * len(GLOBS) * len(raw)


# Every pattern that runs on arguments or results (read when the test runs, so that a
# mutant's replacement is the one audited).
PATTERNS = {
    "sinks": ("_EMAIL", "_HOST", "_EXEC", "_DESTRUCTIVE", "_EGRESS"),
    "floor": ("_WRITE",),
    "jsonargs": ("_KEY_END_STR", "_KEY_END_BYTES"),
    "selfmodify": (
        "_SPLIT",
        "_GATE_CUT",
        "_WORD",
        "_SEGMENT",
        "_DQ_ESCAPE",
        "_ANSI",
        "_WIN_WORD",
        "_NESTED",
        "_SHELLISH",
    ),
}
MODULES = {"sinks": sinks, "floor": floor, "jsonargs": jsonargs, "selfmodify": selfmodify}
AUDITED = [f"{m}.{n}" for m, names in PATTERNS.items() for n in names] + [
    f"admission.SECRET_PATTERNS[{i}]" for i in range(len(admission.SECRET_PATTERNS))
]


def _pattern(name: str) -> re.Pattern[Any]:
    if name.startswith("admission."):
        return re.compile(admission.SECRET_PATTERNS[int(name.split("[")[1][:-1])])
    module, attr = name.split(".")
    return getattr(MODULES[module], attr)  # type: ignore[no-any-return]


def _backtracking_repeats(pattern: str | bytes, flags: int) -> list[str]:
    """The repeats in ``pattern`` that can backtrack without bound: every greedy unbounded
    repeat (``*``, ``+``, ``{n,}``), and a lazy unbounded one inside another unbounded
    repeat. Possessive repeats (``*+``, ``++``, ``{n,}+``) and bounded ones pass."""
    import re._constants as c
    import re._parser as p

    found: list[str] = []

    def walk(items: Any, nested: bool) -> None:
        for op, av in items:
            if op in (c.MAX_REPEAT, c.MIN_REPEAT, c.POSSESSIVE_REPEAT):
                lo, hi, body = av
                unbounded = hi == c.MAXREPEAT
                if unbounded and (op == c.MAX_REPEAT or (op == c.MIN_REPEAT and nested)):
                    found.append(f"{op} {{{lo},}}")
                walk(body, nested or unbounded)
            elif op == c.SUBPATTERN:
                walk(av[3], nested)
            elif op == c.ATOMIC_GROUP:
                walk(av, nested)
            elif op == c.BRANCH:
                for alt in av[1]:
                    walk(alt, nested)
            elif op in (c.ASSERT, c.ASSERT_NOT):
                walk(av[1], nested)

    walk(p.parse(pattern, flags), nested=False)
    return found


@pytest.mark.fak_theorem("D2.6")
@pytest.mark.parametrize("name", AUDITED)
def test_no_pattern_on_the_decision_path_can_backtrack(name: str) -> None:
    regex = _pattern(name)
    assert _backtracking_repeats(regex.pattern, regex.flags) == [], regex.pattern


OLD_PATTERNS = {
    "_EMAIL": re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$"),
    "_HOST": re.compile(r"^(?:[a-z0-9-]+\.)+[a-z]{2,63}\.?(?::\d+)?(?:/\S*)?$", re.I),
}
OLD_SECRETS = re.compile(
    "|".join(
        f"(?:{p})"
        for p in (
            r"sk-[A-Za-z0-9_\-]{20,}",
            r"AKIA[0-9A-Z]{16}",
            r"-----BEGIN (?:[A-Z ]+ )?PRIVATE KEY-----",
            r"gh[pousr]_[A-Za-z0-9]{30,}",
            r"xox[abposr]-[A-Za-z0-9\-]{10,}",
            r"AIza[0-9A-Za-z_\-]{35}",
        )
    )
)


def _old_looks_external(value: str) -> bool:
    """``looks_external`` (unkeyed) with the e-mail and host patterns as they were
    (backtracking); URLs and addresses are read by the host canonicaliser either way."""
    v = value.strip()
    if not v or " " in v or not ("." in v or "@" in v or ":" in v or not v.isascii()):
        return False
    host = OLD_PATTERNS["_HOST"].match(v)
    if host and v.rsplit(".", 1)[-1].lower() in sinks._FILE_SUFFIXES and "/" not in v:
        return False
    return bool(OLD_PATTERNS["_EMAIL"].match(v) or "xn--" in v.lower() or names_network_host(v))


SINK_TEXT = st.text(st.sampled_from("ab1-.:/@ \n\t\u212a\u017fA9x\u0663+"), max_size=16)
SECRET_TEXT = st.lists(
    st.sampled_from(["-----BEGIN ", "PRIVATE KEY-----", " ", "A", "PRIVATE ", "sk-", "a" * 7, "-"]),
    max_size=10,
).map("".join)


@pytest.mark.fak_theorem("D2.6")
@given(SINK_TEXT, SECRET_TEXT)
def test_the_possessive_patterns_match_what_the_backtracking_ones_did(
    text: str, secret: str
) -> None:
    for name, old in OLD_PATTERNS.items():
        assert bool(getattr(sinks, name).match(text)) == bool(old.match(text)), (name, text)
    assert sinks.looks_external(text, False) == _old_looks_external(text)
    new = re.compile("|".join(f"(?:{p})" for p in admission.SECRET_PATTERNS))
    a, b = new.search(secret), OLD_SECRETS.search(secret)
    assert (a and a.span()) == (b and b.span()), secret
