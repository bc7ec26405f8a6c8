"""Mutants for C4.4 and C4.7 (``theorems/taint.md``): a ``--state`` URL read as the
Redis client reads it, not as the redis URI scheme writes it, and a held id decoded
strictly.

Each puts back a reading ``parse_url`` once had: the database checked with ``str.isdigit``
(``"²"`` passes and the client, whose ``int`` cannot read it, silently uses database 0;
an Arabic-Indic one, U+0661, passes and is database 1), the port not checked (``8²``
raises in the client, a crash instead of a refusal; ``0`` is read as no port), the scheme
compared after ``urlsplit`` lowercased it (``REDIS://`` passes and the client refuses it),
and a ``unix://`` socket path read as a database (every socket refused).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any
from unittest import mock

from fak_core.redis_state import RedisState, _digits, parse_url
from fak_core.redis_stores import RedisHeldStore, RedisRateLimiter
from pytest_fak import mutant
from tests.mutants.sourcepatch import edited

__all__: list[str] = []


@mutant("C4.4/url-db-isdigit")
def url_db_isdigit() -> Any:
    """The database is checked with ``str.isdigit``: superscripts and other scripts' digits
    pass, and the client then connects to database 0 (``²``) or 1 (U+0661)."""
    return edited(_digits, ("text.isascii() and text.isdigit()", "text.isdigit()"))


@mutant("C4.4/url-port-unchecked")
def url_port_unchecked() -> Any:
    """The port is left to the client: ``8²`` or ``99999`` is a ``ValueError`` at start (a
    crash, not a refusal), and port ``0`` connects to 6379."""
    return edited(parse_url, ("        _port(url, parts)\n", ""))


@mutant("C4.4/url-scheme-case")
def url_scheme_case() -> Any:
    """The scheme is checked after ``urlsplit`` lowercased it: ``REDIS://`` passes, and the
    client, which reads only lowercase schemes, raises."""
    return edited(
        parse_url,
        (
            ' or not url.startswith(parts.scheme + "://")',
            "",
        ),
    )


@mutant("C4.4/unix-path-as-database")
def unix_path_as_database() -> Any:
    """A ``unix://`` URL's path (its socket) is read as a database number: every socket is
    refused."""
    return edited(
        parse_url,
        (
            "    for db in parse_qs(",
            '    _database(url, parts.path.strip("/"))\n    for db in parse_qs(',
        ),
    )


@mutant("C4.4/probe-failures-before")
def probe_failures_before() -> Any:
    """``/healthz``'s probe reports the failures counted before it: a failed probe is one
    behind the count it has just raised (the bug fixed)."""
    return edited(
        RedisState.aprobe,
        ('{**out, "failures": self.failures, "ok": False,', '{**out, "ok": False,'),
    )


@mutant("C4.4/ratelimit-reset-unguarded")
def ratelimit_reset_unguarded() -> Any:
    """A shared rate-limit reset deletes the window directly, outside the epoch guard: on a
    Redis that lost the state it reads as success (the bug fixed)."""
    return edited(
        RedisRateLimiter.reset,
        (
            "self.state.run(self._reset, [self.PREFIX + key], [])",
            "self.state.client.delete(self.PREFIX + key)",
        ),
    )


@mutant("C4.4/async-probe-sync-retry")
def async_probe_sync_retry() -> Any:
    """``/healthz``'s asyncio client is handed the synchronous retry policy (the bug fixed):
    redis-py 8 warns on every probe, and drops any custom retry behaviour. Older redis-py
    accepts it silently, so this mutant is killed (by the warning, an error in tests) only
    where redis-py 8 is installed, as the committed lock installs it."""
    return edited(
        RedisState.__init__,
        ('"retry": redis.asyncio.retry.Retry(', '"retry": redis.retry.Retry('),
    )


@mutant("C4.7/held-key-strict-utf8")
def held_key_strict_utf8() -> Any:
    """The shared held store decodes the id Redis hands back as strict UTF-8: a payload
    held under a key with a lone surrogate raises where the in-memory store keeps it."""
    return edited(
        RedisHeldStore.hold,
        ('held_id.decode("utf-8", "surrogatepass")', "held_id.decode()"),
    )


def _scripts(edit: Callable[[str], str]) -> Any:
    """Every script of a trace's owner and taint keys, edited (taken by the stores and the
    owner table when they are built)."""
    import fak_core.gateway.redis_sessions as sessions
    import fak_core.redis_stores as stores

    stack = contextlib.ExitStack()
    for module, name in (
        (stores, "_LEVEL"),
        (stores, "_RAISE"),
        (stores, "_LEDGER_RESET"),
        (sessions, "_CLAIM"),
        (sessions, "_OWNER"),
    ):
        stack.enter_context(mock.patch.object(module, name, edit(getattr(module, name))))
    return stack


@mutant("C4.12/redis-no-expiry")
def redis_no_expiry() -> Any:
    """Owner and taint keys are written without an expiry and never refreshed (the bug):
    Redis grows with every session until it is full and refuses everyone."""
    return _scripts(
        lambda text: (
            text.replace(", 'PX', ARGV[3]", "")
            .replace(", 'PX', ARGV[4]", "")
            .replace("redis.call('PEXPIREAT',", "-- redis.call('PEXPIREAT',")
            .replace("redis.call('PEXPIRE',", "-- redis.call('PEXPIRE',")
        )
    )


@mutant("C4.12/expired-reads-clean")
def expired_reads_clean() -> Any:
    """A trace whose keys expired is taken for a new one: it reads TRUSTED and anyone may
    claim it afresh (forgotten state reads clean)."""
    return _scripts(lambda text: text.replace("orphaned(t) then", "false then"))


@mutant("C4.12/held-count-only-shared")
def held_count_only_shared() -> Any:
    """Held results in Redis are bounded by count only (the bug): 8192 payloads of up to
    the body limit each, far past the in-process store's bytes."""
    return edited(RedisHeldStore.hold, ("self.limit, self.max_bytes]", "self.limit, 1 << 62]"))
