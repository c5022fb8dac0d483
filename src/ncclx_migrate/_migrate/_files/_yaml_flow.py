"""YAML flow collections (``[a, "b"]``, ``{k: v}``, on one line or across lines), read with
tree-sitter-yaml: each item's or pair's exact span, quote style and literal value.

Helm and Jinja templates (``{{ ... }}``, ``{% ... %}``) are masked before the parse (the
same number of characters, so offsets hold): a ``{{`` is never read as a flow mapping, and a
scalar holding a template has no literal value (it is computed)."""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass

from ._grammar import Node, Offsets, parse

__all__ = ["Flows", "Item"]

_TEMPLATE = re.compile(r"\{\{.*?\}\}|\{%.*?%\}", re.DOTALL)
_FLOW = frozenset({"flow_sequence", "flow_mapping"})
_QUOTES = {"double_quote_scalar": "double", "single_quote_scalar": "single", "plain_scalar": "plain"}


@dataclass
class Item:
    """One scalar of a flow collection (offsets into the whole text)."""

    kind: str  # plain | single | double | seq | map | other
    start: int  # quote included
    end: int
    inner_start: int  # quotes excluded
    inner_end: int
    value: str | None  # literal value (None: escapes, a template, or not a scalar)
    node: Node | None = None  # the flow_sequence / flow_mapping of a "seq" / "map" item


def mask(text: str) -> str:
    return _TEMPLATE.sub(lambda m: re.sub(r"[^\n]", "x", m.group(0)), text)


class Flows:
    """The flow collections of a YAML text that are the value of a block entry or item."""

    def __init__(self, text: str) -> None:
        self.text = text
        self._root: Node | None = None  # parsed at the first look-up (most files have no flow value)
        self.masked = text
        self._wide: list[int] = []
        self._extra: list[int] = []
        self.offsets = Offsets(text, text.encode("utf-8", "surrogatepass"))

    def at(self, start: int) -> Node | None:
        """The outermost flow collection that starts at offset ``start``, if any."""
        if self._root is None:
            self.masked = mask(self.text)
            self._root, self.offsets = parse("tree_sitter_yaml", self.masked)
            if not self.offsets.ascii:  # where each non-ASCII character is, and the bytes before it
                extra = 0
                for i, ch in enumerate(self.masked):
                    if ch > "\x7f":
                        self._wide.append(i)
                        self._extra.append(extra)
                        extra += len(ch.encode("utf-8", "surrogatepass")) - 1
                self._extra.append(extra)
        k = bisect.bisect_left(self._wide, start)  # non-ASCII characters before ``start``
        byte = start + (self._extra[k] if self._wide else 0)
        n: Node | None = self._root.descendant_for_byte_range(byte, byte + 1)
        found = None
        while n is not None and n.start_byte == byte:
            if n.type in _FLOW:
                found = n
            n = n.parent
        return found

    def span(self, n: Node) -> tuple[int, int]:
        return self.offsets.char(n.start_byte), self.offsets.char(n.end_byte)

    def end(self, n: Node) -> int:
        return self.offsets.char(n.end_byte)

    def item(self, flow_node: Node) -> Item:
        """``flow_node``: an item of a sequence, or a key or value of a pair."""
        inner = flow_node.named_children[0] if flow_node.named_children else flow_node
        start, end = self.span(inner)
        raw = self.text[start:end]
        if inner.type in _FLOW:
            return Item("seq" if inner.type == "flow_sequence" else "map", start, end, start, end, None, inner)
        kind = _QUOTES.get(inner.type, "other")
        if kind == "other" or inner.has_error:
            return Item("other", start, end, start, end, None)
        if kind == "plain":
            value: str | None = raw
            a, b = start, end
        else:
            a, b = start + 1, end - 1
            value = raw[1:-1]
            if (kind == "double" and "\\" in value) or (kind == "single" and "''" in value):
                value = None
        if value is not None and ("{{" in value or "{%" in value):
            value = None
        return Item(kind, start, end, a, b, value)

    def items(self, seq: Node) -> list[Item]:
        return [self.item(c) for c in seq.named_children if c.type == "flow_node"]

    def pairs(self, mapping: Node) -> list[tuple[Item, Item | None, Node]]:
        """(key, value or None, the pair) of each ``k: v`` of a flow mapping."""
        out: list[tuple[Item, Item | None, Node]] = []
        for c in mapping.named_children:
            if c.type != "flow_pair":
                continue
            parts = [x for x in c.named_children if x.type == "flow_node"]
            if parts and parts[0].start_byte == c.start_byte:
                out.append((self.item(parts[0]), self.item(parts[1]) if len(parts) > 1 else None, c))
        return out
