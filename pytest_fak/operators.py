"""The standard mutation operators, as rewrites of one node of a function's syntax tree.

Each operator proposes, for one libcst node of an anchor's body, the node that a
plausible one-token bug would put there. The set follows the classic catalogues
(mutmut, cosmic-ray, MuJava): comparison, arithmetic and boolean operators; constants
off by one; removed statements; ``return`` of the default value; ``break``/``continue``
swapped; negated conditions; swapped branches; ``except`` blocks that swallow. The
signature, decorators and docstring are never mutated, and neither are string
constants in ``raise`` statements or f-strings (error messages: mutating them only
makes equivalent mutants).

:func:`sites` walks a parsed function and yields ``(operator, original node,
replacement node)``; :mod:`pytest_fak.generated` turns each into a mutant.
"""

from __future__ import annotations

from typing import Any

import libcst as cst

__all__ = ["OPERATORS", "sites"]

#: operator name → what it does (the report's legend)
OPERATORS: dict[str, str] = {
    "compare-boundary": "a comparison moves its boundary (< ↔ <=, > ↔ >=)",
    "compare-negate": "a comparison is negated (== ↔ !=, < ↔ >=, in ↔ not in, is ↔ is not)",
    "arith": "an arithmetic or bitwise operator is replaced (+ ↔ -, * ↔ /, & ↔ |, …)",
    "boolean": "and ↔ or, a `not` is dropped, True ↔ False",
    "constant": "an integer constant is off by one (n → n+1, n → n-1), a string emptied",
    "remove-statement": "a call, augmented assignment, attribute/item store, raise, "
    "assert or del is removed",
    "return-value": "a `return x` returns None instead",
    "break-continue": "break ↔ continue",
    "negate-condition": "the condition of an if/elif (without else), while or "
    "comprehension filter is negated",
    "swap-branches": "the two branches of an if/else or a conditional expression are swapped",
    "swallow-except": "an except block's body is replaced by `pass`",
}

_CMP_BOUNDARY: dict[type[cst.BaseCompOp], type[cst.BaseCompOp]] = {
    cst.LessThan: cst.LessThanEqual,
    cst.LessThanEqual: cst.LessThan,
    cst.GreaterThan: cst.GreaterThanEqual,
    cst.GreaterThanEqual: cst.GreaterThan,
}
_CMP_NEGATE: dict[type[cst.BaseCompOp], type[cst.BaseCompOp]] = {
    cst.LessThan: cst.GreaterThanEqual,
    cst.LessThanEqual: cst.GreaterThan,
    cst.GreaterThan: cst.LessThanEqual,
    cst.GreaterThanEqual: cst.LessThan,
    cst.Equal: cst.NotEqual,
    cst.NotEqual: cst.Equal,
    cst.Is: cst.IsNot,
    cst.IsNot: cst.Is,
    cst.In: cst.NotIn,
    cst.NotIn: cst.In,
}
_ARITH: dict[type[Any], type[Any]] = {
    cst.Add: cst.Subtract,
    cst.Subtract: cst.Add,
    cst.Multiply: cst.Divide,
    cst.Divide: cst.Multiply,
    cst.FloorDivide: cst.Multiply,
    cst.Modulo: cst.FloorDivide,
    cst.Power: cst.Multiply,
    cst.BitAnd: cst.BitOr,
    cst.BitOr: cst.BitAnd,
    cst.BitXor: cst.BitAnd,
    cst.LeftShift: cst.RightShift,
    cst.RightShift: cst.LeftShift,
    cst.AddAssign: cst.SubtractAssign,
    cst.SubtractAssign: cst.AddAssign,
    cst.MultiplyAssign: cst.DivideAssign,
    cst.DivideAssign: cst.MultiplyAssign,
    cst.FloorDivideAssign: cst.MultiplyAssign,
    cst.ModuloAssign: cst.FloorDivideAssign,
    cst.BitAndAssign: cst.BitOrAssign,
    cst.BitOrAssign: cst.BitAndAssign,
    cst.BitXorAssign: cst.BitAndAssign,
    cst.LeftShiftAssign: cst.RightShiftAssign,
    cst.RightShiftAssign: cst.LeftShiftAssign,
}

#: (operator, node, replacement, the statement the node is in)
Site = tuple[str, cst.CSTNode, cst.CSTNode, cst.CSTNode]


def _same_ws(old: Any, new_type: type[Any]) -> Any:
    """``new_type`` with the whitespace of ``old`` (operators carry their spacing)."""
    kw = {k: getattr(old, k) for k in ("whitespace_before", "whitespace_after") if hasattr(old, k)}
    if new_type in (cst.IsNot, cst.NotIn) and "whitespace_between" not in kw:
        kw["whitespace_between"] = cst.SimpleWhitespace(" ")
    return new_type(**kw)


def _not(expr: cst.BaseExpression) -> cst.BaseExpression:
    return cst.UnaryOperation(
        operator=cst.Not(),
        expression=expr.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
        if not isinstance(expr, (cst.Name, cst.Attribute, cst.Call, cst.Subscript))
        else expr,
    )


_PASS = cst.SimpleStatementLine(body=[cst.Pass()])


def _is_docstring(stmt: cst.BaseStatement | cst.BaseSmallStatement) -> bool:
    return (
        isinstance(stmt, cst.SimpleStatementLine)
        and len(stmt.body) == 1
        and isinstance(stmt.body[0], cst.Expr)
        and isinstance(stmt.body[0].value, (cst.SimpleString, cst.ConcatenatedString))
    )


def _removable(small: cst.BaseSmallStatement) -> bool:
    if isinstance(small, cst.Expr):
        return not isinstance(small.value, (cst.SimpleString, cst.ConcatenatedString, cst.Ellipsis))
    if isinstance(small, (cst.AugAssign, cst.Raise, cst.Assert, cst.Del)):
        return True
    if isinstance(small, cst.Assign):
        return all(isinstance(t.target, (cst.Attribute, cst.Subscript)) for t in small.targets)
    return False


class _Collector(cst.CSTVisitor):
    def __init__(self) -> None:
        self.found: list[Site] = []
        self.elifs: set[int] = set()  # ids of If nodes printed as `elif`
        self._quiet = 0  # inside a raise statement, an f-string or an annotation
        self._stmts: list[cst.CSTNode] = []

    def on_visit(self, node: cst.CSTNode) -> bool:
        if isinstance(node, (cst.SimpleStatementLine, cst.BaseCompoundStatement)):
            self._stmts.append(node)
        return super().on_visit(node)

    def on_leave(self, original_node: cst.CSTNode) -> None:
        super().on_leave(original_node)
        if self._stmts and self._stmts[-1] is original_node:
            self._stmts.pop()

    def _add(self, op: str, old: cst.CSTNode, new: cst.CSTNode) -> None:
        self.found.append((op, old, new, self._stmts[-1] if self._stmts else old))

    # ----- regions whose strings are messages or types, not behaviour
    def visit_Raise(self, node: cst.Raise) -> None:
        self._quiet += 1

    def leave_Raise(self, original_node: cst.Raise) -> None:
        self._quiet -= 1

    def visit_FormattedString(self, node: cst.FormattedString) -> None:
        self._quiet += 1

    def leave_FormattedString(self, original_node: cst.FormattedString) -> None:
        self._quiet -= 1

    def visit_Annotation(self, node: cst.Annotation) -> bool:
        return False

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        # A nested def: mutate its body only (never its signature or decorators).
        node.body.visit(self)
        return False

    def visit_Lambda(self, node: cst.Lambda) -> bool:
        node.body.visit(self)
        return False

    # ----- expressions
    def visit_Comparison(self, node: cst.Comparison) -> None:
        for i, target in enumerate(node.comparisons):
            for op, table in (("compare-boundary", _CMP_BOUNDARY), ("compare-negate", _CMP_NEGATE)):
                new_op = table.get(type(target.operator))
                if new_op is None:
                    continue
                comps = list(node.comparisons)
                comps[i] = target.with_changes(operator=_same_ws(target.operator, new_op))
                self._add(op, node, node.with_changes(comparisons=comps))

    def visit_BinaryOperation(self, node: cst.BinaryOperation) -> None:
        new_op = _ARITH.get(type(node.operator))
        if new_op is not None:
            self._add("arith", node, node.with_changes(operator=_same_ws(node.operator, new_op)))

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        new_op = _ARITH.get(type(node.operator))
        if new_op is not None:
            self._add("arith", node, node.with_changes(operator=_same_ws(node.operator, new_op)))

    def visit_UnaryOperation(self, node: cst.UnaryOperation) -> None:
        if isinstance(node.operator, cst.Not):
            self._add("boolean", node, node.expression)
        elif isinstance(node.operator, cst.Minus):
            self._add("arith", node, node.expression)

    def visit_BooleanOperation(self, node: cst.BooleanOperation) -> None:
        new: type[Any] = cst.Or if isinstance(node.operator, cst.And) else cst.And
        self._add("boolean", node, node.with_changes(operator=_same_ws(node.operator, new)))

    def visit_Name(self, node: cst.Name) -> None:
        if node.value in ("True", "False"):
            flipped = "False" if node.value == "True" else "True"
            self._add("boolean", node, node.with_changes(value=flipped))

    def visit_Integer(self, node: cst.Integer) -> None:
        try:
            value = int(node.value.replace("_", ""), 0)
        except ValueError:
            return
        for new in (value + 1, value - 1):
            text = str(new) if new >= 0 else f"({new})"
            self._add("constant", node, cst.parse_expression(text))

    def visit_SimpleString(self, node: cst.SimpleString) -> None:
        if self._quiet:
            return
        prefix = node.prefix.lower()
        if "b" in prefix or "f" in prefix:
            return
        empty = node.evaluated_value == ""
        quote = node.quote
        new = f"{node.prefix}{quote}{'fak-mutant' if empty else ''}{quote}"
        self._add("constant", node, node.with_changes(value=new))

    def visit_IfExp(self, node: cst.IfExp) -> None:
        self._add("swap-branches", node, node.with_changes(body=node.orelse, orelse=node.body))

    def visit_CompIf(self, node: cst.CompIf) -> None:
        self._add("negate-condition", node, node.with_changes(test=_not(node.test)))

    # ----- statements
    def visit_If(self, node: cst.If) -> None:
        if isinstance(node.orelse, cst.If):
            self.elifs.add(id(node.orelse))
        if isinstance(node.orelse, cst.Else):
            swapped = node.with_changes(
                body=node.orelse.body, orelse=node.orelse.with_changes(body=node.body)
            )
            self._add("swap-branches", node, swapped)
        else:
            self._add("negate-condition", node, node.with_changes(test=_not(node.test)))

    def visit_While(self, node: cst.While) -> None:
        self._add("negate-condition", node, node.with_changes(test=_not(node.test)))

    def visit_SimpleStatementLine(self, node: cst.SimpleStatementLine) -> None:
        if _is_docstring(node):
            return
        for i, small in enumerate(node.body):
            if _removable(small):
                body = list(node.body)
                body[i] = cst.Pass()
                self._add("remove-statement", node, node.with_changes(body=body))

    def visit_Expr(self, node: cst.Expr) -> bool:
        # a docstring-like bare string is not behaviour
        return not isinstance(node.value, (cst.SimpleString, cst.ConcatenatedString))

    def visit_Return(self, node: cst.Return) -> None:
        v = node.value
        if v is not None and not (isinstance(v, cst.Name) and v.value == "None"):
            self._add("return-value", node, node.with_changes(value=cst.Name("None")))

    def visit_Break(self, node: cst.Break) -> None:
        self._add("break-continue", node, cst.Continue(semicolon=node.semicolon))

    def visit_Continue(self, node: cst.Continue) -> None:
        self._add("break-continue", node, cst.Break(semicolon=node.semicolon))

    def visit_ExceptHandler(self, node: cst.ExceptHandler) -> None:
        body = node.body
        only_pass = (
            isinstance(body, cst.IndentedBlock)
            and len(body.body) == 1
            and isinstance(body.body[0], cst.SimpleStatementLine)
            and all(isinstance(s, cst.Pass) for s in body.body[0].body)
        )
        if not only_pass and isinstance(body, cst.IndentedBlock):
            swallowed = node.with_changes(body=body.with_changes(body=[_PASS]))
            self._add("swallow-except", node, swallowed)


def sites(fn: cst.FunctionDef) -> tuple[list[Site], set[int]]:
    """Every ``(operator, node, replacement)`` in the body of ``fn`` (not its signature),
    and the ids of the ``if`` nodes that are written as ``elif``."""
    body = fn.body
    c = _Collector()
    if isinstance(body, cst.IndentedBlock):
        stmts = list(body.body)
        if stmts and _is_docstring(stmts[0]):
            stmts = stmts[1:]
        for s in stmts:
            s.visit(c)
    else:
        body.visit(c)
    return c.found, c.elifs
