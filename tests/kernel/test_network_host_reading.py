"""C4.3: which strings the sink classifier reads as naming a network host.

The rule is the theorem's, written out here by hand: a URL-shaped string (an RFC 3986
scheme and a colon first) names a host when the WHATWG reading finds one, when it has
``://`` and the RFC 3986 reading finds one, or when the WHATWG parser refuses it; read
bare (the default), so does an authority whose WHATWG host is a dotted name whose last
label is two or more letters, an IPv6 address, or an IPv4 address written with at least
three dots; over 65536 characters only a URL-shaped string does; and nothing else. The
expected values are hand-derived from that rule (the WHATWG facts used are the
standard's: ``localhost`` is a file URL's empty host, a port must be digits, a name
ending in a number is an IPv4 address or a failure); generated names, IPv4 forms and URLs
come from ``hostgen``, which builds them from the specs, never from ``fak_core.hosts``.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fak_core.hosts import names_network_host

from .hostgen import ipv4_text, url_of

MAX = 65536

# value, names a host when read bare, names one when not
TABLE: list[tuple[str, bool, bool]] = [
    ("", False, False),
    ("  \t", False, False),
    ("word", False, False),
    ("a b", False, False),  # no host the WHATWG parser accepts
    ("localhost", False, False),  # one label
    ("a.b", False, False),  # last label one letter
    ("a.bc", True, False),
    ("evil.example", True, False),
    ("EVIL.Example:8080", True, False),
    ("user@evil.example", True, False),
    ("evil.example/path", True, False),
    ("\uff41\uff42\uff43.example", True, False),  # fullwidth letters map to ASCII
    ("a.12", False, False),  # ends in a number: an IPv4 failure
    ("a.b1", False, False),  # last label not all letters
    ("3.14", False, False),  # an IPv4 address with one dot
    ("1.2.3", False, False),
    ("2852039166", False, False),
    ("0x7f.1", False, False),
    ("1.2.3.4", True, False),
    ("1.2.3.4:80", True, False),  # the port keeps ipaddress out; WHATWG reads it
    ("0x7f.0.0.1", True, False),
    ("::1", True, False),
    ("[::1]", True, False),
    ("[::1]:80", True, False),
    ("fe80::1%eth0", True, False),
    ("2001:db8::1", True, False),
    ("x:y", False, False),  # a scheme, no host; read bare, a port that is no number
    ("foo://", False, False),
    ("file:///etc/passwd", False, False),
    ("mailto:a@b.example", True, False),  # bare: userinfo "mailto:a", host b.example
    ("file://localhost/x", True, True),  # WHATWG empties it; RFC 3986 reads localhost
    ("http://", True, True),  # refused by the WHATWG parser
    ("http://[::1", True, True),
    ("http://evil.example/x", True, True),
    ("HTTP://EVIL.example", True, True),
    ("http:\\\\evil.example", True, True),
    ("https://1.2.3.4/", True, True),
    ("http://[::1]/", True, True),
    ("redis://10.0.0.1", True, True),
    ("ftp://a.b", True, True),
]


@pytest.mark.fak_theorem("C4.3")
@pytest.mark.parametrize(("value", "bare", "url"), TABLE, ids=[repr(t[0]) for t in TABLE])
def test_the_table(value: str, bare: bool, url: bool) -> None:
    assert names_network_host(value) is bare
    assert names_network_host(value, bare=False) is url


@pytest.mark.fak_theorem("C4.3")
def test_the_length_limit() -> None:
    """At 65536 characters a value is read; past it only a URL-shaped one names a host."""
    bare = "evil.example/"
    bare += "a" * (MAX - len(bare))
    assert names_network_host(bare) is True
    assert names_network_host(bare + "a") is False
    url = "http://evil.example/"
    url += "a" * (MAX - len(url))
    for value in (url, url + "a"):
        assert names_network_host(value) is True
        assert names_network_host(value, bare=False) is True
    assert names_network_host("x" * (MAX + 1)) is False


_label = st.text(st.sampled_from("abcXYZ"), min_size=1, max_size=4)
_last = st.text(st.sampled_from("abZ19"), min_size=1, max_size=3).filter(lambda t: not t.isdigit())


@pytest.mark.fak_theorem("C4.3")
@settings(max_examples=60, deadline=None)
@given(st.lists(_label, max_size=3), _last)
def test_generated_names(labels: list[str], last: str) -> None:
    name = ".".join([*labels, last])
    expected = bool(labels) and last.isalpha() and len(last) >= 2
    assert names_network_host(name) is expected, name
    assert names_network_host(name, bare=False) is False


@pytest.mark.fak_theorem("C4.3")
@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**32 - 1).flatmap(ipv4_text))
def test_generated_ipv4_forms(text: str) -> None:
    assert names_network_host(text) is (text.count(".") >= 3), text
    assert names_network_host(text, bare=False) is False


@pytest.mark.fak_theorem("C4.3")
@settings(max_examples=60, deadline=None)
@given(
    st.sampled_from(["evil.example", "a.bc", "10.0.0.1", "::1"]).flatmap(
        lambda h: url_of(h, ":" in h, hostile=False)
    )
)
def test_generated_urls(url: str) -> None:
    assert names_network_host(url) is True, url
    assert names_network_host(url, bare=False) is True, url
