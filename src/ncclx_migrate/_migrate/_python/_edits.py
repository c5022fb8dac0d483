"""Small, reusable CST edits.  Each returns (node to change, edit function) pairs."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeVar

import libcst as cst

from ._ctx import Analyzer, Edit

__all__ = [
    "Lit", "append_element", "append_kwarg", "blank_head", "extend_literal", "insert_after", "line_break", "remove",
    "remove_statement",
    "replace_with", "split_call", "string_like",
]


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


def append_kwarg(
    a: Analyzer, call: cst.Call, name: str, value: cst.BaseExpression
) -> list[tuple[cst.CSTNode, Edit]]:
    """Add ``name=value`` as the last argument of ``call``, laid out as a careful human would.

    A multi-line call gets it on its own line, indented like its siblings, with the closing
    bracket where it was and a trailing comma where the call uses one (comments stay on
    their lines); in one whose arguments share the line after its bracket (black's layout
    when they fit there) it joins that line, or they go one per line when it outgrows it.
    A one-line call that would outgrow the project's line length is split as black splits
    it: the arguments on one indented line if they fit, else one per line with a trailing
    comma."""
    new = cst.Arg(value=value, keyword=cst.Name(name),
                  equal=cst.AssignEqual(cst.SimpleWhitespace(""), cst.SimpleWhitespace("")))
    return [(call, lambda u: _append(a, call, u, new))]


def append_element(a: Analyzer, d: cst.Dict, key: str, value: cst.BaseExpression) -> list[tuple[cst.CSTNode, Edit]]:
    """Add ``"key": value`` as the last entry of the dict literal ``d`` (layout as for calls)."""
    new = cst.DictElement(cst.SimpleString(f'"{key}"'), value)
    return [(d, lambda u: _append(a, d, u, new))]


_Seq = TypeVar("_Seq", cst.Call, cst.Dict)


def insert_after(a: Analyzer, container: _Seq, item: Any, new: Any,
                 outer: cst.Call | None = None) -> list[tuple[cst.CSTNode, Edit]]:
    """Put ``new`` (an argument or a dict entry) right after ``item`` of ``container``, laid out
    like its siblings: in a literal or call laid out over several lines, on a line of its own
    (a comment after ``item`` stays on ``item``'s line; the bracket keeps its place); on one
    line, after ``item``, the line then split as black splits it when it outgrows the line
    length.  Several inserts into one container each find their item among the ones added.
    ``outer``: the call ``container`` is an argument of; where its arguments share one line,
    black splits that call first (one argument per line), then ``container`` if still too long."""
    index = next(i for i, it in enumerate(_items(container)) if it is item)
    shared = outer is not None and _shares_line(a, outer)
    # the original items after which earlier edits of this container inserted one
    done: list[int] = a.facts.setdefault("inserted", {}).setdefault(id(container), [])
    multi = a.pos(container).start.line != a.pos(container).end.line

    def edit(u: _Seq) -> _Seq:
        items: list[Any] = _items(u)
        k: int = index + sum(1 for j in done if j <= index)
        done.append(index)
        old, is_last = items[k], k == len(items) - 1
        sep = _separator(u)
        added_item = new
        oc = old.comma
        if multi and sep is not None and isinstance(oc, cst.Comma) and isinstance(
                oc.whitespace_after, cst.ParenthesizedWhitespace):
            ws = oc.whitespace_after
            if is_last:  # a trailing comma, then the bracket: the bracket's line break moves down
                old = old.with_changes(comma=oc.with_changes(whitespace_after=ws.with_changes(
                    empty_lines=[], indent=sep.indent, last_line=sep.last_line)))
            added_item = new.with_changes(comma=cst.Comma(whitespace_after=_nl(ws)))
        elif multi and sep is not None and is_last and isinstance(_close_ws(u), cst.ParenthesizedWhitespace):
            old = old.with_changes(comma=cst.Comma(whitespace_after=_nl(sep)))
            if isinstance(old, cst.Arg):  # the bracket's line break moves to the new last one
                added_item = new.with_changes(whitespace_after_arg=old.whitespace_after_arg)
                old = old.with_changes(whitespace_after_arg=cst.SimpleWhitespace(""))
        else:  # on the item's line
            added_item = new.with_changes(comma=oc)
            if isinstance(old, cst.Arg) and is_last:
                added_item = added_item.with_changes(whitespace_after_arg=old.whitespace_after_arg)
                old = old.with_changes(whitespace_after_arg=cst.SimpleWhitespace(""))
            old = old.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
        out = _with_items(u, [*items[:k], old, added_item, *items[k + 1:]])
        if shared:  # the outer call's edit lays it out
            return out
        if not multi:
            return _fit(a, container, out)
        if sep is _open_ws(u) and _body_too_long(a, out, a.pos(_items(container)[0]).start.column):
            # black's f(\n    a, b\n) grown too long: one per line
            return _explode(a, container, out)
        return out

    if outer is None or not shared:
        return [(container, edit)]
    slot = next(i for i, arg in enumerate(outer.args) if arg.value is container)

    def outer_edit(u: cst.Call) -> cst.Call:
        one_line = a.pos(outer).start.line == a.pos(outer).end.line
        if one_line and _fit(a, outer, u) is u:
            return u
        if not one_line and not _body_too_long(a, u, a.pos(outer.args[0]).start.column):
            return u
        split = _explode(a, outer, u)
        args = list(split.args)
        inner = args[slot].value
        line = a.line(a.pos(outer).start.line)
        indent = line[: len(line) - len(line.lstrip())] + "    "
        code = cst.Module([]).code_for_node(args[slot].with_changes(comma=cst.MaybeSentinel.DEFAULT,
                                                                    whitespace_after_arg=cst.SimpleWhitespace("")))
        if (split.whitespace_before_args is not u.whitespace_before_args and isinstance(inner, cst.Dict)
                and "\n" not in code and len(indent) + len(code) + 1 > a.line_length()):
            args[slot] = args[slot].with_changes(value=_split(inner, indent, a.line_length(), magic=False))
        return split.with_changes(args=args)

    return [(container, edit), (outer, outer_edit)]


def _shares_line(a: Analyzer, call: cst.Call) -> bool:
    """Whether ``call``'s arguments are all on one line (its own, or the one after its bracket)."""
    args = call.args
    if len(args) < 2:
        return False
    first, last = a.pos(args[0]), a.pos(args[-1])
    return first.start.line == last.end.line


def _hugged(call: cst.Call) -> bool:
    """Whether ``call``'s arguments share the line after its bracket (a comment may follow
    the last one)."""
    *head, last = call.args
    code = cst.Module([]).code_for_node
    return not any("\n" in code(arg) or "#" in code(arg) for arg in head) and "\n" not in code(
        last.with_changes(comma=cst.MaybeSentinel.DEFAULT, whitespace_after_arg=cst.SimpleWhitespace("")))


def _body_too_long(a: Analyzer, node: cst.Call | cst.Dict, column: int) -> bool:
    """Whether the items of ``node``, all on one line from ``column``, pass the line length."""
    bare = [it.with_changes(comma=cst.MaybeSentinel.DEFAULT) for it in _items(node)]
    texts = [cst.Module([]).code_for_node(
        it.with_changes(whitespace_after_arg=cst.SimpleWhitespace("")) if isinstance(it, cst.Arg) else it)
        for it in bare]
    return not any("\n" in t for t in texts) and column + len(", ".join(texts)) > a.line_length()


def _separator(node: cst.Call | cst.Dict) -> cst.ParenthesizedWhitespace | None:
    """The line break between items of a literal or call laid out over several lines."""
    for it in _items(node)[:-1]:
        if isinstance(it.comma, cst.Comma) and isinstance(it.comma.whitespace_after, cst.ParenthesizedWhitespace):
            return it.comma.whitespace_after
    opener = _open_ws(node)
    return opener if isinstance(opener, cst.ParenthesizedWhitespace) else None


def _open_ws(node: cst.Call | cst.Dict) -> cst.BaseParenthesizableWhitespace:
    return node.whitespace_before_args if isinstance(node, cst.Call) else node.lbrace.whitespace_after


def _items(node: cst.Call | cst.Dict) -> list[Any]:
    return list(node.args if isinstance(node, cst.Call) else node.elements)


def _close_ws(node: cst.Call | cst.Dict) -> cst.BaseParenthesizableWhitespace:
    """The whitespace before the closing bracket (after a trailing comma, if any)."""
    items = _items(node)
    if isinstance(node, cst.Dict):
        return node.rbrace.whitespace_before
    last = items[-1]
    return last.comma.whitespace_after if isinstance(last.comma, cst.Comma) else last.whitespace_after_arg


def _with_close(node: _Seq, items: list[Any], ws: cst.BaseParenthesizableWhitespace) -> _Seq:
    """``node`` holding ``items`` whose closing bracket is preceded by ``ws``."""
    last = items[-1]
    if isinstance(node, cst.Dict):
        return node.with_changes(elements=items, rbrace=node.rbrace.with_changes(whitespace_before=ws))
    if isinstance(last.comma, cst.Comma):
        items[-1] = last.with_changes(comma=last.comma.with_changes(whitespace_after=ws))
    else:
        items[-1] = last.with_changes(whitespace_after_arg=ws)
    return node.with_changes(args=items)


def _nl(template: cst.ParenthesizedWhitespace) -> cst.ParenthesizedWhitespace:
    """A line break to the indentation of ``template``, without its comment or blank lines."""
    return cst.ParenthesizedWhitespace(first_line=cst.TrailingWhitespace(), empty_lines=[],
                                       indent=template.indent, last_line=template.last_line)


def _append(a: Analyzer, original: _Seq, updated: _Seq, new: Any) -> _Seq:
    items = _items(updated)
    sep: cst.ParenthesizedWhitespace | None = None
    for it in items[:-1]:
        if isinstance(it.comma, cst.Comma) and isinstance(it.comma.whitespace_after, cst.ParenthesizedWhitespace):
            sep = it.comma.whitespace_after
    opener = _open_ws(updated)
    if sep is None and isinstance(opener, cst.ParenthesizedWhitespace):
        sep = opener
    if (items and sep is opener and not sep.empty_lines and isinstance(original, cst.Call)
            and isinstance(updated, cst.Call) and _hugged(original)):
        return _append_hugged(a, original, updated, new, sep)
    if items and sep is not None:  # multi-line: the new item on its own line
        close = _close_ws(updated)
        last = items[-1]
        trailing = isinstance(last.comma, cst.Comma)
        if isinstance(close, cst.ParenthesizedWhitespace):
            # The last item's comment stays on its line; the bracket keeps its indentation.
            after_last: cst.BaseParenthesizableWhitespace = close.with_changes(
                empty_lines=[], indent=sep.indent, last_line=sep.last_line)
            new_close: cst.BaseParenthesizableWhitespace = _nl(close)
        else:  # closing bracket right after the last item: it follows the new one
            after_last, new_close = _nl(sep), close
            if _too_long(a, original, new):  # black would split the whole call afresh
                flat = [it.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
                        for it in items] + [new]
                return _explode(a, original, _with_items(updated, flat))
        comma = last.comma if trailing else cst.Comma()
        items[-1] = last.with_changes(comma=comma.with_changes(whitespace_after=after_last))
        if isinstance(last, cst.Arg):
            items[-1] = items[-1].with_changes(whitespace_after_arg=cst.SimpleWhitespace(""))
        items.append(new.with_changes(comma=cst.Comma()) if trailing else new)
        return _with_close(updated, items, new_close)
    # one line: ", name=value" before the bracket, split when the line gets too long
    if items:
        last = items[-1]
        trailing = isinstance(last.comma, cst.Comma)
        if not trailing:
            items[-1] = last.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
            if isinstance(last, cst.Arg):
                items[-1] = items[-1].with_changes(whitespace_after_arg=cst.SimpleWhitespace(""))
        items.append(new.with_changes(comma=last.comma) if trailing else new)
    else:
        items = [new]
    joined = _with_items(updated, items)
    return _fit(a, original, joined)


def _append_hugged(a: Analyzer, original: cst.Call, updated: cst.Call, new: cst.Arg,
                   opener: cst.ParenthesizedWhitespace) -> cst.Call:
    """``new`` added to black's ``f(\n    a, b\n)``: on that line when it fits, else one argument
    per line (as when a trailing comma or a comment ends the line: the comment stays with the
    argument it follows, one after the bracket stays there)."""
    items = list(updated.args)
    close = _close_ws(updated)
    comment = close.first_line if isinstance(close, cst.ParenthesizedWhitespace) else None
    joined = [it.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")),
                              whitespace_after_arg=cst.SimpleWhitespace("")) for it in items]
    out = _with_close(updated, [*joined, new], close)
    magic = isinstance(items[-1].comma, cst.Comma)
    if not (magic or (comment is not None and comment.comment)
            or _body_too_long(a, out, a.pos(original.args[0]).start.column)):
        return out
    out = _explode(a, original, out)
    args = list(out.args)
    kept = args[len(items) - 1]
    if comment is not None and isinstance(kept.comma, cst.Comma) and isinstance(
            kept.comma.whitespace_after, cst.ParenthesizedWhitespace):
        args[len(items) - 1] = kept.with_changes(comma=kept.comma.with_changes(
            whitespace_after=kept.comma.whitespace_after.with_changes(first_line=comment)))
    opened = out.whitespace_before_args
    if isinstance(opened, cst.ParenthesizedWhitespace):
        opened = opened.with_changes(first_line=opener.first_line)
    return out.with_changes(args=args, whitespace_before_args=opened)


def _too_long(a: Analyzer, original: _Seq, new: Any) -> bool:
    """Whether ``new``, put on its own line under the last item of the hanging-indented
    ``original`` (closing bracket after it), passes the line length; False where splitting
    afresh could lose a comment or a multi-line item."""
    items = _items(original)
    code = a.code(original)
    if "#" in code or any("\n" in a.code(it.value) for it in items):
        return False
    rng = a.pos(original)
    suffix = a.line(rng.end.line)[rng.end.column:]
    column = a.pos(items[-1]).start.column
    return column + len(cst.Module([]).code_for_node(new)) + 1 + len(suffix) > a.line_length()


def _with_items(node: _Seq, items: list[Any]) -> _Seq:
    return node.with_changes(args=items) if isinstance(node, cst.Call) else node.with_changes(elements=items)


def _fit(a: Analyzer, original: _Seq, node: _Seq) -> _Seq:
    """``node`` (one line) as black would lay it out where ``original`` stood."""
    rng = a.pos(original)
    if rng.start.line != rng.end.line:
        return node
    line = a.line(rng.start.line)
    prefix, suffix = line[: rng.start.column], line[rng.end.column:]
    code = cst.Module([]).code_for_node(node)
    if len(prefix) + len(code) + len(suffix) <= a.line_length():
        return node
    return _explode(a, original, node)


def _explode(a: Analyzer, original: _Seq, node: _Seq) -> _Seq:
    """``node``'s items split as black splits a call where ``original`` stood (a trailing
    comma in ``original`` keeps them one per line, black's magic trailing comma)."""
    line = a.line(a.pos(original).start.line)
    magic = any(isinstance(it.comma, cst.Comma) for it in _items(original)[-1:])
    return _split(node, line[: len(line) - len(line.lstrip())], a.line_length(), magic)


def split_call(call: cst.Call, indent: str, limit: int) -> cst.Call:
    """A call that is a statement of its own (a line a fix adds, at ``indent``) as black lays
    it out: as it is when it fits, else split as :func:`_split` splits it."""
    if len(indent) + len(cst.Module([]).code_for_node(call)) <= limit or not call.args:
        return call
    return _split(call, indent, limit, magic=False)


def _split(node: _Seq, indent: str, limit: int, magic: bool) -> _Seq:
    """``node``'s items split as black splits a call on a line starting with ``indent``: on
    one indented line if they fit (and ``magic`` is off), else one per line with a trailing
    comma; the closing bracket under the line's start."""
    inner = indent + "    "
    items = _items(node)
    texts = [cst.Module([]).code_for_node(it.with_changes(comma=cst.MaybeSentinel.DEFAULT)) for it in items]
    down, close = line_break(inner), line_break(indent)
    # black keeps a call's arguments on one line when they fit, never a literal's items
    # (linegen.should_split_line: a bracket whose parent is an atom is split at every comma)
    literal = isinstance(node, cst.Dict) and len(items) > 1
    one = len(inner) + len(", ".join(texts)) <= limit and not magic and not literal
    out: list[Any] = []
    for i, it in enumerate(items):
        it = it.with_changes(whitespace_after_arg=cst.SimpleWhitespace("")) if isinstance(it, cst.Arg) else it
        if i < len(items) - 1:
            ws: cst.BaseParenthesizableWhitespace = cst.SimpleWhitespace(" ") if one else down
            out.append(it.with_changes(comma=cst.Comma(whitespace_after=ws)))
        else:
            out.append(it.with_changes(comma=cst.MaybeSentinel.DEFAULT if one else cst.Comma()))
    if isinstance(node, cst.Call):
        return _with_close(node.with_changes(whitespace_before_args=down), out, close)
    return _with_close(node.with_changes(lbrace=node.lbrace.with_changes(whitespace_after=down)), out, close)


def line_break(indent: str) -> cst.ParenthesizedWhitespace:
    """A line break followed by ``indent``."""
    return cst.ParenthesizedWhitespace(first_line=cst.TrailingWhitespace(), empty_lines=[], indent=False,
                                       last_line=cst.SimpleWhitespace(indent))


Lit = cst.Tuple | cst.List | cst.Set  # a literal a fix may extend or split


def extend_literal(lit: Lit, values: list[cst.BaseExpression]) -> Lit:
    """``lit`` with ``values`` appended.  A literal laid out one item per line gets each new
    item on a line of its own, indented like the others, with the closing bracket where it
    was, a trailing comma where the literal has one and comments left on their lines; on
    one line they follow the last item (a layout edit may then wrap the line)."""
    elements = list(lit.elements)
    sep = next((e.comma.whitespace_after for e in elements[:-1] if isinstance(e.comma, cst.Comma)
                and isinstance(e.comma.whitespace_after, cst.ParenthesizedWhitespace)), None)
    opener = _lit_open(lit)
    if sep is None and isinstance(opener, cst.ParenthesizedWhitespace):
        sep = opener
    last = elements[-1]
    trailing = isinstance(last.comma, cst.Comma)
    new = [cst.Element(v) for v in values]
    if sep is None:  # one line
        # a one-element tuple's comma is what makes it a tuple, not a style: it does not follow
        # the new last item, which would leave ``(a, b,)``
        keep = trailing and not (isinstance(lit, cst.Tuple) and len(elements) == 1)
        elements[-1] = last.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
        comma = [cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))] * (len(new) - 1)
        new = [e.with_changes(comma=c) for e, c in zip(new, comma, strict=False)] + [
            new[-1].with_changes(comma=last.comma if keep else cst.MaybeSentinel.DEFAULT)]
        return lit.with_changes(elements=elements + new)
    # The line break before the closing bracket: after the trailing comma in a call-like
    # layout, in the bracket's own whitespace in a tuple (which holds a comment after it).
    ws = last.comma.whitespace_after if isinstance(last.comma, cst.Comma) else None
    in_comma = isinstance(ws, cst.ParenthesizedWhitespace)
    close = ws if in_comma and ws is not None else _lit_close(lit)
    if isinstance(close, cst.ParenthesizedWhitespace):
        # the last item's comment stays on its line; the bracket keeps its indentation
        after_last: cst.BaseParenthesizableWhitespace = close.with_changes(
            empty_lines=[], indent=sep.indent, last_line=sep.last_line)
        end: cst.BaseParenthesizableWhitespace = _nl(close)
    else:  # the closing bracket follows the last item: it follows the new ones
        after_last, end = _nl(sep), close
    elements[-1] = last.with_changes(comma=cst.Comma(whitespace_after=after_last))
    new = [e.with_changes(comma=cst.Comma(whitespace_after=_nl(sep))) for e in new[:-1]] + [new[-1]]
    if trailing:
        new[-1] = new[-1].with_changes(comma=cst.Comma(whitespace_after=end if in_comma else cst.SimpleWhitespace("")))
    out = lit.with_changes(elements=elements + new)
    return out if in_comma else _lit_with_close(out, end)


def _lit_open(lit: Lit) -> cst.BaseParenthesizableWhitespace:
    if isinstance(lit, cst.Tuple):
        return lit.lpar[0].whitespace_after if lit.lpar else cst.SimpleWhitespace("")
    return lit.lbracket.whitespace_after if isinstance(lit, cst.List) else lit.lbrace.whitespace_after


def _lit_close(lit: Lit) -> cst.BaseParenthesizableWhitespace:
    if isinstance(lit, cst.Tuple):
        return lit.rpar[-1].whitespace_before if lit.rpar else cst.SimpleWhitespace("")
    return lit.rbracket.whitespace_before if isinstance(lit, cst.List) else lit.rbrace.whitespace_before


def _lit_with_close(lit: Lit, ws: cst.BaseParenthesizableWhitespace) -> Lit:
    if isinstance(lit, cst.Tuple):
        return lit.with_changes(rpar=[*lit.rpar[:-1], lit.rpar[-1].with_changes(whitespace_before=ws)])
    if isinstance(lit, cst.List):
        return lit.with_changes(rbracket=lit.rbracket.with_changes(whitespace_before=ws))
    return lit.with_changes(rbrace=lit.rbrace.with_changes(whitespace_before=ws))


def blank_head(lines: Sequence[cst.EmptyLine]) -> list[cst.EmptyLine]:
    """The blank lines before the first comment line of a statement's leading lines (the
    comments after them explain the statement alone)."""
    head = []
    for el in lines:
        if el.comment is not None:
            break
        head.append(el)
    return head
