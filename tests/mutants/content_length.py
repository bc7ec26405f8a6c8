"""Mutants of D14, D10.3 and D13 (``theorems/gateway.md``): a ``Content-Length`` (or a
``Host``'s port) read as Python reads a number, not as the RFCs write one (``1*DIGIT``,
``*DIGIT``: ASCII digits only).

Each puts back a reading the gateway once had: ``str.isdigit`` then ``int`` (``"²"`` passes
the first and raises in the second: a 500), or ``int`` alone (a sign, an underscore, a
Unicode blank or another script's digits read as a length).
"""

from __future__ import annotations

from typing import Any

from fak_core.gateway.middleware import (
    BodyLimitMiddleware,
    HostOriginMiddleware,
    _host_name,
)
from fak_core.gateway.proxy_io import read_body
from pytest_fak import mutant
from tests.mutants.sourcepatch import edited

__all__: list[str] = []


@mutant("D14/media-check-reads-isdigit")
def media_check_reads_isdigit() -> Any:
    """The media-type check reads the length with ``str.isdigit`` then ``int``: a non-JSON
    POST declaring ``Content-Length: ²`` raises there, a 500 instead of the cap's 400."""
    return edited(
        HostOriginMiddleware.refusal,
        (
            "if chunked or (declared is not None and declared > 0):",
            "if chunked or (length is not None and length.strip().isdigit() and int(length) > 0):",
        ),
    )


@mutant("D14/cap-reads-int")
def cap_reads_int() -> Any:
    """The cap reads the length with ``int``: ``+12``, ``1_2``, ``-0`` and ``12`` followed
    by a no-break space pass as lengths instead of being refused 400."""
    return edited(
        BodyLimitMiddleware.__call__,
        (
            "length = content_length(declared)\n",
            "try:\n"
            "            length = int(declared)\n"
            "        except ValueError:\n"
            "            length = None\n",
        ),
    )


@mutant("D10.3/proxy-length-reads-isdigit")
def proxy_length_reads_isdigit() -> Any:
    """The proxies' body reader reads the length with ``str.isdigit`` then ``int``: a turn
    declaring ``Content-Length: ²`` raises there, a 500 instead of a counted body."""
    return edited(
        read_body,
        (
            'declared = content_length(request.headers.get("content-length"))\n'
            "    if declared is not None and declared > limit:",
            'declared = request.headers.get("content-length")\n'
            "    if declared and declared.isdigit() and int(declared) > limit:",
        ),
    )


@mutant("D13/host-port-reads-isdigit")
def host_port_reads_isdigit() -> Any:
    """A Host's port is read with ``str.isdigit``: ``localhost:8²`` is ``localhost``, a
    port no HTTP client can send served as if it were a number."""
    return edited(
        _host_name,
        (
            "port.isascii() and port.isdigit()",
            "port.isdigit()",
        ),
    )
