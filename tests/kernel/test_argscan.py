"""The floor reads protected paths, denied hosts and redacted keys in one walk
(``fak_core.argscan``): with each reading and the argument rules on or off in the policy,
every subset of a protected path, an argument-rule violation, a denied host and redacted
keys decides the call as each would alone, in the floor's order, for a tool that writes or
not and is allowed or not, whatever JSON spelling the arguments come in (D2.4, D2.5, D2.7);
and the walk itself, asked each of its three questions or not, on trees that mix every
plant at any depth, answers each as its guard alone would (D2.4, D2.5).

The oracle is the generator: it knows what it planted (each plant at a random depth of
its own subtree, among benign siblings, in random order), which readings are on, whether
the tool writes and whether the policy allows it; the expected redaction is a plain
recursive delete of the planted keys.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fak_core import ArgRule, Kernel, Policy, ToolCall, VerdictKind
from fak_core.argscan import ArgumentScan
from fak_core.hosts import HostDenyList
from fak_core.redact import Redactor
from fak_core.selfmodify import PathGuard
from tests.kernel.hostgen import DENY_ENTRIES, bare_of, denied_target, ordinary_target, url_of
from tests.kernel.test_guards import (
    FIELDS,
    FILLER,
    GLOBS,
    KEYS,
    _dropped,
    _without,
    carrier_pairs,
    carriers,
    path_pairs,
    planted,
    protected_paths,
    spellings,
)

CLEAN_KEYS_BOUND = 4096  # D2.5: the clean key names the floor remembers
RULE_ARG = "mode"  # no generated key can spell it (KEYS is drawn from "abcde")
BENIGN = st.sampled_from(["SFO", "2026-12-01", "42", "hello world", "notes/todo.txt", ""])


def _escaped(raw: str) -> str:
    """``raw`` with every ``/`` and ``_`` written as a JSON escape: the same arguments, but
    a text in which no protected name occurs literally (neither occurs outside strings)."""
    return raw.replace("/", "\\/").replace("_", "\\u005f")


@st.composite
def host_plant(draw: st.DrawFn, single: bool) -> str:
    """A denied host in some encoding (``localhost`` only when the one-label name is on
    the deny list)."""
    targets = denied_target()
    if not single:
        targets = targets.filter(lambda t: t[0].text != "localhost")
    _, host, v6 = draw(targets)
    if draw(st.booleans()):
        return draw(url_of(host, v6, hostile=True))
    return draw(bare_of(host, v6))


@st.composite
def benign_host(draw: st.DrawFn) -> str:
    _, host, v6 = draw(ordinary_target())
    return draw(url_of(host, v6, hostile=False))


TOOLS = {  # (writes, allowed) -> tool
    (True, True): "write_file",
    (True, False): "apply_patch",
    (False, True): "get_x",
    (False, False): "lookup_page",
}
PLANTS = ("path", "rule", "host", "redacted")


@st.composite
def cases(draw: st.DrawFn) -> dict[str, Any]:
    """A policy with each reading on or off, and one drawn value of each plant (nested in
    its own subtree) plus benign company; the test decides every subset of the plants."""
    on = {r: draw(st.booleans()) for r in ("globs", "hosts", "fields", "rules")}
    single = draw(st.booleans())  # a one-label denied name turns off the letters shortcut
    deny = DENY_ENTRIES if single else tuple(e for e in DENY_ENTRIES if e != "localhost")
    fields = tuple(draw(st.lists(st.sampled_from(FIELDS), min_size=1, max_size=3, unique=True)))
    policy = Policy(
        allow=(TOOLS[True, True], TOOLS[False, True]),
        self_modify_globs=GLOBS if on["globs"] else (),
        deny_hosts=deny if on["hosts"] else (),
        redact_fields=fields if on["fields"] else (),
        arg_rules=tuple(ArgRule(t, RULE_ARG, deny_regex="^forbidden$") for t in TOOLS.values())
        if on["rules"]
        else (),
    )
    how, text = draw(carriers(draw(protected_paths())))
    # two spellings or three: the verdict's list of the names it redacted has a separator
    spelled = draw(
        st.lists(st.sampled_from(fields).flatmap(spellings), min_size=2, max_size=3, unique=True)
    )
    subtrees = {
        "path": draw(planted({text: draw(FILLER)} if how == "key" else text)),
        "host": draw(planted(draw(host_plant(single)))),
        "redacted": draw(planted({k: draw(FILLER) for k in spelled})),
    }
    company = [draw(planted(draw(benign_host() | BENIGN))) for _ in range(draw(st.integers(0, 3)))]
    names = [f"{draw(KEYS)}{i}" for i in range(len(company) + 3)]
    return {
        "on": on,
        "policy": policy,
        "subtrees": subtrees,
        "company": company,
        "names": names,
        "redacted": set(spelled),
        "order": draw(st.randoms()),
    }


def _arguments(case: dict[str, Any], plants: tuple[str, ...]) -> dict[str, Any]:
    """The arguments holding exactly ``plants`` (and the company), in a random order."""
    parts = [case["subtrees"][p] for p in plants if p != "rule"] + case["company"]
    case["order"].shuffle(parts)
    args: dict[str, Any] = dict(zip(case["names"], parts, strict=False))
    if "rule" in plants:
        args[RULE_ARG] = "forbidden"
    elif case["order"].random() < 0.5:
        args[RULE_ARG] = "fine"
    return args


def _raw(args: dict[str, Any], mode: int) -> str | bytes:
    """The arguments as JSON text: plain, non-ASCII kept, with ``/`` and ``_`` escaped, or
    as UTF-8 bytes (escaped too, so the raw-text gate must read past the escapes)."""
    if mode == 0:
        return json.dumps(args)
    if mode == 1:
        return json.dumps(args, ensure_ascii=False)
    if mode == 2:
        return _escaped(json.dumps(args))
    return _escaped(json.dumps(args, ensure_ascii=False)).encode("utf-8")


def _expected(on: dict[str, bool], plants: tuple[str, ...], write: bool, allowed: bool) -> str:
    if "path" in plants and write and on["globs"]:
        return "DENY/SELF_MODIFY"
    if "rule" in plants and on["rules"]:
        return "DENY/POLICY_BLOCK"
    if "host" in plants and on["hosts"]:
        return "DENY/EGRESS_BLOCK"
    if not allowed:
        return "DENY/DEFAULT_DENY"
    return "TRANSFORM/NONE" if "redacted" in plants and on["fields"] else "ALLOW/NONE"


@pytest.mark.fak_theorem("D2.4", "D2.5", "D2.7")
@settings(suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(cases())
def test_each_reading_decides_as_alone_in_the_one_walk(case: dict[str, Any]) -> None:
    # every subset of the plants, for a tool that writes or not and is allowed or not
    k = Kernel(case["policy"])
    for n, plants in enumerate(
        tuple(p for i, p in enumerate(PLANTS) if bits >> i & 1) for bits in range(16)
    ):
        args = _arguments(case, plants)
        for (write, allowed), tool in TOOLS.items():
            raw = _raw(args, (n + write) % 4)
            v = k.decide(ToolCall(tool, raw))
            got = f"{k.kinds.name(v.kind)}/{k.reasons.name(v.reason)}"
            want = _expected(case["on"], plants, write, allowed)
            assert got == want, (tool, raw, v.claim)
            if got == "DENY/SELF_MODIFY":
                assert v.claim in GLOBS
            if v.kind == VerdictKind.TRANSFORM:
                present = _dropped(args, case["redacted"])
                assert json.loads(v.repaired_args or "") == _without(args, present)
                assert v.meta["redacted"].split(",") == sorted(present)


@pytest.mark.fak_theorem("D2.5")
def test_the_floors_memory_of_clean_keys_is_bounded() -> None:
    k = Kernel(Policy(allow=("get_x",), redact_fields=("password",)))
    # batches that fill the memory exactly to the bound, then single keys across it
    sizes = [64] * (CLEAN_KEYS_BOUND // 64) + [1] * 3 + [64] * (CLEAN_KEYS_BOUND // 64)
    i = 0
    for size in sizes:
        args = {f"k{j}": j for j in range(i, i + size)}
        i += size
        assert k.decide(ToolCall("get_x", json.dumps(args))).kind == VerdictKind.ALLOW
        assert len(k.floor._redact.clean) <= CLEAN_KEYS_BOUND
    # and it still redacts once the memory has been cleared
    v = k.decide(ToolCall("get_x", '{"k1": 1, "PassWord": "x"}'))
    assert v.kind == VerdictKind.TRANSFORM and json.loads(v.repaired_args or "") == {"k1": 1}


@pytest.mark.fak_theorem("D2.4", "D2.7")
@pytest.mark.parametrize("after", [0, 1, 2, 3])
def test_a_denied_host_stays_denied_while_the_walk_looks_for_paths(after: int) -> None:
    """A write call whose text names a glob's pieces (so paths are still looked for after
    a denied host): the strings read after the denied one, ordinary destinations and a
    name that merely contains a protected one, do not undo the refusal."""
    k = Kernel(
        Policy(allow=("write_file",), self_modify_globs=GLOBS, deny_hosts=("169.254.0.0/16",))
    )
    later = ["https://example.com/a", "docs/fak_core.md", "mailto:bob@example.com"][:after]
    for args in (
        {"a": "http://169.254.169.254/latest", "b": later},
        {"a": ["http://169.254.169.254/latest", *later], "z": "fak_core_notes/x"},
    ):
        v = k.decide(ToolCall("write_file", json.dumps(args)))
        assert (k.kinds.name(v.kind), k.reasons.name(v.reason)) == ("DENY", "EGRESS_BLOCK"), args


@pytest.mark.fak_theorem("D2.4", "D2.5", "D2.7")
@pytest.mark.parametrize(
    "args",
    [
        {"fak_core/x.py": "1", "password": "x", "u": "http://169.254.169.254/"},
        {"u": "http://169.254.169.254/", "d": {"password": "x", "e": {"fak_core/x.py": "1"}}},
        {"password": "x", "l": ["http://169.254.169.254/", {"theorems/a.md": 1}]},
        {"u": "http://169.254.169.254/", "password": "x", "c": "echo x > fak_core/x.py"},
    ],
)
def test_a_protected_path_decides_before_a_denied_host_and_a_redacted_key(
    args: dict[str, Any],
) -> None:
    """All three readings on, all three planted (the path as a key or a value, at the top
    or nested): the path decides for a tool that writes; for one that does not, the host."""
    k = Kernel(
        Policy(
            allow=("write_file", "get_x"),
            self_modify_globs=GLOBS,
            deny_hosts=("169.254.0.0/16",),
            redact_fields=("password",),
        )
    )
    for tool, want in (("write_file", "DENY/SELF_MODIFY"), ("get_x", "DENY/EGRESS_BLOCK")):
        v = k.decide(ToolCall(tool, json.dumps(args)))
        assert f"{k.kinds.name(v.kind)}/{k.reasons.name(v.reason)}" == want, (tool, args)


def _folded(name: str) -> str:
    """The oracle's spelling of a field: letters and digits only, lower case."""
    return "".join(c for c in name.lower() if c not in "-_. ")


def _readings(value: Any) -> tuple[list[str], list[str]]:
    """(every key, every string value) of ``value`` at every depth: a plain recursion."""
    if isinstance(value, dict):
        keys, strings = [*value], []
        for v in value.values():
            k, t = _readings(v)
            keys += k
            strings += t
        return keys, strings
    if isinstance(value, list):
        keys, strings = [], []
        for v in value:
            k, t = _readings(v)
            keys += k
            strings += t
        return keys, strings
    return [], [value] if isinstance(value, str) else []


@st.composite
def mixed_trees(draw: st.DrawFn) -> dict[str, Any]:
    """A deny list and redacted fields, pools of plants (protected paths and their
    unprotected twins, denied and ordinary hosts, spellings of redacted and of other
    fields, clean keys) and several argument trees drawn from them: every plant may stand
    at any depth, as a key or a value, next to any other, and each pool may be empty."""
    single = draw(st.booleans())
    deny = DENY_ENTRIES if single else tuple(e for e in DENY_ENTRIES if e != "localhost")
    fields = tuple(draw(st.lists(st.sampled_from(FIELDS), min_size=1, max_size=3, unique=True)))
    paths, twins = [], []
    for _ in range(draw(st.integers(0, 2))):
        _, text, twin = draw(carrier_pairs(draw(path_pairs())))
        paths.append(text)
        twins.append(twin)
    denied = draw(st.lists(host_plant(single), max_size=2))
    ordinary = draw(st.lists(benign_host() | BENIGN, max_size=3))
    secret = draw(st.lists(st.sampled_from(FIELDS).flatmap(spellings), max_size=3))
    clean = draw(st.lists(KEYS, min_size=1, max_size=4))
    key = st.sampled_from([*clean, *secret, *paths, *twins])
    leaf = st.one_of(
        FILLER, st.integers(), st.booleans(), st.none(), st.sampled_from([*clean, *secret])
    )
    if paths or twins or denied or ordinary:
        leaf = leaf | st.sampled_from([*paths, *twins, *denied, *ordinary])
    node = st.recursive(
        leaf,
        lambda kids: st.lists(kids, max_size=4) | st.dictionaries(key, kids, max_size=4),
        max_leaves=12,
    )
    trees = draw(st.lists(st.dictionaries(key, node, max_size=5), min_size=1, max_size=4))
    return {
        "deny": deny,
        "fields": fields,
        "paths": set(paths),
        "denied": set(denied),
        "trees": trees,
        "raw": draw(st.lists(st.integers(0, 3), min_size=len(trees), max_size=len(trees))),
    }


@pytest.mark.fak_theorem("D2.4", "D2.5")
@settings(suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(mixed_trees())
def test_the_one_walk_answers_each_guard_as_it_would_alone(case: dict[str, Any]) -> None:
    """Each of the walk's three answers is the one its guard gives alone, whatever the
    others find: the oracle reads every key and string by a plain recursion and asks each
    question apart (a planted protected path, a planted denied host, a key that folds to a
    redacted field), with each question asked or not. One walk (and its memory of clean
    keys) serves every tree, twice, as the floor's does every call."""
    guard = PathGuard(GLOBS)
    redactor = Redactor(case["fields"])
    walks = {
        False: ArgumentScan(guard, None, redactor),
        True: ArgumentScan(guard, HostDenyList(case["deny"]), redactor),
    }
    folded = {_folded(f) for f in case["fields"]}
    for tree, mode in [*zip(case["trees"], case["raw"], strict=True)] * 2:
        keys, strings = _readings(tree)
        path = any(t in case["paths"] for t in keys + strings)
        host = any(t in case["denied"] for t in strings)
        secret = any(_folded(k) in folded for k in keys)
        candidates = guard.candidates(_raw(tree, mode))  # the floor's gate on the raw text
        for ask_paths, ask_hosts, ask_keys in (
            (a, b, c) for a in (False, True) for b in (False, True) for c in (False, True)
        ):
            globs = candidates if ask_paths else ()
            glob, why, redacted = walks[ask_hosts].scan(tree, globs, ask_keys)
            if ask_paths and path:  # a protected path ends the walk: it decides the call
                assert glob in GLOBS and why is None and not redacted, tree
                continue
            assert glob is None, (tree, glob)
            assert (why is not None) == (ask_hosts and host), (tree, why)
            # a denied host ends the walk when no path is looked for (none asked, or the
            # raw text's gate left no glob to look for)
            stopped = ask_hosts and host and not globs
            assert redacted == (ask_keys and secret and not stopped), tree
        assert not {k for k in redactor.clean if _folded(k) in folded}, "a redacted key read clean"
