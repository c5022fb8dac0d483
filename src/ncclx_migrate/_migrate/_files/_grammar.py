"""tree-sitter for the file kinds read with a grammar (make, groovy, hcl, toml): a cached
parser per grammar, the tree's byte offsets as offsets into the text, and a walk."""

from __future__ import annotations

import bisect
import functools
import importlib
from collections.abc import Iterator

from tree_sitter import Language, Node, Parser

__all__ = ["Node", "Offsets", "nodes", "parse"]


@functools.cache
def _parser(module: str) -> Parser:
    """``module``: the grammar's package (``tree_sitter_make``)."""
    return Parser(Language(importlib.import_module(module).language()))


class Offsets:
    """Byte offsets of the UTF-8 text -> character offsets (the text's own indices)."""

    def __init__(self, text: str, data: bytes) -> None:
        self.ascii = len(text) == len(data)
        self.starts: list[int] = []  # byte offset of each non-ASCII character
        if not self.ascii:
            pos = 0
            for ch in text:
                n = len(ch.encode("utf-8", "surrogatepass"))
                if n > 1:
                    self.starts.append(pos)
                pos += n
        self._extra = [0]  # extra bytes before the k-th non-ASCII character, cumulated
        for k, b in enumerate(self.starts):
            n = len(text[self._index(b, k)].encode("utf-8", "surrogatepass")) - 1
            self._extra.append(self._extra[-1] + n)

    def _index(self, byte: int, k: int) -> int:
        return byte - self._extra[k]

    def char(self, byte: int) -> int:
        if self.ascii:
            return byte
        k = bisect.bisect_left(self.starts, byte)  # non-ASCII characters that start before it
        return byte - self._extra[k]


def parse(module: str, text: str) -> tuple[Node, Offsets]:
    data = text.encode("utf-8", "surrogatepass")
    return _parser(module).parse(data).root_node, Offsets(text, data)


def nodes(root: Node, types: frozenset[str], skip: frozenset[str] = frozenset()) -> Iterator[Node]:
    """The nodes of ``types`` under ``root`` in document order (not below a match or a ``skip``)."""
    stack = [root]
    while stack:
        n = stack.pop()
        if n.type in types:
            yield n
            continue
        if n.type in skip:
            continue
        stack.extend(reversed(n.children))
