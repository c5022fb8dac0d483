"""A line that a fix lengthens, wrapped as black wraps it.

A fix rewrites part of one statement's expression on one line (``== "nccl"`` becomes
``in ("nccl", "nccl2", ...)``, ``except ValueError`` becomes ``except (ValueError,
RuntimeError)``).  When the line then outgrows the project's line length, the layout edit
here gives the statement the shape black gives it, in black's order of preference:

1. the literal the line ends in is split, one item per line (black's right-hand split,
   taken when the expression has at most one operator of its loosest kind and the line up
   to the literal's opening bracket fits): ``if x in (`` ... ``):  # comment``;
2. else, in ``if``/``elif``/``while``/``return``/``x = ...``, the expression goes between
   parentheses, on one line if it fits there, else one ``and``/``or`` operand per line
   with the operator leading (a conditional expression: its value, ``if ...`` and
   ``else ...`` on a line each), and an operand that is still too long split before its
   comparison operator.

Anything else (an expression that already spans lines or has its own parentheses, code
after it on the line, a piece that is still too long after these splits) is left on one
line rather than laid out in a way black would not.  tests/migrate/test_wrap_black.py
runs black over every layout made here.
"""

from __future__ import annotations

import re

import libcst as cst

from ._ctx import Analyzer, Edit
from ._edits import Lit, line_break

__all__ = ["statement_expr", "wrap_assigned", "wrap_edit"]

# Statement -> the attribute holding its expression.
_SLOTS: dict[type[cst.CSTNode], str] = {
    cst.If: "test", cst.While: "test", cst.Return: "value", cst.Assign: "value",
    cst.ExceptHandler: "type", cst.Expr: "value", cst.AnnAssign: "value", cst.AugAssign: "value",
    cst.Assert: "test",
}
# Where black puts an expression between (invisible) parentheses it may make visible.
_PARENS_OK = (cst.If, cst.While, cst.Return, cst.Assign)
# What may follow the expression on its line: ":", " as name:", an assert's message without
# brackets (black's split would open a bracket in it), a comment.
_TAIL = re.compile(r"""^(?:\s+as\s+\w+)?:?(?:,\s*[rRbBuU]?(?:"[^"\\()\[\]{}]*"|'[^'\\()\[\]{}]*'))?\s*(?:#.*)?$""")


def statement_expr(a: Analyzer, node: cst.CSTNode) -> tuple[cst.BaseExpression, cst.CSTNode] | None:
    """(the whole expression of the statement that holds ``node``, that statement), for a
    ``node`` on the walk's stack; None where ``node`` is not inside such an expression."""
    stack = a.stack
    at = next((i for i in range(len(stack) - 1, -1, -1) if stack[i] is node), None)
    if at is None:
        return None
    for i in range(at, 0, -1):
        parent = stack[i - 1]
        slot = _SLOTS.get(type(parent))
        if slot is not None:
            expr = stack[i]
            return (expr, parent) if getattr(parent, slot) is expr and isinstance(expr, cst.BaseExpression) else None
        if isinstance(parent, (cst.BaseSuite, cst.BaseStatement, cst.BaseSmallStatement, cst.Lambda)):
            return None
    return None


def wrap_edit(a: Analyzer, where: tuple[cst.BaseExpression, cst.CSTNode] | None) -> list[tuple[cst.CSTNode, Edit]]:
    """The layout edit for the statement expression ``where`` (see the module doc); it runs
    after the fixes inside the expression, on the expression they produced."""
    if where is None:
        return []
    expr, statement = where
    rng = a.pos(expr)
    lpar, rpar = getattr(expr, "lpar", ()), getattr(expr, "rpar", ())
    if rng.start.line != rng.end.line or (lpar and not isinstance(expr, cst.Tuple)):
        return []
    line = a.line(rng.start.line)
    # positions leave out a node's own parentheses (a tuple's included)
    left, right = sum(len(a.code(p)) for p in lpar), sum(len(a.code(p)) for p in rpar)
    prefix, suffix = line[: rng.start.column - left], line[rng.end.column + right:]
    if not _TAIL.match(suffix):
        return []
    indent = line[: len(line) - len(line.lstrip())]
    limit = a.line_length()
    parens = isinstance(statement, _PARENS_OK)

    def edit(updated: cst.BaseExpression) -> cst.BaseExpression:
        if "\n" in _code(updated):  # another fix in this expression laid it out already
            return updated
        return _lay_out(updated, prefix, suffix, indent, limit, parens)

    return [(expr, edit)]


def _code(node: cst.CSTNode) -> str:
    return cst.Module([]).code_for_node(node)


def _fits(prefix: str, node: cst.CSTNode, suffix: str, limit: int) -> bool:
    return all(len(x) <= limit for x in (prefix + _code(node) + suffix).split("\n"))


def _lay_out(u: cst.BaseExpression, prefix: str, suffix: str, indent: str, limit: int,
             parens: bool) -> cst.BaseExpression:
    if _fits(prefix, u, suffix, limit):
        return u
    lit = _tail_literal(u)
    if lit is not None:
        head = len(prefix) + len(_code(u)) - len(_code(lit)) + 1  # up to the opening bracket
        split = u.deep_replace(lit, _explode_literal(lit, indent))
        if head <= limit and isinstance(split, cst.BaseExpression) and _fits(prefix, split, suffix, limit):
            return split
    if parens and isinstance(u, (cst.BooleanOperation, cst.IfExp)):
        wrapped = _parenthesize(u, indent, limit)
        if wrapped is not None and _fits(prefix, wrapped, suffix, limit):
            return wrapped
    return u


def _tail_literal(e: cst.BaseExpression) -> Lit | None:
    """The literal black's right-hand split would open: the one ``e`` ends in, where ``e``
    has at most one operator of its loosest kind (else black adds parentheses instead)."""
    if getattr(e, "lpar", None) and not isinstance(e, cst.Tuple):
        return None
    if isinstance(e, (cst.Tuple, cst.List, cst.Set)):
        if not e.elements or (isinstance(e, cst.Tuple) and not e.lpar) or len(getattr(e, "lpar", ())) > 1:
            return None
        return e
    if isinstance(e, cst.Comparison) and len(e.comparisons) == 1:
        return _tail_literal(e.comparisons[0].comparator)
    if isinstance(e, cst.UnaryOperation) and isinstance(e.operator, cst.Not):
        return _tail_literal(e.expression)
    if isinstance(e, cst.BooleanOperation) and len(_chain(e)) == 2:
        return _tail_literal(e.right)
    return None


def _explode_literal(lit: Lit, indent: str) -> Lit:
    """``lit`` one item per line (indented under a line that starts with ``indent``), with a
    trailing comma and its closing bracket under that line's start: black's split."""
    down, close = line_break(indent + "    "), line_break(indent)
    items = [e.with_changes(comma=cst.Comma(whitespace_after=down)) for e in lit.elements]
    items[-1] = items[-1].with_changes(comma=cst.Comma(whitespace_after=close))
    if isinstance(lit, cst.Tuple):
        return lit.with_changes(elements=items, lpar=[lit.lpar[0].with_changes(whitespace_after=down)])
    if isinstance(lit, cst.List):
        return lit.with_changes(elements=items, lbracket=lit.lbracket.with_changes(whitespace_after=down))
    return lit.with_changes(elements=items, lbrace=lit.lbrace.with_changes(whitespace_after=down))


def _chain(e: cst.BaseExpression, lead: str = "") -> list[tuple[str, cst.BaseExpression]]:
    """(what leads its line: "", "and ", "or ", "if " or "else ", operand) for the operands of
    ``e``: a conditional expression's value, test and alternative, or a boolean chain's operands."""
    if isinstance(e, cst.IfExp) and not e.lpar and not lead:
        return [("", e.body), ("if ", e.test), ("else ", e.orelse)]
    if isinstance(e, cst.BooleanOperation) and not e.lpar:
        op = "and " if isinstance(e.operator, cst.And) else "or "
        return [*_chain(e.left, lead), *_chain(e.right, op)]
    return [(lead, e)]


def _parenthesize(u: cst.BooleanOperation | cst.IfExp, indent: str, limit: int) -> cst.BaseExpression | None:
    """``u`` between parentheses on lines of its own: on one line if it fits, else one
    operand per line, the operator leading; None where a line would still be too long."""
    inner = indent + "    "
    body: cst.BaseExpression = u
    if len(inner) + len(_code(u)) > limit:
        body = _split_ops(u, line_break(inner))
        for lead, operand in _chain(u):
            if len(inner) + len(lead) + len(_code(operand)) <= limit:
                continue
            if not (isinstance(operand, cst.Comparison) and len(operand.comparisons) == 1 and not operand.lpar):
                return None
            target = operand.comparisons[0]
            split = operand.with_changes(comparisons=[target.with_changes(
                operator=target.operator.with_changes(whitespace_before=line_break(inner)))])
            replaced = body.deep_replace(operand, split)
            if not isinstance(replaced, cst.BaseExpression):
                return None
            body = replaced
    return body.with_changes(lpar=[cst.LeftParen(whitespace_after=line_break(inner))],
                             rpar=[cst.RightParen(whitespace_before=line_break(indent))])


def _split_ops(e: cst.BaseExpression, down: cst.ParenthesizedWhitespace) -> cst.BaseExpression:
    if isinstance(e, cst.IfExp) and not e.lpar:
        return e.with_changes(whitespace_before_if=down, whitespace_before_else=down)
    if isinstance(e, cst.BooleanOperation) and not e.lpar:
        return e.with_changes(left=_split_ops(e.left, down), right=_split_ops(e.right, down),
                              operator=e.operator.with_changes(whitespace_before=down))
    return e


def wrap_assigned(a: Analyzer, original: cst.Assign, updated: cst.Assign) -> cst.Assign:
    """``updated`` (``original`` with a target added: ``a = b = value``) as black lays it out when
    its first line outgrows the length: where the targets alone do not fit, inside the last
    target's brackets; else the value's call split at its bracket when the line up to it fits,
    else the value between parentheses on a line of its own.  A value with a comment, or
    that does not fit either way, is left as it is."""
    rng = a.pos(original)
    line = a.line(rng.start.line)
    indent = line[: len(line) - len(line.lstrip())]
    limit = a.line_length()
    value = updated.value
    head = indent + "".join(_code(t) for t in updated.targets)
    code = _code(value)
    if "#" in code or len(head + code.split("\n", 1)[0]) <= limit:
        return updated
    if len(head) + 2 > limit:  # black: the targets and "(" do not fit; split the last target
        return _split_last_target(updated, indent, limit)
    flat = value
    if "\n" in code:  # a call already split at its bracket: its arguments on one line again
        if not (isinstance(value, cst.Call) and all("\n" not in _code(arg.value) for arg in value.args)):
            return updated
        args = [arg.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")) if i < len(value.args) - 1
                                 else cst.MaybeSentinel.DEFAULT, whitespace_after_arg=cst.SimpleWhitespace(""))
                for i, arg in enumerate(value.args)]
        flat = value.with_changes(args=args, whitespace_before_args=cst.SimpleWhitespace(""))
    if isinstance(flat, cst.Call) and flat.args and len(head) + len(_code(flat.func)) + 1 <= limit:
        split = _split_args(flat, indent, limit)
        if split is not None:
            return updated.with_changes(value=split)
    if len(indent) + 4 + len(_code(flat)) <= limit and not getattr(flat, "lpar", ()):
        return updated.with_changes(value=flat.with_changes(
            lpar=[cst.LeftParen(whitespace_after=line_break(indent + "    "))],
            rpar=[cst.RightParen(whitespace_before=line_break(indent))]))
    return updated


def _split_last_target(updated: cst.Assign, indent: str, limit: int) -> cst.Assign:
    """``a = x[``, ``"KEY"``, ``] = value`` on three lines: black's split of a chained
    assignment whose targets outgrow the line, inside the last target's brackets (where each
    of the three lines fits; otherwise the statement is left as it is)."""
    sub = updated.targets[-1].target
    value = _code(updated.value)
    if not (isinstance(sub, cst.Subscript) and len(sub.slice) == 1) or "\n" in value:
        return updated
    first = indent + "".join(_code(t) for t in updated.targets[:-1]) + _code(sub.value) + "["
    key = indent + "    " + _code(sub.slice[0])
    tail = indent + "] = " + value
    if max(len(first), len(key), len(tail)) > limit:
        return updated
    split = sub.with_changes(lbracket=cst.LeftSquareBracket(whitespace_after=line_break(indent + "    ")),
                             rbracket=cst.RightSquareBracket(whitespace_before=line_break(indent)))
    return updated.with_changes(targets=[*updated.targets[:-1], updated.targets[-1].with_changes(target=split)])


def _split_args(call: cst.Call, indent: str, limit: int) -> cst.Call | None:
    """``call``'s arguments on the line after its bracket (black's right-hand split), if they fit."""
    inner = indent + "    "
    body = ", ".join(_code(arg.with_changes(comma=cst.MaybeSentinel.DEFAULT)) for arg in call.args)
    if len(inner) + len(body) > limit:
        return None
    args = list(call.args)
    args[-1] = args[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT, whitespace_after_arg=line_break(indent))
    return call.with_changes(args=args, whitespace_before_args=line_break(inner))
