"""Generated mutants: every standard one-token bug of an anchor, applied reversibly.

For an anchor ``module:Qual.name`` naming a function or method, :func:`generate` parses
its source with libcst (which round-trips the source exactly, so each mutant differs
from the original in the mutated node alone), applies every operator of
:mod:`pytest_fak.operators` at every site of the body, and returns the mutants in
source order. A mutant's id is the mutated code, not its place:
``<symbol>/<operator>/<hash>``, e.g. ``pkg.mod:f/compare-boundary/1a2b3c4d``, the first 8
hex digits of SHA-256 over the mutated node's code before and after as Python's parser
reads it (:func:`_normal`: layout, comments, parentheses and quote styles drop out; a
negated ``if``/``while`` counts by its test alone), with ``#2``, ``#3``… on later
occurrences (in source order) of the same change in the function. Adding, removing or
moving lines elsewhere in the function, comments, re-indenting and re-wrapping (inside
the mutated node too) keep every id.

``# pragma: fak-equivalent: <reason>`` on the first line of a mutated node (every
operator's mutants of nodes starting there), or ``# pragma:
fak-equivalent[<operator>,...]: <reason>``, waives them in the code
(:attr:`GeneratedMutant.pragma`); a malformed pragma is one of :attr:`Generation.problems`.

:meth:`GeneratedMutant.applied` compiles the mutated function in its module's globals
(inside a class of the same name for a method, so private names mangle and ``super()``
works as in the original, padded so line numbers match the file) and swaps the
function's ``__code__`` while entered, so every caller sees the mutant, including code
that imported the function by name; leaving restores the original code.
"""

from __future__ import annotations
import __future__

import ast
import contextlib
import difflib
import hashlib
import inspect
import io
import re
import textwrap
import tokenize
from collections.abc import Iterator
from dataclasses import dataclass, field
from types import CodeType, FunctionType
from typing import Any, cast

import libcst as cst
from libcst.metadata import CodeRange, MetadataWrapper, PositionProvider

from pytest_fak.operators import OPERATORS, sites
from pytest_fak.symbols import SymbolError, function_of, lookup

__all__ = ["GeneratedMutant", "MutantApplyError", "Generation", "generate", "swapped_code"]


class MutantApplyError(RuntimeError):
    """A generated mutant could not be compiled or swapped in (the mutant is BROKEN)."""


@dataclass(frozen=True, slots=True)
class GeneratedMutant:
    """One generated mutant of one anchor."""

    id: str
    symbol: str
    operator: str
    filename: str
    line: int  #: first mutated line in the file
    lines: frozenset[int]  #: the file lines of its statement, up to the mutated node's last
    diff: str
    #: the reason of the ``# pragma: fak-equivalent`` waiving it in the code, if one does
    pragma: str | None = None
    _source: str = field(repr=False, default="")  #: the whole mutated function, dedented
    _def_line: int = field(repr=False, default=1)  #: the file line of ``def``

    @property
    def description(self) -> str:
        return OPERATORS[self.operator]

    def current_code(self) -> CodeType | None:
        """The code object of this mutant's last application (to find threads running it)."""
        return _COMPILED.get(self.id)

    @contextlib.contextmanager
    def applied(self) -> Iterator[None]:
        target = _real_target(self.symbol)
        code = _compile(target, self._source, self._def_line, self.symbol)
        _COMPILED.clear()
        _COMPILED[self.id] = code
        with swapped_code(target, code):
            yield


@contextlib.contextmanager
def swapped_code(target: FunctionType, code: CodeType) -> Iterator[None]:
    """Run ``target`` with ``code`` while entered (every caller sees it: the function
    object is kept), then put its own code back. ``mock.patch`` cannot do this:
    ``__code__`` is not in the function's ``__dict__``."""
    original = target.__code__
    target.__code__ = code
    try:
        yield
    finally:
        target.__code__ = original


_COMPILED: dict[str, CodeType] = {}


@dataclass(frozen=True, slots=True)
class Generation:
    """The mutants of one anchor, or why it has none (``unmutable``)."""

    symbol: str
    source_sha256: str
    mutants: tuple[GeneratedMutant, ...]
    unmutable: str | None = None
    #: what is wrong with its ``# pragma: fak-equivalent`` comments, each with the fix
    problems: tuple[str, ...] = ()


def _target(symbol: str) -> FunctionType:
    fn = function_of(lookup(symbol))
    if fn is None:
        raise SymbolError(f"{symbol!r} is not a function")
    return fn


_REAL: dict[str, tuple[FunctionType, CodeType]] = {}


def _real_target(symbol: str) -> FunctionType:
    """The function :func:`generate` found for ``symbol``, checked to run its own code.

    The name is not looked up again when a mutant is applied: a witness (or a fixture of
    any scope) may have replaced the module attribute by then (``monkeypatch.setattr`` of
    a spy, ``mock.patch``), and the mutant would go into the replacement (a closure is
    BROKEN, a plain function a mutant of the wrong code). A function that is not running
    its own code (another mutant or a patch of ``__code__`` in force) is refused."""
    real = _REAL.get(symbol)
    if real is None:
        return _target(symbol)
    fn, code = real
    if fn.__code__ is not code:
        raise MutantApplyError(
            f"{symbol} is not running its own code (another mutant or a patch of its "
            "__code__ is in force): a mutant applied now would not start from the real code"
        )
    return fn


def _class_name(fn: FunctionType) -> str | None:
    parts = fn.__qualname__.split(".")
    if len(parts) >= 2 and parts[-2] != "<locals>":
        return parts[-2]
    return None


def _compile(fn: FunctionType, source: str, def_line: int, symbol: str) -> CodeType:
    cls = _class_name(fn)
    flags = 0
    if getattr(fn.__globals__.get("annotations"), "compiler_flag", None) == (
        __future__.annotations.compiler_flag
    ):
        flags |= __future__.annotations.compiler_flag
    if cls:
        pad = "\n" * max(0, def_line - 2)
        text = f"{pad}class {cls}:\n" + textwrap.indent(source, "    ")
    else:
        text = "\n" * max(0, def_line - 1) + source
    try:
        code = compile(text, fn.__code__.co_filename, "exec", flags, dont_inherit=True)
        namespace: dict[str, Any] = dict(fn.__globals__)
        exec(code, namespace)
        holder: Any = namespace[cls].__dict__ if cls else namespace
        new = holder[fn.__name__]
        new = function_of(new)
    except Exception as exc:
        raise MutantApplyError(f"mutant of {symbol} does not compile: {exc}") from exc
    if new is None or new.__code__.co_freevars != fn.__code__.co_freevars:
        raise MutantApplyError(f"mutant of {symbol} changed its free variables")
    return new.__code__


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:8]


def generate(symbol: str) -> Generation:
    """Every generated mutant of the function ``symbol`` names, in source order."""
    from pytest_fak.symbols import source_hash

    fn = _target(symbol)
    if _REAL.get(symbol, (None,))[0] is not fn:  # keep the code first seen (no mutant)
        _REAL[symbol] = (fn, fn.__code__)
    try:
        lines, first = inspect.getsourcelines(fn)
    except (OSError, TypeError):
        return Generation(symbol, "", (), "its source is not available")
    raw = "".join(lines)
    sha = source_hash(raw)
    if set(fn.__code__.co_freevars) - {"__class__"}:
        return Generation(symbol, sha, (), "it is a closure (its free variables cannot be rebound)")
    source = textwrap.dedent(raw)
    try:
        module = cst.parse_module(source)
    except cst.ParserSyntaxError as exc:
        return Generation(symbol, sha, (), f"libcst cannot parse it: {exc}")
    wrapper = MetadataWrapper(module)
    positions = wrapper.resolve(PositionProvider)
    fdef = next((s for s in wrapper.module.body if isinstance(s, cst.FunctionDef)), None)
    if fdef is None:
        return Generation(symbol, sha, (), "its source is not a def statement")
    def_rel = positions[fdef.name].start.line  # 1-based line of `def` in `source`
    def_line = first + def_rel - 1
    original = source.splitlines(keepends=True)
    pragmas, problems = _pragmas(symbol, source, first)
    found, elifs = sites(fdef)
    out: list[GeneratedMutant] = []
    seen: set[tuple[str, int, int, str]] = set()
    occurrences: dict[tuple[str, str, str], int] = {}
    waiving: set[int] = set()  # lines whose pragma waived a mutant
    for op, node, new, stmt in found:
        rng: CodeRange = positions[node]
        # coverage records statement lines: the mutant is reached when its statement is
        stmt_line = min(positions[stmt].start.line, rng.start.line)
        elif_ = id(node) in elifs
        text = _node_text(node, new, original[rng.start.line - 1], elif_)
        head = original[rng.start.line - 1][: rng.start.column]
        tail = original[rng.end.line - 1][rng.end.column :]
        span = (head + text + tail).splitlines(keepends=True)
        before = original[rng.start.line - 1 : rng.end.line]
        if span == before:
            continue
        key = (op, rng.start.line, rng.start.column, "".join(span))
        if key in seen:  # the same mutant twice (one node, one replacement)
            continue
        seen.add(key)
        header = op == "negate-condition"
        change = (op, _normal(node, elif_, header), _normal(new, elif_, header))
        n = occurrences[change] = occurrences.get(change, 0) + 1
        mid = f"{symbol}/{op}/{_digest(change[1] + '→' + change[2])}" + (f"#{n}" if n > 1 else "")
        mutated = original[: rng.start.line - 1] + span + original[rng.end.line :]
        diff = "".join(difflib.unified_diff(original, mutated, fromfile=symbol, tofile=mid, n=1))
        pragma = pragmas.get(rng.start.line)
        reason = None
        if pragma is not None and (pragma[0] is None or op in pragma[0]):
            reason = pragma[1]
            waiving.add(rng.start.line)
        out.append(
            GeneratedMutant(
                mid,
                symbol,
                op,
                fn.__code__.co_filename,
                first + rng.start.line - 1,
                frozenset(range(first + stmt_line - 1, first + rng.end.line)),
                diff,
                reason,
                _source="".join(mutated[def_rel - 1 :]),
                _def_line=def_line,
            )
        )
    for rel in sorted(set(pragmas) - waiving):
        ops = pragmas[rel][0]
        which = f" by {', '.join(sorted(ops))}" if ops else ""
        problems.append(
            f"{symbol}, line {first + rel - 1}: its `# pragma: fak-equivalent` waives no "
            f"generated mutant (no mutated node{which} starts on that line): put it on the "
            "first line of the mutated expression or statement, or remove it"
        )
    return Generation(symbol, sha, tuple(out), problems=tuple(problems))


def _node_text(node: cst.CSTNode, new: cst.CSTNode, first_line: str, elif_: bool) -> str:
    """The source of ``new`` as it replaces ``node`` in place (a statement re-indented)."""
    if hasattr(new, "leading_lines"):
        new = new.with_changes(leading_lines=[])
    text = _EMPTY.code_for_node(new)
    if isinstance(node, (cst.BaseCompoundStatement, cst.SimpleStatementLine, cst.ExceptHandler)):
        text = text.removesuffix("\n")
        indent = first_line[: len(first_line) - len(first_line.lstrip())]
        lines = text.split("\n")
        text = "\n".join([lines[0]] + [indent + ln if ln else ln for ln in lines[1:]])
    if elif_:
        text = "el" + text
    return text


_EMPTY = cst.Module(body=[])


def _normal(node: cst.CSTNode, elif_: bool = False, header: bool = False) -> str:
    """The code of ``node`` as Python's parser reads it, printed back (``ast.unparse``):
    comments, blank lines, line breaks, indentation widths, parentheses and the quotes of
    strings drop out, inside the node as well as around it, so a formatter re-wrapping any
    part of it changes nothing. ``header``: an ``if``/``while`` by its keyword and test alone
    (a negated test leaves its body as it is, so an edit there is no edit of the mutant)."""
    el = "el" if elif_ else ""
    if header and isinstance(node, (cst.If, cst.While)):
        keyword = "if" if isinstance(node, cst.If) else "while"
        return f"{el}{keyword} {_normal(node.test)}:"
    text = _EMPTY.code_for_node(node)
    try:
        if isinstance(node, cst.BaseExpression):
            return el + ast.unparse(ast.parse(f"(\n{text}\n)", mode="eval"))
        if isinstance(node, cst.ExceptHandler):
            (stmt,) = ast.parse(f"try:\n    pass\n{textwrap.dedent(text)}").body
            (handler,) = cast(ast.Try, stmt).handlers
            return ast.unparse(handler)
        if isinstance(node, cst.CompIf):
            comp = ast.parse(f"[_ for _ in _ {text}]", mode="eval").body
            ((test,),) = (g.ifs for g in cast(ast.ListComp, comp).generators)
            return "if " + ast.unparse(test)
        return el + ast.unparse(ast.parse(textwrap.dedent(text)))
    # every node an operator mutates prints as code Python parses: a safety net, never taken
    except (SyntaxError, ValueError, IndexError):  # pragma: fak-equivalent: never taken
        return el + " ".join(text.split())  # pragma: fak-equivalent: never reached


_PRAGMA = re.compile(r"#\s*pragma:\s*fak-")
_PRAGMA_FORM = re.compile(r"fak-equivalent(?:\[(?P<ops>[^\]]*)\])?\s*(?::\s*(?P<reason>.*?))?\s*$")
_PRAGMA_HOWTO = (
    "write `# pragma: fak-equivalent: <why no input tells the mutant from the code>` "
    "(every operator on the line) or `# pragma: fak-equivalent[<operator>,...]: <why>`"
)


def _pragmas(
    symbol: str, source: str, first: int
) -> tuple[dict[int, tuple[frozenset[str] | None, str]], list[str]]:
    """The ``# pragma: fak-equivalent`` comments of ``source`` by its line (1-based):
    ``(operators or None for all, reason)``, and the problems of those that are not
    well-formed (``first`` is the file line of ``source``'s first line)."""
    out: dict[int, tuple[frozenset[str] | None, str]] = {}
    problems: list[str] = []
    try:
        comments = [
            (t.start[0], t.string)
            for t in tokenize.generate_tokens(io.StringIO(source).readline)
            if t.type == tokenize.COMMENT
        ]
    except (tokenize.TokenError, SyntaxError):  # pragma: no cover - libcst parsed it
        return out, problems
    for line, comment in comments:
        found = _PRAGMA.search(comment)
        if found is None:
            continue
        where = f"{symbol}, line {first + line - 1}"
        m = _PRAGMA_FORM.match(comment, found.end() - len("fak-"))
        if m is None:
            problems.append(f"{where}: `{comment.strip()}` is not a waiver: {_PRAGMA_HOWTO}")
            continue
        reason = (m.group("reason") or "").strip()
        if not reason:
            problems.append(
                f"{where}: its `# pragma: fak-equivalent` gives no reason: {_PRAGMA_HOWTO}"
            )
            continue
        ops: frozenset[str] | None = None
        if m.group("ops") is not None:
            ops = frozenset(o.strip() for o in m.group("ops").split(",") if o.strip())
            unknown = sorted(ops - set(OPERATORS))
            if unknown or not ops:
                problems.append(
                    f"{where}: its `# pragma: fak-equivalent[...]` names "
                    + (f"unknown operator(s) {', '.join(unknown)}" if unknown else "no operator")
                    + f"; the operators are {', '.join(OPERATORS)}"
                )
                continue
        out[line] = (ops, reason)
    return out, problems
