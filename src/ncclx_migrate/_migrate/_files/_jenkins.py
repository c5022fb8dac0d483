"""Jenkinsfiles, read with tree-sitter-groovy: ``environment { NAME = 'value' }`` blocks,
``withEnv(['NAME=value']) { ... }`` lists, and the scripts of ``sh`` steps (``sh 'cmd'``,
``sh '''...'''``, ``sh(script: "...")``), whose commands get the shell kind's analysis.

Every fix here is unsafe: an ``environment`` entry or a ``withEnv`` item overrides what the
agent's environment holds, and Groovy has no form that defers to it that this checks.  A
script is read only where Groovy hands its text to the shell unchanged: no backslash but a
line continuation, no ``$`` in a double-quoted (interpolated) string; fixes inside one add no
quote or ``$`` (``Ctx(quotable=False)``).  Comments: ``//`` and ``/* */``, ``#`` in scripts.
"""

from __future__ import annotations

from ._checks import Collector, EnvAssign
from ._grammar import Node, Offsets, parse
from ._shell import Ctx, continued_lines, scan_shell_range
from ._text import Edit, LineIndex, newline_of

__all__ = ["scan_jenkins"]

_CALLS = frozenset({"method_invocation", "juxt_function_call"})
_STRINGS = frozenset({"string_literal", "character_literal"})


def scan_jenkins(text: str, sink: Collector) -> None:
    root, offsets = parse("tree_sitter_groovy", text)
    continued_lines(text, sink)
    index = LineIndex(text)
    ctx = Ctx(text, sink, quotable=False)
    for call in _all(root, _CALLS):
        name = call.children[0] if call.children else None
        what = name.text if name is not None and name.type == "identifier" else b""
        if what == b"environment":
            block = next((c for c in call.children if c.type == "closure"), None)
            if block is not None:
                _environment(text, index, offsets, block, sink)
        elif what == b"withEnv":
            args = next((c for c in call.children if c.type == "argument_list"), None)
            items = next((c for c in args.children if c.type == "array_literal"), None) if args else None
            if items is not None:
                _with_env(text, offsets, items, sink)
        elif what == b"sh":
            script = _script(call)
            if script is not None:
                bounds = _body(text, offsets, script)
                if bounds is not None:
                    scan_shell_range(ctx, *bounds)


def _all(root: Node, types: frozenset[str]) -> list[Node]:
    """Every node of ``types`` (nested ones too: a ``sh`` step inside ``steps { }``)."""
    out: list[Node] = []
    stack = [root]
    while stack:
        n = stack.pop()
        if n.type in types:
            out.append(n)
        stack.extend(reversed(n.children))
    return out


def _script(call: Node) -> Node | None:
    """The script string of ``sh 'x'`` / ``sh("x")`` / ``sh(script: 'x', ...)``."""
    args = next((c for c in call.children if c.type == "argument_list"), None)
    if args is None:
        return None
    for c in args.children:
        if c.type in _STRINGS:
            return c
        if c.type in ("map_item", "named_argument", "pair") and c.children and c.children[0].text == b"script":
            value = c.children[-1]
            return value if value.type in _STRINGS else None
    return None


def _body(text: str, offsets: Offsets, string: Node) -> tuple[int, int] | None:
    """The text between the quotes where it is what the shell runs; else None."""
    start, end = offsets.char(string.start_byte), offsets.char(string.end_byte)
    raw = text[start:end]
    quote = 3 if raw[:3] in ("'''", '"""') else 1
    if len(raw) < 2 * quote:
        return None
    body = raw[quote:-quote]
    if body.replace("\\\n", "").count("\\") or (raw[0] == '"' and "$" in body):
        return None
    return start + quote, end - quote


def _literal(text: str, offsets: Offsets, node: Node) -> tuple[str | None, int, str]:
    """(value or None when computed, where the raw value starts, the raw value)."""
    start, end = offsets.char(node.start_byte), offsets.char(node.end_byte)
    raw = text[start:end]
    if node.type in _STRINGS and _body(text, offsets, node) is not None:
        quote = 3 if raw[:3] in ("'''", '"""') else 1
        return raw[quote:-quote], start, raw
    if node.type in ("decimal_integer_literal", "number_literal", "integer_literal"):
        return raw, start, raw
    return None, start, raw


def _environment(text: str, index: LineIndex, offsets: Offsets, block: Node, sink: Collector) -> None:
    nl = newline_of(text)
    statements = [c.children[0] for c in block.children if c.type == "expression_statement" and c.children]
    for stmt in statements:
        if stmt.type != "assignment_expression" or len(stmt.children) < 3 or stmt.children[0].type != "identifier":
            continue
        key, value_node = stmt.children[0], stmt.children[-1]
        name_start = offsets.char(key.start_byte)
        name = text[name_start:offsets.char(key.end_byte)]
        value, value_start, raw = _literal(text, offsets, value_node)
        line = index.line_of(name_start)
        ls, _, full = index.bounds(line)
        alone = (index.line_of(offsets.char(stmt.end_byte)) == line and not text[ls:name_start].strip())

        def add(new: str, ls: int = ls, full: int = full, name_start: int = name_start, name: str = name,
                alone: bool = alone) -> list[Edit] | None:
            if not alone:
                return None
            row = text[ls:full].rstrip("\r\n")
            row = row[:name_start - ls] + new + row[name_start - ls + len(name):]
            if full == len(text) and not text.endswith("\n"):
                return [Edit(full, full, nl + row)]
            return [Edit(full, full, row + nl)]

        def remove(ls: int = ls, full: int = full, alone: bool = alone) -> list[Edit] | None:
            return [Edit(ls, full, "")] if alone else None

        sink.env(EnvAssign(name, name_start, value, raw, value_start, add=add, remove=remove))


def _with_env(text: str, offsets: Offsets, items: Node, sink: Collector) -> None:
    strings = [c for c in items.children if c.type in _STRINGS]
    for item in strings:
        bounds = _body(text, offsets, item)
        if bounds is None:
            continue
        start, end = bounds
        body = text[start:end]
        name, eq, raw = body.partition("=")
        if not eq or not name.isidentifier():
            continue
        quote = text[start - 1]
        after = item.next_sibling

        def add(new: str, end: int = end, raw: str = raw, quote: str = quote) -> list[Edit] | None:
            return [Edit(end + 1, end + 1, f", {quote}{new}={raw}{quote}")]

        def remove(item: Node = item, after: Node | None = after) -> list[Edit] | None:
            if len(strings) == 1:
                return None  # an empty withEnv([]) is not ours to leave behind
            s, e = offsets.char(item.start_byte), offsets.char(item.end_byte)
            if after is not None and after.type == ",":
                e = offsets.char(after.end_byte)
                while e < len(text) and text[e] in " \t":
                    e += 1
                return [Edit(s, e, "")]
            before = item.prev_sibling
            if before is not None and before.type == ",":
                return [Edit(offsets.char(before.start_byte), e, "")]
            return None

        sink.env(EnvAssign(name, start, raw, raw, start + len(name) + 1, add=add, remove=remove))
