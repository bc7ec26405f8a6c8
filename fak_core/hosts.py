"""One host canonicaliser for every host and URL check in the kernel.

A string in a tool call is read the ways the programs a tool hands it to would read it,
and every host any reading finds is checked:

- as a URL, by the WHATWG URL standard (``ada-url``: browsers, Node, fetch-based tools),
  so ``http://169.254.169.254\\@evil.example/`` names 169.254.169.254;
- as an authority with no scheme (``host``, ``host:port``, ``user@host``, ``host/path``,
  ``mailto:user@host``) by the same parser, after prefixing ``http://``;
- by RFC 3986 (``urllib.parse``: curl-like and Python clients), so the same string also
  names evil.example;
- as a bare IP literal (``ipaddress``: unbracketed IPv6, zone ids);
- with IDNA's deviation characters mapped the transitional way (IDNA 2003, Python's
  ``idna`` codec and so ``urllib``/``requests``/``http.client``): ``faß.de`` is
  ``xn--fa-hia.de`` to WHATWG but ``fass.de`` to those clients, so both are checked
  (ß and ẞ as ``ss``, final sigma as sigma, zero-width joiners dropped).

Each host is brought to one canonical form (:class:`Host`): IDNA (UTS #46) lower-case
ASCII, percent-decoding, tabs and newlines removed, trailing dots stripped; every IPv4
numeric form (decimal, hex, octal, short, mixed) becomes a dotted quad; every IPv6 form
(uncompressed, upper case, bracketed, with a zone id) its compressed text, and the IPv4
address an IPv6 address carries (mapped, compatible, NAT64, 6to4) is kept beside it.
Deny-list entries (names, addresses, CIDR networks) are canonicalised the same way
(:class:`HostDenyList`), so the comparison is between canonical forms.

A URL-shaped string (a scheme and a colon) that the WHATWG parser refuses is a hostile
destination: :meth:`HostDenyList.refusal` names it, it is never skipped. Every step is
linear in the input, and inputs are capped (:data:`MAX_DESTINATION_CHARS`).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from socket import inet_aton
from typing import NamedTuple
from urllib.parse import urlsplit

from ada_url import HostType, SchemeType
from ada_url._ada_wrapper import ffi, lib  # the C binding ada_url.URL itself calls

__all__ = [
    "MAX_DESTINATION_CHARS",
    "Host",
    "HostDenyList",
    "HostError",
    "canonical_host",
    "destination_hosts",
    "names_network_host",
    "transitional",
    "url_host",
]

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

#: Longest string read as a destination; a longer URL-shaped (or space-free) value is refused.
MAX_DESTINATION_CHARS = 65536
_MAX_HOST_CHARS = 1024  # a DNS name is at most 253 octets; IDNA and brackets stay well within
_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")
# WHATWG trims these from both ends (C0 controls and space) and removes tab, LF and CR inside
_TRIM = "".join(chr(c) for c in range(0x21))
_SCHEME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+-.")
_HEX_PREFIXES = ("0x", "0X")
_HEX_DIGITS = frozenset("0123456789abcdefABCDEF:")


class HostError(ValueError):
    """A host, URL or deny-list entry that cannot be read; the message says which and why."""


class Host(NamedTuple):
    """A canonical host: ``name`` is lower-case ASCII without trailing dots, or the
    compressed text of ``address``; ``carried`` is the IPv4 address an IPv6 one embeds."""

    name: str
    address: IPAddress | None = None
    carried: ipaddress.IPv4Address | None = None


def _carried(ip: IPAddress) -> ipaddress.IPv4Address | None:
    if ip.version == 4:
        return None
    assert isinstance(ip, ipaddress.IPv6Address)
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    if ip.sixtofour is not None:
        return ip.sixtofour
    n = int(ip)
    if ip in _NAT64 or (n >> 32 == 0 and n > 1):
        # NAT64 well-known prefix, or IPv4-compatible (::a.b.c.d, deprecated but routed)
        return ipaddress.IPv4Address(n & 0xFFFFFFFF)
    return None


def _of_address(ip: IPAddress) -> Host:
    if ip.version == 6:
        assert isinstance(ip, ipaddress.IPv6Address)
        ip = ipaddress.IPv6Address(int(ip))  # drop the zone id
    return Host(str(ip), ip, _carried(ip))


def _ip_literal(text: str) -> IPAddress | None:
    t = text[1:-1] if text.startswith("[") and text.endswith("]") else text
    if ":" not in t and t.count(".") != 3:  # ipaddress reads only dotted quads and IPv6
        return None
    if t[:1] not in _HEX_DIGITS or "/" in t:  # cheap refusals before ipaddress raises
        return None
    try:
        return ipaddress.ip_address(t)  # IPv6 zone ids ("%eth0") are accepted here
    except ValueError:
        return None


_IPV4, _IPV6 = int(HostType.IPV4), int(HostType.IPV6)
_NOT_SPECIAL = int(SchemeType.NOT_SPECIAL)


def _parse(url: str) -> tuple[str, int, int] | None:
    """WHATWG-parse ``url`` with ada: (hostname, host type, scheme type), or None when the
    parser refuses it. The package's own C binding, called directly: its ``URL`` class
    costs four times as much per attribute read."""
    try:
        raw = url.encode()
    except UnicodeEncodeError:  # a lone surrogate: no parser accepts it
        return None
    obj = lib.ada_parse(raw, len(raw))
    try:
        if not lib.ada_is_valid(obj):
            return None
        h = lib.ada_get_hostname(obj)
        hostname = ffi.unpack(h.data, h.length).decode() if h.length else ""
        return hostname, int(lib.ada_get_host_type(obj)), int(lib.ada_get_scheme_type(obj))
    finally:
        lib.ada_free(obj)


def _from_ada(hostname: str, host_type: int) -> Host | None:
    if not hostname:
        return None
    if host_type == _IPV6:
        return _of_address(ipaddress.IPv6Address(hostname[1:-1]))
    if host_type == _IPV4:  # ada gives the dotted quad; inet_aton reads it in C
        return Host(hostname, ipaddress.IPv4Address(int.from_bytes(inet_aton(hostname))))
    name = hostname.rstrip(".")
    if name != hostname and name:
        # "1.2.3.4.." is a domain to WHATWG; without its dots it is an address again
        return _whatwg_host(name) or Host(name)
    return Host(name) if name else None


def _whatwg_host(text: str) -> Host | None:
    """``text`` as a WHATWG special-scheme host, or None when the parser refuses it."""
    parsed = _parse("http://" + text + "/")
    return None if parsed is None else _from_ada(parsed[0], parsed[1])


def canonical_host(text: str) -> Host:
    """The canonical form of one host: a name, an IPv4 in any numeric form, or an IPv6
    address (bracketed or not, with or without a zone id). Raises :class:`HostError`."""
    t = text.strip(_TRIM)
    if not t or len(t) > _MAX_HOST_CHARS:
        raise HostError(f"{text[:80]!r} is not a host (empty or over {_MAX_HOST_CHARS} chars)")
    ip = _ip_literal(t)
    if ip is not None:
        return _of_address(ip)
    if any(c in t for c in "/\\?#@"):
        raise HostError(f"{text[:80]!r} is not a host (it has a URL delimiter)")
    host = _whatwg_host(t)
    if host is None:
        raise HostError(f"{text[:80]!r} is not a host the WHATWG URL parser accepts")
    return host


def _url_shaped(text: str) -> bool:
    colon = text.find(":")
    if colon < 1 or not text[0].isascii() or not text[0].isalpha():
        return False
    return all(c in _SCHEME_CHARS for c in text[1:colon])


def url_host(url: str) -> Host | None:
    """The canonical host of ``url`` by the WHATWG URL standard; None when it has none.

    Raises :class:`HostError` when the parser refuses the URL. Opaque hosts (schemes such
    as ``gopher:`` or ``redis:``) are read again as special hosts, since a client resolves
    them the same way.
    """
    if len(url) > MAX_DESTINATION_CHARS:
        raise HostError(f"URL over {MAX_DESTINATION_CHARS} chars")
    parsed = _parse(url)
    if parsed is None:
        raise HostError(f"the WHATWG URL parser refuses {url[:80]!r}")
    hostname, host_type, scheme_type = parsed
    if scheme_type == _NOT_SPECIAL and hostname and host_type not in (_IPV4, _IPV6):
        return _whatwg_host(hostname) or Host(hostname.lower().rstrip("."))
    return _from_ada(hostname, host_type)


def _rfc3986_host(text: str) -> Host | None:
    try:
        raw = urlsplit(text if "://" in text else "//" + text).hostname
    except ValueError:
        return None
    if not raw:
        return None
    try:
        return canonical_host(raw)
    except HostError:
        name = raw.lower().rstrip(".")
        return Host(name) if name else None


# UTS #46's deviation characters and their transitional (IDNA 2003) mapping
_DEVIATIONS = frozenset("\u00df\u1e9e\u03c2\u200c\u200d")
_TRANSITIONAL = str.maketrans({"\u00df": "ss", "\u1e9e": "ss", "\u03c2": "\u03c3",
                               "\u200c": None, "\u200d": None})  # fmt: skip


def transitional(text: str) -> str | None:
    """``text`` with IDNA's deviation characters mapped the transitional way (the reading
    of IDNA 2003 clients), or None when it holds none."""
    if _DEVIATIONS.isdisjoint(text):
        return None
    return text.translate(_TRANSITIONAL)


def destination_hosts(value: str) -> tuple[Host, ...]:
    """Every canonical host ``value`` names under any reading (see the module docstring).

    Raises :class:`HostError` when ``value`` is URL-shaped and the WHATWG parser refuses
    it, or is over :data:`MAX_DESTINATION_CHARS` and could be a URL or a host.
    """
    v = value.strip(_TRIM)
    if not v:
        return ()
    shaped = _url_shaped(v)
    if len(v) > MAX_DESTINATION_CHARS:
        if shaped or " " not in v:
            raise HostError(f"a {len(v)}-char destination is over {MAX_DESTINATION_CHARS}")
        return ()
    found: list[Host] = []
    if shaped:
        host = url_host(v)
        if host is not None:
            found.append(host)
    if not found:  # no URL host: the bare reading (host:port, user@host, mailto:user@host)
        host = _whatwg_host(v)
        if host is not None:
            found.append(host)
    if not found or "\\" in v:
        # RFC 3986 reads an authority differently from WHATWG only at a backslash (or where
        # WHATWG refused the bare reading): "http://a\\@b/" is a to WHATWG, b to urllib
        host = _rfc3986_host(v)
        if host is not None:
            found.append(host)
    ip = _ip_literal(v)
    if ip is not None:
        found.append(_of_address(ip))
    other = transitional(v)
    if other is not None:  # the same string as an IDNA 2003 client reads it
        found.extend(destination_hosts(other))
    return tuple(found)


def names_network_host(value: str, bare: bool = True) -> bool:
    """Whether the whole of ``value`` names a network host (sink classification).

    True for a URL with a host in the WHATWG or the RFC 3986 reading (a URL-shaped value
    the parser refuses counts too: it is hostile) and, with ``bare``, for an authority
    with no scheme whose canonical host is a dotted name ending in an alphabetic label,
    an IPv6 address, or an IPv4 address written in four parts (in any radix): ``3.14``,
    ``1.2.3`` and ``2852039166`` alone are numbers, not destinations.
    """
    v = value.strip(_TRIM)
    if not v:
        return False
    shaped = _url_shaped(v)
    if len(v) > MAX_DESTINATION_CHARS:
        return shaped
    if shaped:
        try:
            host = url_host(v)
        except HostError:
            return True
        if host is not None and host.name:
            return True
        if "://" in v:
            rfc = _rfc3986_host(v)
            if rfc is not None and rfc.name:
                return True
    if not bare:
        return False
    ip = _ip_literal(v)
    if ip is not None:
        return ip.version == 6 or v.count(".") >= 3
    host = _whatwg_host(v)
    if host is None:
        return False
    if host.address is not None:
        return host.address.version == 6 or v.count(".") >= 3
    label = host.name.rpartition(".")[2]
    return "." in host.name and len(label) >= 2 and label.isalpha()


class HostDenyList:
    """Denied hosts in canonical form: names, addresses and CIDR networks, plus (when
    ``link_local``) every link-local address (169.254.0.0/16, fe80::/10)."""

    def __init__(self, entries: Iterable[str], link_local: bool = True) -> None:
        names: set[str] = set()
        addresses: set[IPAddress] = set()
        networks: list[IPNetwork] = []
        for entry in entries:
            try:
                if "/" in entry:
                    networks.append(ipaddress.ip_network(entry.strip(), strict=False))
                    continue
                host = canonical_host(entry)
            except ValueError as exc:
                raise HostError(
                    f"deny_hosts entry {entry!r} is not a host name, an IP address or a CIDR "
                    f"network ({exc})"
                ) from None
            if host.address is None:
                names.add(host.name)
                other = transitional(entry)
                if other is not None:  # "faß.de" denies what IDNA 2003 clients reach too
                    names.add(canonical_host(other).name)
            else:
                addresses.add(host.address)
                if host.carried is not None:
                    addresses.add(host.carried)
        self.names = frozenset(names)
        self.addresses = frozenset(addresses)
        self.networks = tuple(networks)
        self.link_local = link_local
        #: The denied names of one label (``localhost``): the only ones a word can be.
        self.single = frozenset(n for n in names if "." not in n)

    def denies(self, host: Host) -> str | None:
        """Why ``host`` is denied (the entry or range it falls in), or None."""
        if host.address is None:
            return f"{host.name} is a denied host" if host.name in self.names else None
        for ip in (host.address, host.carried):
            if ip is None:
                continue
            what = host.name if ip is host.address else f"{host.name} (carrying {ip})"
            if ip in self.addresses:
                return f"{what} is a denied address"
            if self.link_local and ip.is_link_local:
                return f"{what} is link-local"
            for net in self.networks:
                if ip.version == net.version and ip in net:
                    return f"{what} is in the denied range {net}"
        return None

    def plain(self, s: str) -> bool:
        """The quick screen: whether ``s`` provably names no denied host in any reading,
        without parsing it. An ASCII word of letters, digits, ``.``, ``-`` and ``_`` is its
        own host in every reading, and an address only when its last label is a number
        (digits or ``0x``...); False means "read it in full" (:meth:`check`)."""
        if not s.isascii():
            return False
        if s.isalnum():
            if s.isdigit() or s[:2] in _HEX_PREFIXES:
                return False
            return not self.single or s.lower() not in self.single
        word = s.replace("-", "").replace("_", "")
        if "." not in s:  # one label with '-' or '_' is never a number
            return word.isalnum() and (not self.single or s.lower() not in self.single)
        if not word.replace(".", "").isalnum():
            return False
        low = s.lower().rstrip(".")
        last = low.rpartition(".")[2]
        if not last or last.isdigit() or last.startswith("0x"):
            return False
        return low not in self.names

    def check(self, value: str) -> str | None:
        """Why the string ``value`` is a denied destination, or None."""
        if self.plain(value):
            return None
        try:
            hosts = destination_hosts(value)
        except HostError as exc:
            return f"refused destination: {exc}"
        for host in hosts:
            why = self.denies(host)
            if why is not None:
                return f"egress to {why}"
        return None
