"""Capability references are read by their grammar, checked against a hand-written reader.

The oracle below reads a reference character by character from the grammar the theorem
states (a name, an optional ``@`` selector; a SemVer 2.0.0 version, a ``sha256:`` digest of
64 lowercase hex digits, or a floating tag) and shares no regular expression with
``fak_core.flow.refs``. Texts are drawn from near misses of every part: leading zeros,
empty or numeric pre-release identifiers, short or upper-case digests, two ``@``, names
starting with a punctuation mark, non-ASCII digits.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from fak_core.flow.refs import KINDS, CapabilityRef, RefError, parse_ref

ASCII_ALNUM = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")
ASCII_DIGITS = frozenset("0123456789")
HEX = frozenset("0123456789abcdef")
TAG_CHARS = ASCII_ALNUM | frozenset("^~<>=*.+-")


def _numeric(part: str) -> bool:
    """A SemVer numeric identifier: ASCII digits, no leading zero (``0`` itself is fine)."""
    return bool(part) and set(part) <= ASCII_DIGITS and (part == "0" or part[0] != "0")


def _identifiers(text: str, *, prerelease: bool) -> bool:
    """Dot-separated non-empty ``[0-9A-Za-z-]`` identifiers; numeric ones without a leading
    zero in a pre-release (build metadata may have them)."""
    for ident in text.split("."):
        if not ident or not set(ident) <= ASCII_ALNUM | {"-"}:
            return False
        if prerelease and set(ident) <= ASCII_DIGITS and not _numeric(ident):
            return False
    return True


def semver(text: str) -> bool:
    """SemVer 2.0.0: ``MAJOR.MINOR.PATCH[-pre][+build]``."""
    core_pre, plus, build = text.partition("+")
    if plus and not _identifiers(build, prerelease=False):
        return False
    core, dash, pre = core_pre.partition("-")
    if dash and not _identifiers(pre, prerelease=True):
        return False
    parts = core.split(".")
    return len(parts) == 3 and all(_numeric(p) for p in parts)


def digest_ok(text: str) -> bool:
    hexpart = text[len("sha256:") :]
    return text.startswith("sha256:") and len(hexpart) == 64 and set(hexpart) <= HEX


def name_ok(text: str) -> bool:
    return bool(text) and text[0] in ASCII_ALNUM and set(text) <= ASCII_ALNUM | set("_.-")


@dataclass(frozen=True)
class Expected:
    name: str
    selector: str | None
    version: str | None
    digest: str | None


def read(text: str) -> Expected | None:
    """The reference ``text`` spells, or None when it is malformed."""
    at = text.find("@")
    name, selector = (text, None) if at < 0 else (text[:at], text[at + 1 :])
    if not name_ok(name):
        return None
    if selector is None:
        return Expected(name, None, None, None)
    if not selector or not (set(selector) <= TAG_CHARS or digest_ok(selector)):
        return None
    return Expected(
        name,
        selector,
        selector if semver(selector) else None,
        selector if digest_ok(selector) else None,
    )


NUMS = st.sampled_from(["0", "1", "7", "10", "42", "01", "00", "", "٣", "1٣"])
IDENTS = st.sampled_from(["alpha", "rc", "1", "0", "01", "x-y", "-", "", "Z9", "0a", "00"])


@st.composite
def versions(draw: st.DrawFn) -> str:
    core = ".".join(draw(st.lists(NUMS, min_size=2, max_size=4)))
    pre = draw(st.lists(IDENTS, max_size=3))
    build = draw(st.lists(IDENTS, max_size=2))
    text = core
    if pre or draw(st.booleans()):
        text += "-" + ".".join(pre)
    if build or draw(st.booleans()):
        text += "+" + ".".join(build)
    return text


@st.composite
def digests(draw: st.DrawFn) -> str:
    n = draw(st.sampled_from([64, 64, 63, 65]))
    hexpart = draw(st.text(alphabet="0123456789abcdefABG", min_size=n, max_size=n))
    return draw(st.sampled_from(["sha256:", "sha256:", "SHA256:", "sha512:"])) + hexpart


TAGS = st.sampled_from(["latest", "^1.4", "1.4", "~1", ">=1.0.0", "*", "stable", "1.2.x", "a:b"])
NAMES = st.one_of(
    st.sampled_from(["planning", "read_file", "a", "A.b-c_d", "0x", "_x", "-x", ".x", "é", ""]),
    st.text(alphabet="aZ09_.-", min_size=1, max_size=6),
)
SELECTORS = st.one_of(versions(), digests(), TAGS, st.text(alphabet="a1.-+@ :^", max_size=6))


@st.composite
def ref_texts(draw: st.DrawFn) -> str:
    name = draw(NAMES)
    if draw(st.integers(0, 4)) == 0:
        return name
    return f"{name}@{draw(SELECTORS)}"


@pytest.mark.fak_theorem("F1.7")
@settings(max_examples=400, deadline=None)
@given(kind=st.sampled_from(KINDS), text=ref_texts())
@example(kind="skill", text="planning@1.2.3-01")
@example(kind="skill", text="planning@1.2.3-a..b")
@example(kind="skill", text="planning@1.2.3-rc.1+build.005")
@example(kind="tool", text="planning@1.2.3+")
@example(kind="tool", text="a@sha256:" + "0" * 64)
@example(kind="extension", text="a@b@c")
def test_a_reference_reads_as_its_grammar_says(kind: str, text: str) -> None:
    want = read(text)
    if want is None:
        with pytest.raises(RefError):
            parse_ref(kind, text)
        return
    ref = parse_ref(kind, text)
    assert (ref.kind, ref.name, ref.selector) == (kind, want.name, want.selector)
    assert (ref.version, ref.digest) == (want.version, want.digest)
    exact = want.version is not None or want.digest is not None
    assert (ref.exact, ref.floating) == (exact, not exact)
    assert ref.key == f"{kind}:{want.name}"
    assert str(ref) == text


@pytest.mark.fak_theorem("F1.7")
@settings(max_examples=300, deadline=None)
@given(kind=st.sampled_from(KINDS), name=NAMES, selector=st.one_of(st.none(), SELECTORS))
def test_a_reference_built_from_parts_classifies_its_selector(
    kind: str, name: str, selector: str | None
) -> None:
    """The manifest's readers build references from text without ``parse_ref``: the
    selector alone decides version, digest and exactness."""
    ref = CapabilityRef(kind, name, selector)
    version = selector if selector is not None and semver(selector) else None
    dig = selector if selector is not None and digest_ok(selector) else None
    assert (ref.version, ref.digest) == (version, dig)
    assert (ref.exact, ref.floating) == (
        version is not None or dig is not None,
        version is None and dig is None,
    )
    assert ref.key == f"{kind}:{name}"


@pytest.mark.fak_theorem("F1.7")
@pytest.mark.parametrize("kind", ["", "skills", "Tool", "model"])
def test_an_unknown_kind_is_refused(kind: str) -> None:
    with pytest.raises(RefError, match="unknown capability kind"):
        parse_ref(kind, "planning@1.4.2")


@pytest.mark.fak_theorem("F1.7")
@pytest.mark.parametrize("text", [None, 7, b"planning@1.0.0", ["planning"]])
def test_a_reference_that_is_not_text_is_refused(text: object) -> None:
    with pytest.raises(RefError, match="expected a reference"):
        parse_ref("tool", text)  # type: ignore[arg-type]
