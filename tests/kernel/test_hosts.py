"""Denied hosts are refused in every encoding (D2.7): the floor reads every string
argument with one host canonicaliser (``fak_core.hosts``)."""

from __future__ import annotations

import ipaddress
import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from ada_url import URL
from hypothesis import assume, given
from hypothesis import strategies as st

from fak_core import (
    HostDenyList,
    HostError,
    Kernel,
    Policy,
    PolicyError,
    Sink,
    ToolCall,
    canonical_host,
    classify,
    default_policy,
    destination_hosts,
    load_policy,
)
from fak_core.gateway.app import create_app
from fak_core.gateway.state import GatewayState
from fak_core.hosts import url_host
from pytest_fak.fixtures import serve_app
from tests.kernel.hostgen import (
    DENIED_NETS,
    DENIED_V4,
    DENIED_V6,
    DENY_ENTRIES,
    SPECIAL,
    bare_of,
    denied_target,
    ipv4_text,
    ipv6_text,
    nested,
    ordinary_target,
    url_of,
)

KERNEL = Kernel(Policy(allow=("http_get",), deny_hosts=DENY_ENTRIES))


def _decide(kernel: Kernel, args: Any, tool: str = "http_get") -> tuple[str, str, str]:
    v = kernel.decide(ToolCall(tool, json.dumps(args)))
    return kernel.kinds.name(v.kind), kernel.reasons.name(v.reason), v.claim


@st.composite
def encodings(draw: st.DrawFn, target: Any, *, hostile: bool) -> list[str]:
    """One URL and one bare form of a drawn target (several per example, so a mutant
    that misses one family is met within a proof run's 25 examples)."""
    _, host, v6 = target
    return [draw(url_of(host, v6, hostile=hostile)), draw(bare_of(host, v6))]


def _decided(
    data: Any, targets: list[Any], hostile: bool
) -> Iterator[tuple[Any, str, tuple[str, str, str]]]:
    """Each target's encodings, nested in arguments and decided by the kernel."""
    for target in targets:
        for value in data.draw(encodings(target, hostile=hostile), label="encodings"):
            yield target[0], value, _decide(KERNEL, data.draw(nested(value), label="args"))


@pytest.mark.fak_theorem("D2.7")
@given(st.lists(denied_target(), min_size=4, max_size=4), st.data())
def test_a_denied_host_is_refused_in_every_encoding(targets: list[Any], data: Any) -> None:
    for target, value, (kind, reason, claim) in _decided(data, targets, hostile=True):
        assert (kind, reason) == ("DENY", "EGRESS_BLOCK"), (value, claim)
        assert target.text in claim or claim.startswith("refused destination"), claim


@pytest.mark.fak_theorem("D2.7")
@given(st.lists(ordinary_target(), min_size=3, max_size=3), st.data())
def test_ordinary_hosts_are_not_refused(targets: list[Any], data: Any) -> None:
    for _, value, (kind, _, claim) in _decided(data, targets, hostile=False):
        assert kind == "ALLOW", (value, claim)


def _ada_oracle(url: str) -> str:
    """ada-url's own hostname, brought to text by ``ipaddress`` (an independent reading)."""
    hostname = URL(url).hostname
    try:
        return str(ipaddress.ip_address(hostname.strip("[]")))
    except ValueError:
        return hostname.rstrip(".")


@pytest.mark.fak_theorem("D2.7")
@given(st.lists(denied_target() | ordinary_target(), min_size=4, max_size=4), st.data())
def test_the_canonical_host_is_the_generated_one_and_ada_agrees(
    targets: list[Any], data: Any
) -> None:
    for target, host, v6 in targets:
        url = data.draw(url_of(host, v6, hostile=False), label="url")
        got = url_host(url)
        assert got is not None, url
        expected = target.text
        if target.address is not None and got.carried is not None and not target.v6:
            assert str(got.carried) == expected, url
        else:
            assert got.name == expected, url
        if url.split(":", 1)[0].lower() in SPECIAL:
            assert got.name == _ada_oracle(url), url


_PIECES = [*"0123456789abcdefxABCDEFX.-_:/@%[]\\ \t", "evil.example", "LOCALHOST", "\uff10"]
_HOSTISH = st.lists(st.sampled_from(_PIECES), max_size=16).map("".join)


@pytest.mark.fak_theorem("D2.7")
@given(st.lists(_HOSTISH, min_size=8, max_size=8))
def test_the_quick_screen_agrees_with_the_full_reading(values: list[str]) -> None:
    deny = HostDenyList(DENY_ENTRIES)
    for value in values:
        try:
            full = any(deny.denies(h) is not None for h in destination_hosts(value))
        except HostError:
            full = True
        assert (deny.check(value) is not None) == full, value


@pytest.mark.fak_theorem("C4.3")
@given(st.lists(denied_target() | ordinary_target(), min_size=4, max_size=4), st.data())
def test_a_host_in_any_encoding_makes_a_harmless_call_egress(targets: list[Any], data: Any) -> None:
    for _, host, v6 in targets:
        url = data.draw(url_of(host, v6, hostile=True), label="url")
        assert classify("lookup", data.draw(nested(url), label="args")) is Sink.EGRESS, url
        assert classify("lookup", {"path": url}) is Sink.EGRESS, url


# ------------------------------------------------------------ the reported attacks

ATTACKS = [
    "http://2852039166/",
    "http://0xa9fea9fe/",
    "http://0xA9FEA9FE/latest/meta-data/",
    "http://0251.0376.0251.0376/",
    "http://0251.254.43518/",
    "http://169.254.43518/",
    "http://[::ffff:169.254.169.254]/",
    "http://[::ffff:a9fe:a9fe]/",
    "http://[0:0:0:0:0:ffff:a9fe:a9fe]/",
    "http://[0000:0000:0000:0000:0000:FFFF:A9FE:A9FE]/",
    "http://[FD00:0EC2:0000:0000:0000:0000:0000:0254]/",
    "http://[fe80::1%25eth0]/",
    "http://metadata.google.internal./computeMetadata/v1/",
    "http://METADATA.google.internal../",
    "http://169.254.169.254\\@evil.example/",
    "http://good.example\\@metadata.google.internal/",
    "http:\\\\169.254.169.254\\latest",
    "http:2852039166",
    "http://metadata.goo\tgle.internal/",
    "http://metadata.google.int%65rnal/",
    "http://" + "".join(chr(ord(c) + 0xFEE0) for c in "metadata") + "\u3002google\uff0einternal/",
    "gopher://0xa9fea9fe:80/_GET",
    "2852039166",
    "0xa9fea9fe:80",
    "169.254.169.254",
    "fd00:ec2::254",
    "fe80::1%eth0",
    "user@metadata.google.internal",
    "metadata.google.internal:80/computeMetadata",
]


@pytest.mark.fak_theorem("D2.7")
@pytest.mark.parametrize("value", ATTACKS)
def test_the_reported_encodings_are_denied(value: str) -> None:
    kernel = Kernel(default_policy())
    for args in ({"url": value}, {"q": value}, {"a": [{"b": value}]}):
        kind, reason, claim = _decide(kernel, args, tool="get_page")
        assert (kind, reason) == ("DENY", "EGRESS_BLOCK"), (value, claim)


@pytest.mark.fak_theorem("D2.7")
def test_a_url_the_parser_refuses_is_refused_by_name() -> None:
    kind, reason, claim = _decide(KERNEL, {"u": "http://exa mple.com/"})
    assert (kind, reason) == ("DENY", "EGRESS_BLOCK")
    assert claim.startswith("refused destination") and "exa mple.com" in claim


def test_ordinary_arguments_stay_allowed() -> None:
    for value in (
        "SFO",
        "2026-12-01",
        "notes.txt",
        "https://example.com/a?b=http://c.example/",
        "mailto:bob@example.com",
        "42",
        "1.5",
        "hello world",
        "C:\\Users\\x",
        "note: about 169.254 and fe80",
        "",
        "x" * 70000 + " y",
    ):
        assert _decide(KERNEL, {"v": value})[0] == "ALLOW", value


def test_canonical_forms() -> None:
    assert canonical_host("EVIL.example.").name == "evil.example"
    assert canonical_host("0xa9.0376.43518").name == "169.254.169.254"
    assert canonical_host("[::FFFF:169.254.169.254]").carried == ipaddress.ip_address(
        "169.254.169.254"
    )
    assert canonical_host("fe80::1%eth0").name == "fe80::1"
    assert canonical_host("xn--bcher-kva.example").name == canonical_host("BÜCHER.example").name
    for bad in ("", "a b", "x/y", "a" * 2000):
        with pytest.raises(HostError):
            canonical_host(bad)
    long_url = "http://a.example/" + "x" * 70000
    with pytest.raises(HostError, match="over 65536"):
        destination_hosts(long_url)


def test_deny_entries_are_canonical_and_checked_at_load() -> None:
    kernel = Kernel(load_policy('{"allow": ["t"], "deny_hosts": ["EVIL.Example.", "10.0.0.0/8"]}'))
    assert _decide(kernel, {"u": "https://evil.example/"}, "t")[0] == "DENY"
    assert _decide(kernel, {"u": "http://012.0x1.2/"}, "t")[0] == "DENY"  # 10.1.0.2
    assert _decide(kernel, {"u": "http://[::ffff:10.9.9.9]/"}, "t")[0] == "DENY"
    assert _decide(kernel, {"u": "http://11.0.0.1/"}, "t")[0] == "ALLOW"
    for bad in ("a b", "10.0.0.0/33", "http://x/"):
        with pytest.raises(PolicyError, match="deny_hosts"):
            load_policy(json.dumps({"deny_hosts": [bad]}))


def test_the_attack_is_denied_through_fak_serve() -> None:
    state = GatewayState(Kernel(default_policy()))
    with serve_app(create_app(state)) as url, httpx.Client(base_url=url, timeout=30) as http:
        for value in ("http://0xa9fea9fe/", "http://169.254.169.254\\@evil.example/"):
            r = http.post(
                "/v1/fak/adjudicate", json={"tool": "get_page", "arguments": {"url": value}}
            )
            assert r.status_code == 200
            verdict = r.json()["verdict"]
            assert (verdict["kind"], verdict["reason"]) == ("DENY", "EGRESS_BLOCK"), verdict


# ------------------------------------------------------------ bounds and refusals (D2.7)
LIMIT = 65536  # the longest string read as a destination (the theorem's caveat)


def _sized(shape: str, host: str, n: int) -> str:
    """An ``n``-char string naming ``host``: a URL, a space-free word, or prose."""
    if shape == "url":
        head = f"http://{host}/"
    elif shape == "word":  # no colon: not URL-shaped, read as a bare host/path
        head = f"{host}/"
    else:  # prose: spaces, no colon; read as a whole it names no host
        head = "see "
    return head + ("ab " if shape == "prose" else "a") * n  # the caller cuts it to n


@pytest.mark.fak_theorem("D2.7")
@given(
    st.integers(-2, 2),
    st.sampled_from(["url", "word", "prose"]),
    st.booleans(),
)
def test_a_destination_over_the_limit_is_refused_unless_it_is_prose(
    delta: int, shape: str, denied: bool
) -> None:
    host = "metadata.google.internal" if denied else "example.com"
    n = LIMIT + delta
    value = _sized(shape, host, n)[: n - 1] + "z"  # exactly n chars, no trailing space
    assert len(value) == n
    kind, reason, claim = _decide(KERNEL, {"v": value})
    if n > LIMIT and shape != "prose":
        assert (kind, reason) == ("DENY", "EGRESS_BLOCK")
        assert claim == f"refused destination: a {n}-char destination is over {LIMIT}", claim
    elif denied and shape != "prose":
        assert (kind, reason) == ("DENY", "EGRESS_BLOCK")
        assert host in claim, claim
    else:
        assert kind == "ALLOW", claim


@pytest.mark.fak_theorem("D2.7")
@given(st.integers(-2, 2))
def test_url_host_refuses_a_url_over_the_limit(delta: int) -> None:
    url = ("http://a.example/" + "x" * LIMIT)[: LIMIT + delta]
    if len(url) > LIMIT:
        with pytest.raises(HostError, match=f"^URL over {LIMIT} chars$"):
            url_host(url)
    else:
        host = url_host(url)
        assert host is not None and host.name == "a.example"


@pytest.mark.fak_theorem("D2.7")
@given(st.text("abcdefgh/", min_size=60, max_size=120))
def test_a_refused_url_is_named_in_the_claim(path: str) -> None:
    url = f"http://exa mple.com/{path}"
    kind, reason, claim = _decide(KERNEL, {"u": url})
    assert (kind, reason) == ("DENY", "EGRESS_BLOCK")
    assert claim == f"refused destination: the WHATWG URL parser refuses {url[:80]!r}", claim


_LABEL = st.text("abcdefghijklmnopqrstuvwxyz0123456789", min_size=1, max_size=63)


@pytest.mark.fak_theorem("D2.7")
@given(
    st.lists(_LABEL, min_size=2, max_size=40),
    st.sampled_from(["ok", "edge", "long", "delimiter", "refused", "blank"]),
    st.sampled_from("/\\?#@"),
    st.data(),
)
def test_a_deny_entry_is_a_host_or_refused_by_name(
    labels: list[str], kind: str, delimiter: str, data: Any
) -> None:
    name = ".".join(labels)[:1000].strip(".") + ".example"  # a name, never an address
    if kind == "ok":
        assert canonical_host(name).name == name.lower()
        assert HostDenyList([name]).names == {name.lower()}
        return
    if kind == "edge":  # exactly at the bound: still a host
        body = ((name + ".") * (1100 // len(name) + 1))[: 1024 - len(".example")]
        name = (body[:-1] + "a" if body.endswith(".") else body) + ".example"
        assert canonical_host(name).name == name.lower()
        assert HostDenyList([name]).names == {name.lower()}
        return
    if kind == "long":
        name = (name + ".") * (1100 // len(name) + 1)
        name = name[: data.draw(st.integers(1025, 1100), label="length")]
        why = "empty or over 1024 chars"
    elif kind == "delimiter":
        i = data.draw(st.integers(0, len(name)), label="at")
        name = name[:i] + delimiter + name[i:]
        why = "it has a URL delimiter"
    elif kind == "refused":
        i = data.draw(st.integers(1, len(name) - 1), label="at")  # inside: ends are trimmed
        name = name[:i] + data.draw(st.sampled_from(" <>^|"), label="char") + name[i:]
        why = None
    else:
        name = data.draw(st.sampled_from(["", " ", "\t", " \n "]), label="blank")
        why = "empty or over 1024 chars"
    message = (
        f"{name[:80]!r} is not a host ({why})"
        if why is not None
        else f"{name[:80]!r} is not a host the WHATWG URL parser accepts"
    )
    with pytest.raises(HostError) as caught:
        canonical_host(name)
    assert str(caught.value) == message
    with pytest.raises(HostError, match="deny_hosts entry"):
        HostDenyList([name])


@pytest.mark.fak_theorem("D2.7")
@pytest.mark.parametrize(
    ("entry", "why"),
    [
        ("a" * 1025, "empty or over 1024 chars"),
        ("b." * 600 + "example", "empty or over 1024 chars"),
        ("x" * 90 + "/y", "it has a URL delimiter"),
        ("metadata.google.internal" * 4 + "@evil.example", "it has a URL delimiter"),
    ],
)
def test_a_refused_deny_entry_is_quoted_to_80_characters(entry: str, why: str) -> None:
    with pytest.raises(HostError) as caught:
        canonical_host(entry)
    assert str(caught.value) == f"{entry[:80]!r} is not a host ({why})"


# IDNA's deviation characters: WHATWG (UTS #46 non-transitional) keeps them, IDNA 2003
# clients (Python's idna codec: urllib, requests, http.client) map them away. A label
# drawn with at least one of them, among letters both readings keep as they are.
_deviation_label = (
    st.lists(
        st.sampled_from(
            ["a", "b", "e", "r", "t", "\u00df", "\u1e9e", "\u03c2", "\u03b1", "\u03c3"]
        ),
        min_size=2,
        max_size=8,
    )
    .filter(lambda ls: any(c in ("\u00df", "\u1e9e", "\u03c2") for c in ls))
    .map("".join)
)


def _idna2003(name: str) -> str:
    """The host a Python client connects to for ``name`` (the oracle: the stdlib codec)."""
    return name.encode("idna").decode("ascii")


@pytest.mark.fak_theorem("D2.7")
@given(_deviation_label, st.sampled_from(["example", "bank"]), st.sampled_from(["de", "gr"]))
def test_a_host_an_idna2003_client_reaches_is_refused_in_either_spelling(
    label: str, middle: str, tld: str
) -> None:
    name = f"{label}.{middle}.{tld}"
    reached = _idna2003(name)  # e.g. fass.example.de for faß.example.de
    spellings = (f"http://{name}/x", f"{name}:8080", f"https://u@{name.upper()}/", name)
    for denied in (reached, name):
        deny = HostDenyList([denied])
        for value in spellings:
            assert deny.check(value) is not None, (denied, value)
    # and the plain spelling of the reached name is refused by an entry written the other way
    assert HostDenyList([name]).check(f"http://{reached}/") is not None


# The joiners (ZWJ, ZWNJ) between Latin letters: WHATWG refuses such a name (CONTEXTJ), so
# a URL holding one is refused whatever it names, and a deny-list entry holding one is
# refused at load; IDNA 2003 clients drop them. A bare spelling is read both ways.
_joined_label = st.tuples(
    st.text("abert", min_size=1, max_size=4),
    st.lists(st.sampled_from(["\u200c", "\u200d"]), min_size=1, max_size=2).map("".join),
    st.text("abert", min_size=1, max_size=4),
).map("".join)


@pytest.mark.fak_theorem("D2.7")
@given(_joined_label, st.sampled_from(["example", "bank"]), st.sampled_from(["de", "gr"]))
def test_a_name_with_joiners_is_refused_as_the_host_an_idna2003_client_reaches(
    label: str, middle: str, tld: str
) -> None:
    name = f"{label}.{middle}.{tld}"
    reached = _idna2003(name).lower()  # the joiners dropped: ab.example.de for a\u200db...
    deny = HostDenyList([reached])
    for value in (name, f"{name}:8080", f"user@{name}", f"{name}/path"):
        assert deny.check(value) == f"egress to {reached} is a denied host", value
    assert deny.check(f"http://{name}/") is not None  # refused whatever it names
    assert HostDenyList([reached + "x"]).check(name) is None  # no other name is denied
    with pytest.raises(HostError):
        HostDenyList([name])


# ------------------------------------------------------ every kind of deny-list entry
# Each entry read from a shuffled list of every kind (a network may come first); the
# oracle is integer arithmetic on the drawn addresses, not the code under test.
_one_label = st.text("abcdefghijklmnopqrstuvwxyz", min_size=1, max_size=6).flatmap(
    lambda head: st.sampled_from([head, head + "-x", head + "_1", head + "9"])
)
_LINK_LOCAL_V4 = 0xA9FE  # 169.254.0.0/16: denied without an entry


@pytest.mark.fak_theorem("D2.7")
@given(st.lists(_one_label, min_size=1, max_size=3, unique=True), st.data())
def test_a_denied_one_label_name_is_refused_as_a_whole_value(labels: list[str], data: Any) -> None:
    entries = data.draw(st.permutations([*labels, "198.51.100.0/24", "evil.example"]))
    kernel = Kernel(Policy(allow=("http_get",), deny_hosts=tuple(entries)))
    for label in labels:
        value = "".join(
            c.upper() if data.draw(st.booleans()) else c for c in label
        )  # any case: a host name is case-insensitive
        kind, reason, claim = _decide(kernel, data.draw(nested(value), label="args"))
        assert (kind, reason) == ("DENY", "EGRESS_BLOCK"), (entries, value)
        assert claim == f"egress to {label} is a denied host", claim
    other = data.draw(_one_label.filter(lambda w: w not in labels), label="other word")
    assert _decide(kernel, {"q": other})[0] == "ALLOW"


@pytest.mark.fak_theorem("D2.7")
@given(st.sampled_from([4, 6]), st.data())
def test_a_network_entry_denies_every_address_in_it_whatever_its_host_bits(
    version: int, data: Any
) -> None:
    bits = 32 if version == 4 else 128
    a = data.draw(st.integers(0, 2**bits - 1), label="address in the entry")
    p = data.draw(st.integers(8 if version == 4 else 16, bits), label="prefix")
    host = bits - p
    inside = data.draw(st.booleans(), label="inside")
    if inside:
        b = (a >> host << host) | data.draw(st.integers(0, 2**host - 1))
    else:  # flip one bit of the prefix
        b = a ^ (1 << data.draw(st.integers(host, bits - 1)))
    entry = f"{ipaddress.ip_address(a if version == 4 else ipaddress.IPv6Address(a))}/{p}"
    entries = data.draw(st.permutations([entry, "evil.example", "10.0.0.7"]))
    deny = HostDenyList(entries)  # host bits set name the network that holds them
    text = (
        data.draw(ipv4_text(b), label="b")
        if version == 4
        else "[" + data.draw(ipv6_text(b), label="b") + "]"
    )
    link_local = (b >> 16 == _LINK_LOCAL_V4) if version == 4 else (b >> 118 == 0xFE80 >> 6)
    other = version == 4 and b == 0x0A000007
    expected = inside or link_local or other
    assert (deny.check(f"http://{text}/x") is not None) == expected, (entries, text)
    # a name listed after the network is denied too
    assert deny.check("http://evil.example/") is not None


@pytest.mark.fak_theorem("D2.7")
@given(
    st.integers(2, 2**32 - 1),
    st.sampled_from(["mapped", "compatible", "nat64", "6to4"]),
    st.data(),
)
def test_an_ipv6_entry_carrying_an_ipv4_address_denies_that_address(
    v4: int, kind: str, data: Any
) -> None:
    v6 = {
        "mapped": 0xFFFF << 32 | v4,  # RFC 4291 ::ffff:a.b.c.d
        "compatible": v4,  # RFC 4291 ::a.b.c.d (deprecated)
        "nat64": 0x64FF9B << 96 | v4,  # RFC 6052 64:ff9b::a.b.c.d
        "6to4": 0x2002 << 112 | v4 << 80,  # RFC 3056 2002:aabb:ccdd::
    }[kind]
    entry = data.draw(ipv6_text(v6, v4_tail=kind != "6to4"), label="entry")
    deny = HostDenyList([entry], link_local=False)
    dotted = str(ipaddress.IPv4Address(v4))
    value = f"http://{data.draw(ipv4_text(v4), label='v4')}/x"
    assert deny.check(value) == f"egress to {dotted} is a denied address", (entry, value)


# An IPv6 address carries an IPv4 address only in the embedding forms (RFC 4291 mapped
# ::ffff:0:0/96 and compatible ::/96 except :: and ::1, RFC 6052 NAT64 64:ff9b::/96,
# RFC 3056 6to4 2002::/16): any other address whose last 32 bits spell a denied IPv4
# address is another host.
_EMBEDDING = tuple(
    ipaddress.IPv6Network(n) for n in ("::/96", "::ffff:0:0/96", "64:ff9b::/96", "2002::/16")
)


@pytest.mark.fak_theorem("D2.7")
@given(st.sampled_from(DENIED_V4), st.just(1) | st.integers(1, 2**96 - 1), st.data())
def test_an_ipv6_address_carries_ipv4_only_in_the_embedding_forms(
    v4: str, prefix: int, data: Any
) -> None:
    n = prefix << 32 | int(ipaddress.IPv4Address(v4))
    ip = ipaddress.IPv6Address(n)
    denied_v6 = [ipaddress.ip_network(e) for e in (*DENIED_V6, *DENIED_NETS) if ":" in e]
    assume(not any(ip in net for net in (*_EMBEDDING, *denied_v6)) and not ip.is_link_local)
    value = f"http://[{data.draw(ipv6_text(n), label='v6')}]/"
    assert HostDenyList(DENY_ENTRIES).check(value) is None, value


@pytest.mark.fak_theorem("D2.7")
@pytest.mark.parametrize("n", [2, 3, 0xFFFF, 0x0A000007, 0xFFFFFFFF])
def test_an_ipv4_compatible_address_carries_its_ipv4_but_loopback_does_not(n: int) -> None:
    v4 = str(ipaddress.IPv4Address(n))
    assert HostDenyList([v4], link_local=False).check(f"http://[::{v4}]/") is not None
    zero = HostDenyList(["0.0.0.0", "0.0.0.1"], link_local=False)
    assert zero.check("http://[::1]/") is None and zero.check("http://[::]/") is None
