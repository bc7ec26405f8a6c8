"""Mutants for C4.7 (taint across replicas): plausible ways a replica stops sharing."""

from __future__ import annotations

import contextlib
import weakref
from typing import Any
from unittest import mock

from fak_core.grounding import GroundingStore
from fak_core.ledger import MemoryLedger
from fak_core.redis_stores import RedisGroundingStore, RedisHeldStore, RedisLedger
from fak_core.taint import Taint
from pytest_fak import mutant


@mutant("C4.7/replica-local-ledger")
def replica_local_ledger() -> Any:
    """Each replica keeps its own in-memory ledger (the store never reaches Redis): a
    session tainted on one replica is clean on the other."""
    local: weakref.WeakKeyDictionary[RedisLedger, MemoryLedger] = weakref.WeakKeyDictionary()

    def mine(self: RedisLedger) -> MemoryLedger:
        return local.setdefault(self, MemoryLedger())

    stack = contextlib.ExitStack()
    stack.enter_context(
        mock.patch.object(RedisLedger, "level", lambda self, t: mine(self).level(t))
    )
    stack.enter_context(
        mock.patch.object(
            RedisLedger, "raise_to", lambda self, t, taint: mine(self).raise_to(t, taint)
        )
    )
    stack.enter_context(
        mock.patch.object(RedisLedger, "reset", lambda self, t: mine(self).reset(t))
    )
    return stack


@mutant("C4.7/cached-level")
def cached_level() -> Any:
    """A replica caches the first mark it reads per trace (saving a round trip per
    decision), so it never sees another replica's raise."""
    real_level = RedisLedger.level
    real_raise = RedisLedger.raise_to
    cache: weakref.WeakKeyDictionary[RedisLedger, dict[str, Taint]] = weakref.WeakKeyDictionary()

    def level(self: RedisLedger, trace: str) -> Taint:
        mine = cache.setdefault(self, {})
        if trace not in mine:
            mine[trace] = real_level(self, trace)
        return mine[trace]

    def raise_to(self: RedisLedger, trace: str, taint: Taint) -> Taint:
        out = real_raise(self, trace, taint)
        cache.setdefault(self, {})[trace] = out
        return out

    stack = contextlib.ExitStack()
    stack.enter_context(mock.patch.object(RedisLedger, "level", level))
    stack.enter_context(mock.patch.object(RedisLedger, "raise_to", raise_to))
    return stack


@mutant("C4.7/shared-set-not-max")
def shared_set_not_max() -> Any:
    """``raise_to`` writes the new label with a plain SET, not the atomic maximum: a later
    trusted result on any replica lowers the shared mark."""

    def raise_to(self: RedisLedger, trace: str, taint: Taint) -> Taint:
        self.state.client.set(self.PREFIX + trace, int(taint))
        return Taint(taint)

    return mock.patch.object(RedisLedger, "raise_to", raise_to)


@mutant("C4.7/held-stub-local")
def held_stub_local() -> Any:
    """Each replica remembers only the stubs it issued itself: the stub one replica hands
    out is screened as a look-alike by the other."""
    issued: weakref.WeakKeyDictionary[RedisHeldStore, set[str]] = weakref.WeakKeyDictionary()
    real_hold = RedisHeldStore.hold

    def hold(
        self: RedisHeldStore, payload: str, key: str | None = None, *, stub: Any = None
    ) -> str:
        held = real_hold(self, payload, key, stub=stub)
        if stub is not None:
            issued.setdefault(self, set()).add(stub(held))
        return held

    def minted(self: RedisHeldStore, text: str) -> bool:
        return text in issued.get(self, set())

    stack = contextlib.ExitStack()
    stack.enter_context(mock.patch.object(RedisHeldStore, "hold", hold))
    stack.enter_context(mock.patch.object(RedisHeldStore, "minted", minted))
    return stack


# ---------------------------------------------------------------- C4.8 across replicas
@mutant("C4.8/nonces-per-replica")
def nonces_per_replica() -> Any:
    """Each replica remembers only the approvals it confirmed itself (the nonce store
    never reaches Redis): a token spent on one replica approves its call again on another."""
    from fak_core.approvals import MemoryNonces
    from fak_core.redis_stores import RedisNonces

    local: weakref.WeakKeyDictionary[RedisNonces, MemoryNonces] = weakref.WeakKeyDictionary()

    def spend(self: RedisNonces, nonce: str, expires: int, now: float) -> str | None:
        return local.setdefault(self, MemoryNonces()).spend(nonce, expires, now)

    return mock.patch.object(RedisNonces, "spend", spend)


@mutant("C4.8/down-store-confirms")
def down_store_confirms() -> Any:
    """A nonce store that cannot be reached is taken for "never spent": the approval
    goes through while Redis is down."""
    from fak_core.redis_state import StateUnavailable
    from fak_core.redis_stores import RedisNonces

    real = RedisNonces.spend

    def spend(self: RedisNonces, nonce: str, expires: int, now: float) -> str | None:
        try:
            return real(self, nonce, expires, now)
        except StateUnavailable:
            return None

    return mock.patch.object(RedisNonces, "spend", spend)


@mutant("C4.8/down-reason-lost")
def down_reason_lost() -> Any:
    """A resolver that could not reach its state is taken for one that abstained: the
    refusal reads UNWITNESSED (a human should approve) instead of STATE_DOWN (wait)."""
    from fak_core.adjudicators import WitnessOutcome
    from fak_core.approvals import ApprovalResolver

    real = ApprovalResolver.resolve

    def resolve(self: ApprovalResolver, call: Any, claim: str) -> WitnessOutcome:
        try:
            return real(self, call, claim)
        except Exception:
            return WitnessOutcome.ABSTAIN

    return mock.patch.object(ApprovalResolver, "resolve", resolve)


@mutant("C4.8/gateway-ignores-key")
def gateway_ignores_key() -> Any:
    """The gateway builds its kernel without reading FAK_APPROVAL_KEY (the bug before
    2026-12-01): no token is ever accepted, and a short key is not reported."""
    from fak_core.gateway import bootstrap

    return mock.patch.object(bootstrap, "enable_env_approvals", return_value=False)


def _local_grounding() -> Any:
    """Each replica's own in-memory grounding store, keyed by the shared store object."""
    local: weakref.WeakKeyDictionary[RedisGroundingStore, GroundingStore] = (
        weakref.WeakKeyDictionary()
    )

    def mine(self: RedisGroundingStore) -> GroundingStore:
        return local.setdefault(self, GroundingStore())

    return mine


@mutant("C4.7/grounding-local")
def grounding_local() -> Any:
    """Policy v2's grounding store stays in each process (as before ``--state`` shared
    it): the user's words recorded on one replica ground nothing on the other, and each
    replica names only the untrusted content it admitted itself."""
    mine = _local_grounding()
    stack = contextlib.ExitStack()
    for name in (
        "record_trusted",
        "record_trusted_many",
        "record_untrusted",
        "reset",
        "grounded",
        "origin_of",
    ):
        stack.enter_context(
            mock.patch.object(
                RedisGroundingStore, name, lambda self, *a, _n=name: getattr(mine(self), _n)(*a)
            )
        )
    return stack


@mutant("C4.7/provenance-local")
def provenance_local() -> Any:
    """The trusted context is shared but the untrusted content is kept per replica (it
    "only names origins"): a refusal's claim then says where a value came from on one
    replica and "in no content this session admitted" on the other."""
    mine = _local_grounding()
    stack = contextlib.ExitStack()
    stack.enter_context(
        mock.patch.object(
            RedisGroundingStore,
            "record_untrusted",
            lambda self, t, text, origin: mine(self).record_untrusted(t, text, origin),
        )
    )
    stack.enter_context(
        mock.patch.object(
            RedisGroundingStore, "origin_of", lambda self, t, v: mine(self).origin_of(t, v)
        )
    )
    return stack


@mutant("C4.7/words-encoded-strictly")
def words_encoded_strictly() -> Any:
    """The grounding store sizes the user's words with a strict UTF-8 encoding (the bug
    before the shared store): a lone surrogate in the user's text (JSON allows ``\\ud800``)
    makes recording it raise instead of being kept."""
    real = GroundingStore.record_trusted

    def record_trusted(self: GroundingStore, trace: str, text: str, origin: str = "user") -> None:
        text.encode("utf-8")  # raises on a lone surrogate, as the strict sizing did
        real(self, trace, text, origin)

    return mock.patch.object(GroundingStore, "record_trusted", record_trusted)


# ---------------------------------------------------------------- C4.9/C4.10 across replicas
@mutant("C4.7/identifiers-per-replica")
def identifiers_per_replica() -> Any:
    """Identifier values stay in the process that admitted the result (the in-memory
    store's recording, as before the shared store kept them): they ground on that replica
    only, and a refusal on the other."""
    mine = _local_grounding()
    real = RedisGroundingStore.grounded

    def grounded(self: RedisGroundingStore, trace: str, value: str) -> bool:
        return real(self, trace, value) or mine(self).grounded(trace, value)

    stack = contextlib.ExitStack()
    stack.enter_context(
        mock.patch.object(
            RedisGroundingStore,
            "record_identifiers",
            lambda self, t, values, origin: mine(self).record_identifiers(t, values, origin),
        )
    )
    stack.enter_context(mock.patch.object(RedisGroundingStore, "grounded", grounded))
    return stack


@mutant("C4.7/identifiers-as-words")
def identifiers_as_words() -> Any:
    """The shared store records identifier values as trusted text: their words ground
    too (``Dana`` from the recipient ``Dana Reyes``), where one process grounds only the
    whole value."""

    def record_identifiers(self: RedisGroundingStore, t: str, values: list[str], o: str) -> None:
        self.record_trusted_many(t, [(o, v) for v in values])

    return mock.patch.object(RedisGroundingStore, "record_identifiers", record_identifiers)


@mutant("C4.7/confidential-per-replica")
def confidential_per_replica() -> Any:
    """Each replica keeps the confidential values it recorded itself: a card admitted on
    one replica is carried out by a sink call on the other."""
    from fak_core.confidential import ConfidentialStore
    from fak_core.redis_confidential import RedisConfidential

    local: weakref.WeakKeyDictionary[RedisConfidential, ConfidentialStore] = (
        weakref.WeakKeyDictionary()
    )

    def mine(self: RedisConfidential) -> ConfidentialStore:
        return local.setdefault(self, ConfidentialStore())

    stack = contextlib.ExitStack()
    for name in ("record", "reset", "carried"):
        stack.enter_context(
            mock.patch.object(
                RedisConfidential, name, lambda self, *a, _n=name: getattr(mine(self), _n)(*a)
            )
        )
    return stack


def _confidential_script(name: str, old: str, new: str) -> Any:
    from fak_core import redis_confidential

    body = getattr(redis_confidential, name)
    assert old in body, (name, old)
    return mock.patch.object(redis_confidential, name, body.replace(old, new))


@mutant("C4.7/evicted-confidential-reads-clean")
def evicted_confidential_reads_clean() -> Any:
    """A session dropped at the byte bound leaves no mark: it reads as one that never
    kept a value, so its sink calls carry the card out."""
    return _confidential_script(
        "_C_RECORD", "redis.call('SETBIT', KEYS[7], bucket, 1)", "local _ = bucket"
    )


@mutant("C4.7/evicted-session-restarts-clean")
def evicted_session_restarts_clean() -> Any:
    """A session dropped at the byte bound that records a value again starts afresh:
    the values it kept before are forgotten and read as never kept."""
    return _confidential_script(
        "_C_RECORD",
        "if redis.call('GETBIT', KEYS[7], tonumber(ARGV[4])) == 1 then",
        "if false then",
    )


@mutant("C4.7/down-confidential-reads-clean")
def down_confidential_reads_clean() -> Any:
    """A confidential store that cannot be reached is taken for one that holds nothing:
    while Redis is down (or lost its data) every call carries no secret."""
    from fak_core.redis_confidential import RedisConfidential
    from fak_core.statedown import StateUnavailable

    real = RedisConfidential.carried

    def carried(self: RedisConfidential, trace: str, args: Any) -> tuple[str, str] | None:
        try:
            return real(self, trace, args)
        except StateUnavailable:
            return None

    return mock.patch.object(RedisConfidential, "carried", carried)
