"""Small functions, one per mutation operator, for the generated-mutant tests."""

from __future__ import annotations


def compare(x: int) -> bool:
    return x < 3


def arith(x: int) -> int:
    return x + 1


def boolean(a: bool, b: bool) -> bool:
    return a and not b


def flag() -> bool:
    return True


def constant() -> str:
    return "deny"


def remove(log: list[int]) -> None:
    log.append(1)


def loop(items: list[int]) -> int:
    total = 0
    for i in items:
        if i < 0:
            break
        total += i
    return total


def branches(x: int) -> str:
    if x:
        return "yes"
    else:
        return "no"


def swallow(x: str) -> int:
    try:
        return int(x)
    except ValueError:
        raise LookupError(x) from None


def spin(n: int) -> int:
    i = 0
    while i < n:
        i += 1
    return i


class Counter:
    """A method with a private (mangled) attribute and a decorator."""

    def __init__(self) -> None:
        self.__n = 0

    @property
    def bumped(self) -> int:
        self.__n += 1
        return self.__n
