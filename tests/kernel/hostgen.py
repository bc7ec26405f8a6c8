"""Hypothesis strategies for hosts in every encoding, built from the specs, not from the
code under test: the WHATWG URL standard (IPv4 numbers in decimal, hex and octal, one to
four parts; tabs and newlines removed; backslash as a slash in special schemes;
percent-decoding and UTS #46 mapping of domains), RFC 4291 IPv6 text forms, RFC 3986
authorities, and RFC 6052 / RFC 3056 embeddings of IPv4 in IPv6.

A generated case carries its target (the canonical name or address the test expects),
computed here from the drawn value, so the oracle never calls ``fak_core.hosts``.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from typing import Any

from hypothesis import strategies as st

SPECIAL = ("http", "https", "ws", "wss", "ftp")
OPAQUE = ("gopher", "redis", "ssh", "sftp", "ldap", "git")
DENIED_NAMES = ("evil.example", "metadata.google.internal", "bücher.example", "localhost")
DENIED_V4 = ("169.254.169.254", "10.0.0.7", "203.0.113.9")
DENIED_V6 = ("fd00:ec2::254", "2001:db8:1::42")
DENIED_NETS = ("198.51.100.0/24", "2001:db8:ff::/48")
DENY_ENTRIES = (*DENIED_NAMES, *DENIED_V4, *DENIED_V6, *DENIED_NETS)
# the floor also denies every link-local address without an entry
LINK_LOCAL = ("169.254.0.0/16", "fe80::/10")


@dataclass(frozen=True)
class Target:
    """What a generated host must canonicalise to: a name (ASCII) or an address."""

    text: str
    v6: bool = False

    @property
    def address(self) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
        try:
            return ipaddress.ip_address(self.text)
        except ValueError:
            return None


def _random_case(draw: st.DrawFn, text: str) -> str:
    flips = draw(st.lists(st.booleans(), min_size=len(text), max_size=len(text)))
    return "".join(c.upper() if f else c for c, f in zip(text, flips, strict=True))


@st.composite
def ipv4_text(draw: st.DrawFn, value: int) -> str:
    """One of the WHATWG IPv4 forms of ``value``: 1-4 parts, each decimal, hex or octal."""
    k = draw(st.integers(1, 4))
    if k == 4:
        parts = [(value >> s) & 255 for s in (24, 16, 8, 0)]
    elif k == 3:
        parts = [value >> 24, (value >> 16) & 255, value & 0xFFFF]
    elif k == 2:
        parts = [value >> 24, value & 0xFFFFFF]
    else:
        parts = [value]
    out = []
    for p in parts:
        radix = draw(st.sampled_from(["dec", "hex", "oct"]))
        zeros = "0" * draw(st.integers(0, 2))
        if radix == "hex":
            out.append(draw(st.sampled_from(["0x", "0X"])) + zeros + _random_case(draw, f"{p:x}"))
        elif radix == "oct":
            out.append("0" + zeros + f"{p:o}")
        else:
            out.append(str(p))
    return ".".join(out) + draw(st.sampled_from(["", "."]))


@st.composite
def ipv6_text(draw: st.DrawFn, value: int, v4_tail: bool = False) -> str:
    """One RFC 4291 text form of ``value``: full or compressed, zero-padded or not, any
    case, and (``v4_tail``) the last 32 bits as a dotted quad."""
    groups = [(value >> (112 - 16 * i)) & 0xFFFF for i in range(8)]
    tail = []
    if v4_tail and draw(st.booleans()):
        tail = [str(ipaddress.IPv4Address(value & 0xFFFFFFFF))]
        groups = groups[:6]
    pad = draw(st.sampled_from(["{:x}", "{:04x}"]))
    words = [pad.format(g) for g in groups]
    if draw(st.booleans()):  # compress the longest run of zero groups (two or more)
        best, start = (0, 0), None
        for i, g in enumerate([*groups, 1]):
            if g == 0 and start is None:
                start = i
            elif g != 0 and start is not None:
                best, start = max(best, (i - start, -start)), None
        if best[0] >= 2:
            i, j = -best[1], -best[1] + best[0]
            left, right = ":".join(words[:i]), ":".join(words[j:] + tail)
            return _random_case(draw, f"{left}::{right}")
    return _random_case(draw, ":".join(words + tail))


def _fullwidth(c: str) -> str:
    return chr(ord(c) - 0x21 + 0xFF01) if "!" <= c <= "~" else c


@st.composite
def name_text(draw: st.DrawFn, name: str) -> str:
    """A domain that UTS #46 maps to ``name``: case, fullwidth forms, ideographic full
    stops, punycode or Unicode labels."""
    if draw(st.booleans()):
        name = name.encode("idna").decode("ascii") if not name.isascii() else name
    out = []
    for c in _random_case(draw, name) if name.isascii() else name:
        choice = draw(st.integers(0, 5))
        if c == "." and choice == 0:
            out.append(draw(st.sampled_from(["\u3002", "\uff0e", "\uff61"])))
        elif choice == 1 and c.isascii():
            out.append(_fullwidth(c))
        else:
            out.append(c)
    return "".join(out)


@st.composite
def denied_target(draw: st.DrawFn) -> tuple[Target, str, bool]:
    """A denied target, its host text in some encoding, and whether it is IPv6 text."""
    family = draw(st.sampled_from(["name", "v4", "v4-in-v6", "v6", "net", "link-local"]))
    if family == "name":
        name = draw(st.sampled_from(DENIED_NAMES))
        ascii_name = name.encode("idna").decode("ascii")
        return Target(ascii_name), draw(name_text(name)) + draw(_dots()), False
    if family in ("v4", "v4-in-v6"):
        value = int(ipaddress.IPv4Address(draw(st.sampled_from(DENIED_V4))))
        if family == "v4":
            return Target(str(ipaddress.IPv4Address(value))), draw(ipv4_text(value)), False
        prefix = draw(st.sampled_from(["mapped", "compatible", "nat64", "6to4"]))
        if prefix == "6to4":
            v6 = (0x2002 << 112) | (value << 80) | draw(st.integers(0, 2**80 - 1))
        else:
            base = {"mapped": 0xFFFF << 32, "compatible": 0, "nat64": 0x64FF9B << 96}[prefix]
            v6 = base | value
        text = draw(ipv6_text(v6, v4_tail=prefix != "6to4"))
        return Target(str(ipaddress.IPv4Address(value))), text, True
    if family == "v6":
        address = ipaddress.IPv6Address(draw(st.sampled_from(DENIED_V6)))
        return Target(address.compressed, v6=True), draw(ipv6_text(int(address))), True
    net = ipaddress.ip_network(draw(st.sampled_from(DENIED_NETS + LINK_LOCAL)))
    value = int(net.network_address) + draw(st.integers(0, net.num_addresses - 1))
    if net.version == 4:
        address4 = ipaddress.IPv4Address(value)
        return Target(str(address4)), draw(ipv4_text(value)), False
    address6 = ipaddress.IPv6Address(value)
    return Target(address6.compressed, v6=True), draw(ipv6_text(value)), True


def _dots() -> st.SearchStrategy[str]:
    return st.sampled_from(["", "", ".", ".."])


@st.composite
def ordinary_target(draw: st.DrawFn) -> tuple[Target, str, bool]:
    """A host no deny entry and no link-local range covers, in some encoding."""
    kind = draw(st.sampled_from(["name", "v4", "v6"]))
    if kind == "name":
        label = st.text("abcdefghijklmnopqrstuvwxyz0123456789", min_size=1, max_size=10)
        labels = draw(st.lists(label, min_size=1, max_size=3))
        tld = draw(st.text("abcdefghijklmnopqrstuvwxyz", min_size=2, max_size=6))
        name = ".".join([*labels, tld])
        if name in DENIED_NAMES:
            name = "ok-" + name
        return Target(name), draw(name_text(name)) + draw(_dots()), False
    denied = [ipaddress.ip_network(e) for e in (*DENIED_V4, *DENIED_V6, *DENIED_NETS)]
    denied += [ipaddress.ip_network(e) for e in LINK_LOCAL]
    if kind == "v4":
        value = draw(st.integers(0x01000000, 0xDFFFFFFF))
        address: Any = ipaddress.IPv4Address(value)
    else:
        # global unicast outside 6to4 (2002::/16), which carries an IPv4 address
        value = draw(st.integers(0x2400 << 112, (0x2C00 << 112) - 1))
        address = ipaddress.IPv6Address(value)
    if any(address.version == n.version and address in n for n in denied):
        address = ipaddress.ip_address("93.184.216.34" if kind == "v4" else "2606:4700::1")
        value = int(address)
    text = draw(ipv4_text(value)) if kind == "v4" else draw(ipv6_text(value))
    return Target(str(address), v6=kind == "v6"), text, kind == "v6"


def _percent(draw: st.DrawFn, host: str) -> str:
    """Percent-encode some code points of a host (WHATWG decodes before IDNA and IPv4)."""
    out = []
    for c in host:
        if c.isalnum() and draw(st.integers(0, 4)) == 0:
            out.append("".join(f"%{b:02X}" for b in c.encode("utf-8")))
        else:
            out.append(c)
    return "".join(out)


def _tabs(draw: st.DrawFn, text: str) -> str:
    if not draw(st.booleans()):
        return text
    i = draw(st.integers(0, len(text)))
    return text[:i] + draw(st.sampled_from(["\t", "\n", "\r"])) + text[i:]


@st.composite
def url_of(draw: st.DrawFn, host: str, v6: bool, *, hostile: bool) -> str:
    """A URL naming ``host``: any scheme, slashes, userinfo, port, path; with
    ``hostile``, also the WHATWG backslash-authority and RFC 3986 readings."""
    special = draw(st.booleans())
    scheme = _random_case(draw, draw(st.sampled_from(SPECIAL if special else OPAQUE)))
    zone = draw(st.sampled_from(["", "%25eth0", "%eth0"])) if hostile and v6 else ""
    authority = f"[{host}{zone}]" if v6 else host  # WHATWG refuses a zone id; curl takes it
    if not v6 and draw(st.booleans()):
        authority = _percent(draw, authority)
    if special and not v6:
        authority = _tabs(draw, authority)
    slashes = draw(st.sampled_from(["//", "\\\\", "/\\", "", "///"])) if special else "//"
    userinfo = draw(st.sampled_from(["", "user@", "u:p@", "a@b@"]))
    port = draw(st.sampled_from(["", ":80", ":8443", ":"]))
    path = draw(st.sampled_from(["", "/", "/latest/meta-data", "?q=1", "#x", "/a?b#c"]))
    trick = draw(st.sampled_from(["none", "backslash", "rfc"])) if hostile and special else "none"
    if trick == "backslash":  # WHATWG: host is ours; RFC 3986: good.example
        return f"{scheme}://{authority}{port}\\@good.example/{path}"
    if trick == "rfc" and not v6:  # WHATWG: good.example; RFC 3986: ours
        return f"{scheme}://good.example\\@{authority}{port}/{path}"
    return f"{scheme}:{slashes}{userinfo}{authority}{port}{path}"


@st.composite
def bare_of(draw: st.DrawFn, host: str, v6: bool) -> str:
    """``host`` with no scheme: alone, with a port (valid or out of range), userinfo, path,
    or as mailto."""
    # a port over 65535 makes the WHATWG parser refuse the authority; RFC 3986 (urllib)
    # still reads its host
    bad_port = draw(st.sampled_from([":65536", ":99999", ":123456"]))
    if v6:
        return draw(
            st.sampled_from(
                [
                    host,
                    f"[{host}]",
                    f"[{host}]:443",
                    f"u@[{host}]/x",
                    f"{host}%eth0",
                    f"[{host}]{bad_port}",
                ]
            )
        )
    return draw(
        st.sampled_from(
            [
                host,
                f"{host}:80",
                f"user@{host}",
                f"{host}/path",
                f"mailto:a@{host}",
                f"//{host}/x",
                f"{host}{bad_port}",
                f"user@{host}{bad_port}/x",
            ]
        )
    )


@st.composite
def nested(draw: st.DrawFn, value: str) -> dict[str, Any]:
    """``value`` at a random depth of a JSON object, under a random key."""
    keys = st.sampled_from(["url", "q", "note", "x", "items", "config", "Target"])
    out: Any = value
    for _ in range(draw(st.integers(0, 3))):
        out = [out] if draw(st.booleans()) else {draw(keys): out}
    return {draw(keys): out, "other": "plain text"}
