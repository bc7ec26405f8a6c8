"""A reference function for H1.3: a site of every operator, some written in a layout the
id must see through (parentheses, line breaks, quotes). Its mutant ids are committed in
``harness_reference_ids.txt``: they are a stable format (waivers in every project that
uses the plugin name them), so a change of the id scheme shows here first."""

from __future__ import annotations


def reference(x: int, items: list[int], flag: bool, name: str) -> object:
    total = 0
    if x > 10:
        total = x - 1
    elif (x < -10):  # fmt: skip
        total = -x
    else:
        total = (x
                 + 1)  # fmt: skip
    while total > 100 and not flag:
        total //= 2
        if total == 7:
            break
    for i in items:
        if i % 3 == 0:
            continue
        total += i
    evens = [i for i in items if (i % 2) == 0]  # fmt: skip
    label = 'big' if total >= 50 else "small"  # fmt: skip
    try:
        ratio = total / (len(items) - 1)
    except (ZeroDivisionError):  # fmt: skip
        ratio = 0.0
    if flag or name == "":
        return (label, ratio, evens)
    return -total
