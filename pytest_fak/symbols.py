"""Code symbols cited by theorems: ``package.module:Qual.name`` → object, source lines, hash.

A theorem cites code by symbol, never by ``file:line``. This module resolves a symbol
(importing its module), finds the function it names (a method, a function, a property's
getter, a static or class method), the lines of its body that can execute, and a
content hash of its source that ``fak proofs check`` compares to spot stale verdicts.
"""

from __future__ import annotations

import hashlib
import importlib
import inspect
import re
from dataclasses import dataclass
from types import CodeType, FunctionType
from typing import Any

__all__ = [
    "SYMBOL_RE",
    "ResolvedSymbol",
    "SymbolError",
    "function_of",
    "lookup",
    "resolve",
    "source_hash",
]

#: ``dotted.module:Qualified.name`` (both halves are dotted Python identifiers).
SYMBOL_RE = re.compile(r"^[A-Za-z_][\w]*(?:\.[A-Za-z_]\w*)*:[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*$")


class SymbolError(LookupError):
    """A cited symbol does not resolve; the message says which part and what to do."""


@dataclass(frozen=True, slots=True)
class ResolvedSymbol:
    """A resolved anchor: its file, the body lines that can execute, and its source hash."""

    symbol: str
    filename: str
    lines: frozenset[int]
    sha256: str


def _function_of(obj: Any) -> FunctionType | None:
    if isinstance(obj, (staticmethod, classmethod)):
        obj = obj.__func__
    if isinstance(obj, property):
        obj = obj.fget
    obj = inspect.unwrap(obj) if callable(obj) else obj
    return obj if isinstance(obj, FunctionType) else None


def _lookup(symbol: str) -> Any:
    if not SYMBOL_RE.match(symbol):
        raise SymbolError(
            f"{symbol!r} is not a symbol: write it as `package.module:Qualified.name`"
        )
    module_name, _, qualname = symbol.partition(":")
    try:
        obj: Any = importlib.import_module(module_name)
    except ImportError as exc:
        raise SymbolError(
            f"module {module_name!r} of {symbol!r} cannot be imported ({exc}); "
            "fix the module path or install the package"
        ) from None
    seen = module_name
    for part in qualname.split("."):
        # Look in the class dict first so a staticmethod/property is seen undecorated.
        attrs = getattr(obj, "__dict__", {})
        if part in attrs:
            obj = attrs[part]
        elif hasattr(obj, part):
            obj = getattr(obj, part)
        else:
            raise SymbolError(
                f"{seen} has no attribute {part!r} (cited as {symbol!r}); "
                "the code was renamed or moved: update the citation"
            )
        seen = f"{seen}.{part}" if seen != module_name else f"{module_name}:{part}"
    return obj


def function_of(obj: Any) -> FunctionType | None:
    """The plain function behind ``obj`` (a method, static/class method, property), or None."""
    return _function_of(obj)


def lookup(symbol: str) -> Any:
    """The object ``symbol`` names (raises :class:`SymbolError` with what to fix)."""
    return _lookup(symbol)


def _body_lines(code: CodeType) -> set[int]:
    lines = {line for _, _, line in code.co_lines() if line is not None}
    lines.discard(code.co_firstlineno)
    for const in code.co_consts:
        if isinstance(const, CodeType):
            lines |= _body_lines(const)
    return lines


def source_hash(text: str) -> str:
    """SHA-256 of source text with line endings and trailing blanks normalised."""
    norm = "\n".join(line.rstrip() for line in text.replace("\r\n", "\n").split("\n")).strip()
    return hashlib.sha256(norm.encode("utf-8")).hexdigest()


def resolve(symbol: str, *, anchor: bool = True) -> ResolvedSymbol | None:
    """Resolve ``symbol``; for an anchor it must name a function (raises :class:`SymbolError`).

    With ``anchor=False`` any attribute may be cited (a class, a constant) and ``None``
    is returned when it has no function body to measure.
    """
    obj = _lookup(symbol)
    fn = _function_of(obj)
    if fn is None:
        if anchor:
            raise SymbolError(
                f"{symbol!r} is a {type(obj).__name__}, not a function: anchor a method or "
                "function whose body the witnesses must execute"
            )
        return None
    code = fn.__code__
    try:
        text = inspect.getsource(fn)
    except (OSError, TypeError):
        raise SymbolError(f"the source of {symbol!r} is not available") from None
    return ResolvedSymbol(symbol, code.co_filename, frozenset(_body_lines(code)), source_hash(text))
