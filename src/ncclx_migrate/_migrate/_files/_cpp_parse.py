"""Parsing C++ and CUDA sources with tree-sitter's grammars (``tree-sitter-cpp``, and
``tree-sitter-cuda`` for ``.cu``/``.cuh``: it reads ``<<<...>>>`` kernel launches and
``__global__`` that the C++ grammar turns into ERROR nodes).

Two constructs the grammars cannot read are blanked to same-length text before parsing, so
that every offset still points into the file as written:

- ``__has_include(<path>)`` in ``#if`` lines (both grammars reject a header name there: the
  whole directive becomes an ERROR node); the path is replaced by ``0``.
- an export macro between ``class``/``struct`` and the class name (``class TORCH_API X :
  public Y``): the preprocessor expands it to an attribute, the grammar reads a function.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator
from dataclasses import dataclass

import tree_sitter_cpp
import tree_sitter_cuda
from tree_sitter import Language, Node, Parser, Tree

__all__ = ["CPP_EXTS", "Source", "comments", "is_cpp", "parse_bytes", "walk"]

CPP_EXTS = (".cpp", ".cc", ".cxx", ".cu", ".cuh", ".h", ".hpp", ".hh")  # also _files.__init__._CPP_EXT
_CUDA_EXTS = (".cu", ".cuh")

_HAS_INCLUDE = re.compile(rb"\b__has_include(?:_next)?\s*\(\s*(<[^>\n]*>|\"[^\"\n]*\")\s*\)")
_EXPORT = re.compile(rb"\b(?:class|struct)\s+([A-Z][A-Z0-9_]*_(?:API|EXPORT|EXPORTS|VISIBLE|VISIBILITY))"
                     rb"\s+(?=[A-Za-z_])")


def is_cpp(path: str) -> bool:
    return path.lower().endswith(CPP_EXTS)


@functools.cache
def _parser(cuda: bool) -> Parser:
    mod = tree_sitter_cuda if cuda else tree_sitter_cpp
    return Parser(Language(mod.language()))


def _blank(data: bytes) -> bytes:
    """``data`` with the constructs above replaced by same-length text (offsets unchanged)."""
    if b"__has_include" not in data and b"_API" not in data and b"_EXPORT" not in data \
            and b"_VISIBLE" not in data and b"_VISIBILITY" not in data:
        return data
    buf = bytearray(data)
    for m in _HAS_INCLUDE.finditer(data):
        s, e = m.span(1)
        buf[s:e] = b"0" + b" " * (e - s - 1)
    for m in _EXPORT.finditer(data):
        s, e = m.span(1)
        buf[s:e] = b" " * (e - s)
    return bytes(buf)


def parse_bytes(path: str, data: bytes) -> tuple[Tree, bytes]:
    """(tree, the bytes it was parsed from) for a file named ``path``."""
    blanked = _blank(data)
    return _parser(path.lower().endswith(_CUDA_EXTS)).parse(blanked), blanked


def parse_snippet(path: str, data: bytes) -> Tree:
    return _parser(path.lower().endswith(_CUDA_EXTS)).parse(data)


def walk(node: Node) -> Iterator[Node]:
    """Every node under ``node`` in document order, skipping the dead branch of ``#if 0``."""
    stack = [node]
    while stack:
        n = stack.pop()
        yield n
        children = n.children
        if n.type in ("preproc_if", "preproc_elif") and _is_false(n.child_by_field_name("condition")):
            alt = n.child_by_field_name("alternative")
            children = [alt] if alt is not None else []
        stack.extend(reversed(children))


def _is_false(cond: Node | None) -> bool:
    return cond is not None and cond.text is not None and cond.text.strip() in (b"0", b"false")


def comments(root: Node) -> Iterator[Node]:
    for n in walk(root):
        if n.type == "comment":
            yield n


@dataclass
class Source:
    """The file's text, its UTF-8 bytes, and byte -> character offsets."""

    text: str
    data: bytes

    def char(self, byte: int) -> int:
        if len(self.data) == len(self.text):
            return byte
        return len(self.data[:byte].decode("utf-8", "replace"))
