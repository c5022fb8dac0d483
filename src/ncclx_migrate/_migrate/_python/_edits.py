"""Small, reusable CST edits.  Each returns (node to change, edit function) pairs."""

from __future__ import annotations

from typing import Any

import libcst as cst

from ._ctx import Edit

__all__ = ["append_kwarg", "remove", "remove_statement", "replace_with", "string_like"]


def _drop(_: Any) -> cst.RemovalSentinel:
    return cst.RemoveFromParent()


def remove(node: cst.CSTNode) -> list[tuple[cst.CSTNode, Edit]]:
    return [(node, _drop)]


def remove_statement(
    small: cst.BaseSmallStatement, line: cst.CSTNode | None
) -> list[tuple[cst.CSTNode, Edit]]:
    """Delete one small statement; the whole line when it is the only one on it."""
    if isinstance(line, cst.SimpleStatementLine) and len(line.body) == 1:
        return [(line, _drop)]
    return [(small, _drop)]


def replace_with(node: cst.CSTNode, new: cst.CSTNode) -> list[tuple[cst.CSTNode, Edit]]:
    return [(node, lambda _u: new)]


def string_like(template: cst.SimpleString, text: str) -> cst.SimpleString:
    """A string literal holding ``text`` in the quote style of ``template``."""
    prefix = template.prefix
    quote = template.quote
    if any(c in text for c in (quote[0], "\\", "\n")):
        return cst.SimpleString(repr(text))
    return cst.SimpleString(f"{prefix}{quote}{text}{quote}")


def append_kwarg(call: cst.Call, name: str, value: cst.BaseExpression) -> list[tuple[cst.CSTNode, Edit]]:
    """Add ``name=value`` as the last argument of ``call``, keeping its comma layout."""

    def edit(updated: cst.Call) -> cst.Call:
        args = list(updated.args)
        new = cst.Arg(
            value=value,
            keyword=cst.Name(name),
            equal=cst.AssignEqual(cst.SimpleWhitespace(""), cst.SimpleWhitespace("")),
        )
        if not args:
            return updated.with_changes(args=[new])
        last = args[-1]
        if isinstance(last.comma, cst.Comma):  # trailing comma: keep the layout
            new = new.with_changes(comma=last.comma)
            sep = args[-2].comma if len(args) > 1 and isinstance(args[-2].comma, cst.Comma) else None
            args[-1] = last.with_changes(comma=sep or cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
        else:
            args[-1] = last.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
        return updated.with_changes(args=[*args, new])

    return [(call, edit)]
