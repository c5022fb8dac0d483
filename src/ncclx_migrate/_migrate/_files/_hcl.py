"""HCL job files (Nomad ``.nomad``/``.hcl``, Terraform ``.tf``), read with tree-sitter-hcl:
the environment a job or resource sets, and the argv lists its tasks run.

Read as environments: a Nomad task's ``env { NAME = "v" }`` block; ``env = { NAME = "v" }`` and
``environment = {...}`` maps; ``variables = {...}`` inside an ``environment`` block (AWS
Lambda); Terraform's Kubernetes ``env { name = "NAME" value = "v" }`` blocks.  Argv lists
(``args = ["--backend", "nccl-legacy"]``) get the shell kind's flag analysis, word by word.
A value with ``${...}`` (interpolation) or an escape is computed.  Each of these sets the
variable outright, so fixes are unsafe; a fix adds or removes only a whole line that holds
nothing else.  Comments: ``#``, ``//`` and ``/* */``.
"""

from __future__ import annotations

from collections.abc import Iterator

from ._checks import Collector, EnvAssign
from ._grammar import Node, Offsets, parse
from ._shell import Ctx, Word, analyze_words
from ._text import Edit, LineIndex, newline_of

__all__ = ["scan_hcl"]

_MAPS = ("env", "environment")


def scan_hcl(text: str, sink: Collector) -> None:
    root, offsets = parse("tree_sitter_hcl", text)
    scan = _Scan(text, offsets, sink)
    argv = Ctx(text, sink, lines_ok=False, env_fixes=False, quotable=False, refs="")
    for node in _walk(root):
        if node.type == "block":
            name = _ident(node)
            body = _child(node, "body")
            if body is None:
                continue
            attrs = {_ident(a): a for a in body.children if a.type == "attribute"}
            if name == "env" and set(attrs) >= {"name", "value"}:  # Kubernetes' env { name value }
                scan.named(node, attrs["name"], attrs["value"])
            elif name == "env":
                for attr in attrs.values():
                    scan.attribute(attr)
            elif name == "environment" and "variables" in attrs:
                scan.object(attrs["variables"])
        elif node.type == "attribute" and _ident(node) in _MAPS:
            scan.object(node)
        elif node.type == "attribute" and _ident(node) in ("args", "command", "entrypoint"):
            words = [w for w in (_word(text, offsets, e) for e in _tuple_items(node)) if w is not None]
            if words:
                analyze_words(argv, words, directive=True)


def _walk(root: Node) -> Iterator[Node]:
    stack = [root]
    while stack:
        n = stack.pop()
        yield n
        stack.extend(reversed(n.children))


def _child(node: Node, kind: str) -> Node | None:
    return next((c for c in node.children if c.type == kind), None)


def _ident(node: Node) -> str:
    first = node.children[0] if node.children else None
    return (first.text or b"").decode() if first is not None and first.type == "identifier" else ""


def _string(text: str, offsets: Offsets, expr: Node | None) -> tuple[int, int, str | None] | None:
    """(start, end, value) of a literal's text (a string's between its quotes); value None when
    it is computed.  None: not a literal at all."""
    while expr is not None and expr.type in ("expression", "literal_value"):
        expr = expr.children[0] if expr.children else None
    if expr is None:
        return None
    start, end = offsets.char(expr.start_byte), offsets.char(expr.end_byte)
    if expr.type in ("numeric_lit", "bool_lit"):
        return start, end, text[start:end]
    if expr.type == "string_lit":
        body = text[start + 1:end - 1]
        return start + 1, end - 1, None if "\\" in body else body
    if expr.type == "template_expr":
        return start, end, None
    return None


def _tuple_items(attr: Node) -> list[Node]:
    tup = attr.children[-1] if attr.children else None
    while tup is not None and tup.type in ("expression", "collection_value"):
        tup = tup.children[0] if tup.children else None
    return [c for c in tup.children if c.type == "expression"] if tup is not None and tup.type == "tuple" else []


def _word(text: str, offsets: Offsets, expr: Node) -> Word | None:
    found = _string(text, offsets, expr)
    if found is None:
        return None
    start, end, value = found
    return Word(start, end, text[start:end], value)


class _Scan:
    def __init__(self, text: str, offsets: Offsets, sink: Collector) -> None:
        self.text, self.offsets, self.sink = text, offsets, sink
        self.index = LineIndex(text)
        self.nl = newline_of(text)

    def attribute(self, attr: Node) -> None:
        """``NAME = value`` in an ``env`` block."""
        key = attr.children[0]
        self._emit(key, attr.children[-1], attr)

    def object(self, attr: Node) -> None:
        """``env = { NAME = "v", "OTHER" = 1 }``."""
        obj = attr.children[-1] if attr.children else None
        while obj is not None and obj.type in ("expression", "collection_value"):
            obj = obj.children[0] if obj.children else None
        if obj is None or obj.type != "object":
            return
        for elem in obj.children:
            if elem.type == "object_elem" and len(elem.children) >= 3:
                key = elem.children[0]
                while key.type in ("expression", "variable_expr", "literal_value") and key.children:
                    key = key.children[0]
                self._emit(key, elem.children[-1], elem)

    def named(self, block: Node, name_attr: Node, value_attr: Node) -> None:
        """``env { name = "NAME" value = "v" }``: the name's string is where the name is; an
        ignore comment on any line of the block counts."""
        first = self.index.line_of(self.offsets.char(block.start_byte))
        last = self.index.line_of(self.offsets.char(block.end_byte))
        self._emit(name_attr.children[-1], value_attr.children[-1], None, tuple(range(first, last + 1)))

    def _emit(self, key: Node, value_expr: Node, whole: Node | None, also: tuple[int, ...] = ()) -> None:
        text = self.text
        if key.type == "identifier":
            name_start, name_end = self.offsets.char(key.start_byte), self.offsets.char(key.end_byte)
        else:
            found = _string(text, self.offsets, key)
            if found is None or found[2] is None:
                return
            name_start, name_end = found[0], found[1]
        name = text[name_start:name_end]
        value = _string(text, self.offsets, value_expr)
        if value is None:
            v_start = self.offsets.char(value_expr.start_byte)
            v_end, literal = self.offsets.char(value_expr.end_byte), None
        else:
            v_start, v_end, literal = value
        line = self.index.line_of(name_start)
        ls, _, full = self.index.bounds(line)
        alone = (whole is not None and self.index.line_of(self.offsets.char(whole.end_byte)) == line
                 and not text[ls:self.offsets.char(whole.start_byte)].strip()
                 and not text[self.offsets.char(whole.end_byte):full].strip(" \t\r\n,"))

        def add(new: str) -> list[Edit] | None:
            if not alone:
                return None
            row = text[ls:full].rstrip("\r\n")
            row = row[:name_start - ls] + new + row[name_end - ls:]
            if full == len(text) and not text.endswith("\n"):
                return [Edit(full, full, self.nl + row)]
            return [Edit(full, full, row + self.nl)]

        def remove() -> list[Edit] | None:
            return [Edit(ls, full, "")] if alone else None

        self.sink.env(EnvAssign(name, name_start, literal, text[v_start:v_end], v_start, add=add, remove=remove,
                                also_lines=also))
