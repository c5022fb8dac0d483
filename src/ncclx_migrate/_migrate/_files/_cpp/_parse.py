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
from tree_sitter import Language, Node, Parser, Query, QueryCursor, Tree

__all__ = ["INDEXED", "Source", "find", "index", "is_cuda", "named", "parse_bytes", "parse_snippet", "walk"]

# The node types the rules look at, found by one tree-sitter query (in C; a Python walk of
# every node costs ~10x the parse).
INDEXED = ("call_expression", "cast_expression", "field_expression", "binary_expression", "base_class_clause",
           "namespace_definition", "using_declaration", "alias_declaration", "type_definition",
           "class_specifier", "struct_specifier", "preproc_def", "preproc_function_def", "preproc_include",
           "comment", "function_definition", "new_expression")

_CUDA_EXTS = (".cu", ".cuh", ".hip")  # hipify keeps CUDA's syntax in .hip

_HAS_INCLUDE = re.compile(rb"\b__has_include(?:_next)?\s*\(\s*(<[^>\n]*>|\"[^\"\n]*\")\s*\)")
_EXPORT = re.compile(rb"\b(?:class|struct)\s+([A-Z][A-Z0-9_]*_(?:API|EXPORT|EXPORTS|VISIBLE|VISIBILITY))"
                     rb"\s+(?=[A-Za-z_])")


@functools.cache
def _language(cuda: bool) -> Language:
    return Language((tree_sitter_cuda if cuda else tree_sitter_cpp).language())


@functools.cache
def _parser(cuda: bool) -> Parser:
    return Parser(_language(cuda))


@functools.cache
def _query(cuda: bool, source: str) -> Query:
    return Query(_language(cuda), source)


_DEAD = "(preproc_if condition: (_) @c) @if (preproc_elif condition: (_) @c) @if"


def index(tree: Tree, cuda: bool) -> dict[str, list[Node]]:
    """Node type -> its nodes in document order (:data:`INDEXED` types), leaving out the
    dead branch of ``#if 0`` / ``#if false``."""
    root = tree.root_node
    found = QueryCursor(_query(cuda, " ".join(f"({t}) @{t}" for t in INDEXED))).captures(root)
    dead = [(c.end_byte, _branch_end(c.parent)) for c in QueryCursor(_query(cuda, _DEAD)).captures(root).get("c", [])
            if c.parent is not None and _is_false(c)]
    out: dict[str, list[Node]] = {}
    for t in INDEXED:
        nodes = sorted(found.get(t, []), key=lambda n: n.start_byte)
        out[t] = [n for n in nodes if not any(a <= n.start_byte < b for a, b in dead)] if dead else nodes
    return out


def find(root: Node, cuda: bool, types: tuple[str, ...]) -> dict[str, list[Node]]:
    """Node type -> its nodes under ``root`` (in no order), for ``types`` (one query)."""
    return QueryCursor(_query(cuda, " ".join(f"({t}) @{t}" for t in types))).captures(root)


def _branch_end(n: Node) -> int:
    alt = n.child_by_field_name("alternative")
    return alt.start_byte if alt is not None else n.end_byte


def named(root: Node, cuda: bool, name: str) -> list[Node]:
    """Identifiers spelled ``name`` (a macro's uses)."""
    q = _query(cuda, f'((identifier) @i (#eq? @i "{name}"))')
    return QueryCursor(q).captures(root).get("i", [])


def is_cuda(path: str) -> bool:
    return path.lower().endswith(_CUDA_EXTS)


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
    return _parser(is_cuda(path)).parse(blanked), blanked


def parse_snippet(path: str, data: bytes) -> Tree:
    return _parser(is_cuda(path)).parse(data)


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


@dataclass
class Source:
    """The file's text, its UTF-8 bytes, and byte -> character offsets."""

    text: str
    data: bytes

    def char(self, byte: int) -> int:
        if len(self.data) == len(self.text):
            return byte
        return len(self.data[:byte].decode("utf-8", "replace"))
