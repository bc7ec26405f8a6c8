"""Mutants for D2.7 (a denied host is refused in every encoding) and for the host half of
C4.3 (a destination in any encoding makes a call EGRESS): each puts back one way the host
checks were, or could plausibly be, wrong."""

from __future__ import annotations

import importlib
import ipaddress
import re
from typing import Any
from unittest import mock
from urllib.parse import urlsplit

from fak_core.hosts import Host, HostDenyList
from pytest_fak import mutant
from tests.mutants.sourcepatch import edited

_hosts = importlib.import_module("fak_core.hosts")
_sinks = importlib.import_module("fak_core.sinks")


def _naive_hosts(value: str) -> tuple[Host, ...]:
    # the floor's host reading before fak_core.hosts: urllib for URLs, string splitting
    # otherwise, and ipaddress only for the exact dotted or colon text
    d = value.strip()
    if "://" in d:
        host = (urlsplit(d).hostname or "").lower()
    elif "@" in d:
        host = d.rsplit("@", 1)[1].lower()
    else:
        part = d.split("/", 1)[0]
        if part.startswith("["):
            host = part[1:].split("]", 1)[0].lower()
        else:
            host = part.rsplit(":", 1)[0].lower() if part.count(":") == 1 else part.lower()
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return (Host(host),)
    return (Host(str(ip), ip),)


@mutant("D2.7/naive-urllib")
def naive_urllib() -> Any:
    """The original bug: hosts read with urllib.parse and string splitting."""
    return mock.patch.object(_hosts, "destination_hosts", _naive_hosts)


@mutant("D2.7/trailing-dot-kept")
def trailing_dot_kept() -> Any:
    """A WHATWG host keeps its trailing dots, so ``evil.example.`` is another name."""
    return edited(_hosts._from_ada, ('name = hostname.rstrip(".")', "name = hostname"))


@mutant("D2.7/no-ipv4-numbers")
def no_ipv4_numbers() -> Any:
    """A bare or opaque host is an address only in strict dotted-quad or IPv6 text: no
    decimal, hex, octal or short IPv4 forms."""

    def whatwg_host(text: str) -> Host | None:
        ip = _hosts._ip_literal(text)
        if ip is not None:
            return _hosts._of_address(ip)
        name = text.lower().rstrip(".")
        return Host(name) if name and " " not in name else None

    return mock.patch.object(_hosts, "_whatwg_host", whatwg_host)


@mutant("D2.7/refused-skipped")
def refused_skipped() -> Any:
    """A URL the parser refuses is skipped (fails open) instead of refused."""
    return edited(HostDenyList.check, ('return f"refused destination: {exc}"', "return None"))


@mutant("D2.7/screen-ignores-numbers")
def screen_ignores_numbers() -> Any:
    """The quick screen passes a word whose last label is a number (``2852039166``)."""
    return edited(
        HostDenyList.plain,
        ("if s.isdigit() or s[:2] in _HEX_PREFIXES:", "if False:"),
        ('if not last or last.isdigit() or last.startswith("0x"):', "if not last:"),
    )


_URL = re.compile(r"^[a-z][a-z0-9+.\-]*://\S+$", re.I)
_IPV4 = re.compile(r"^\d{1,3}(?:\.\d{1,3}){3}(?::\d+)?(?:/\S*)?$")
_HOST = re.compile(r"^(?:[a-z0-9-]+\.)+[a-z]{2,63}\.?(?::\d+)?(?:/\S*)?$", re.I)


def _regex_names_host(value: str, bare: bool = True) -> bool:
    v = value.strip()
    if "://" in v:
        return bool(_URL.match(v))
    return bare and bool(_IPV4.match(v) or (_HOST.match(v) and not v.replace(".", "").isdigit()))


@mutant("C4.3/regex-destinations")
def regex_destinations() -> Any:
    """The sink classifier's original reading: URLs and hosts by regular expressions."""
    return mock.patch.object(_sinks, "names_network_host", _regex_names_host)


@mutant("D2.7/transitional-unread")
def transitional_unread() -> Any:
    """Hosts are read only the WHATWG way: ``faß.de`` is ``xn--fa-hia.de``, never the
    ``fass.de`` that Python's idna codec (urllib, requests) connects to (the bug before
    2026-12-01: a deny list naming fass.de let http://faß.de/ through)."""
    return mock.patch.object(_hosts, "transitional", return_value=None)
