"""Source mutants: a function's code with one or two lines changed, swapped in reversibly.

:func:`edited` takes a module-level function or a method, replaces exact fragments of its
source (each must occur exactly once, so a mutant cannot silently stop matching after the
code is edited), compiles the result in the function's own module namespace and returns a
context manager that swaps the function's ``__code__`` while it is entered. Every caller
sees the mutant, including names imported with ``from module import function`` earlier,
because the function object itself is kept.
"""

from __future__ import annotations
import __future__

import inspect
import textwrap
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

from pytest_fak.generated import swapped_code

__all__ = ["edited"]


def edited(fn: Callable[..., Any], *replacements: tuple[str, str]) -> AbstractContextManager[Any]:
    """A context manager running ``fn`` with each ``(old, new)`` fragment of its source replaced."""
    target: Any = inspect.unwrap(fn)
    source = textwrap.dedent(inspect.getsource(target))
    for old, new in replacements:
        count = source.count(old)
        if count != 1:
            raise AssertionError(
                f"mutant of {target.__qualname__}: {old!r} occurs {count} times, expected once; "
                "update the mutant to the current source"
            )
        source = source.replace(old, new)
    flags = __future__.annotations.compiler_flag
    code = compile(source, f"<mutant of {target.__module__}.{target.__qualname__}>", "exec", flags)
    namespace: dict[str, Any] = dict(target.__globals__)
    exec(code, namespace)
    new_code = namespace[target.__name__].__code__
    if new_code.co_freevars != target.__code__.co_freevars:
        raise AssertionError(f"mutant of {target.__qualname__} changed its free variables")
    return swapped_code(target, new_code)
