"""The index of one C++/CUDA file: its syntax nodes by type, the names in scope, the casts
to either NCCL class (in the code and in macro bodies), and where the code handles nccl2.

Macro bodies, which the grammar leaves as raw text, are parsed on their own: a cast in a
macro is reported where the macro defines it (the one place to fix), unless every use of the
macro is in a function that also handles nccl2.  A function (or macro) that already casts to
nccl2's class, or calls the ``ncclx::`` helpers of ``<ncclx/compat.h>``, handles both classes.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

from tree_sitter import Node

from ..._model import Options
from ._names import Kind, Resolver, text_of
from ._parse import Source, index, is_cuda, named, parse_bytes, parse_snippet, walk
from ._values import Values, declarator_name, declared_type, names_process_group, strip
from ._views import View

__all__ = ["CHECKED", "NCCL2_HEADER", "UNCHECKED", "Cast", "Scan", "Unit", "cast_operand", "declarator_name",
           "function_of", "may_match", "outer_function", "pure"]

CHECKED = frozenset({"dynamic_cast", "dynamic_pointer_cast", "dynamic_intrusive_pointer_cast"})
UNCHECKED = frozenset({"static_cast", "reinterpret_cast", "static_pointer_cast", "reinterpret_pointer_cast",
                       "static_intrusive_pointer_cast", "reinterpret_intrusive_pointer_cast"})
_SHIM_CALLS = frozenset({"comm_ptr", "is_nccl", "nccl_kind"})
_MACRO_PREFIX = b"void __ncclx_macro_body__() {\n"
NCCL2_HEADER = "torch/csrc/distributed/c10d/nccl2/ProcessGroupNCCL.hpp"


def may_match(text: str) -> bool:
    """A file without these words has no finding (the parse is skipped)."""
    return "ProcessGroupNCCL" in text or '"nccl"' in text


@dataclass
class Unit:
    """A tree over the file (``offset`` 0) or over one macro body (parsed on its own)."""

    root: Node
    offset: int  # file byte offset of the unit's byte 0 (after the wrapper prefix)
    macro: Node | None = None  # the #define, for a macro body

    def start(self, n: Node) -> int:
        return self.offset + n.start_byte

    def end(self, n: Node) -> int:
        return self.offset + n.end_byte


@dataclass
class Cast:
    node: Node  # the call or cast expression
    unit: Unit
    fn: str  # dynamic_cast, static_pointer_cast, ... ("C-style cast" for (T*)x)
    target: Node  # the type descriptor / template argument
    name: Node  # the class-name node in it
    kind: Kind

    @property
    def checked(self) -> bool:
        return self.fn in CHECKED


class Scan:
    def __init__(self, path: str, text: str, options: Options, view: View | None = None) -> None:
        self.path = path
        self.options = options
        self.src = Source(text, text.encode("utf-8"))
        self.view = view  # the arms of #if/#else read (None: the file as written)
        tree, self.parsed = parse_bytes(path, self.src.data if view is None else view.data)
        self.root = tree.root_node
        self.cuda = is_cuda(path)
        self.nodes = index(tree, self.cuda)
        self.resolver = Resolver(sorted(
            (n for t in ("namespace_definition", "using_declaration", "alias_declaration", "type_definition",
                         "class_specifier", "struct_specifier") for n in self.nodes[t]),
            key=lambda n: n.start_byte))
        self.main = Unit(self.root, 0)
        self.units = [self.main, *self._macro_units()]
        self.casts = [c for u in self.units for c in self._casts(u)]
        self.nccl2_at = self._nccl2_evidence()
        self.values = Values(self.root, self.cuda, self.nodes, self.resolver, dict(options.cpp_returns),
                             options.project.asked)

    # --- structure ---
    def _macro_units(self) -> Iterator[Unit]:
        for n in self.nodes["preproc_def"] + self.nodes["preproc_function_def"]:
            value = n.child_by_field_name("value")
            if value is None or value.text is None or not may_match(value.text.decode("utf-8", "replace")):
                continue
            body = re.sub(rb"\\(?=\r?\n)", b" ", self.parsed[value.start_byte:value.end_byte])
            tree = parse_snippet(self.path, _MACRO_PREFIX + body + b"\n;}")
            yield Unit(tree.root_node, value.start_byte - len(_MACRO_PREFIX), macro=n)

    def _casts(self, unit: Unit) -> Iterator[Cast]:
        candidates = self.nodes["call_expression"] + self.nodes["cast_expression"] if unit.macro is None \
            else walk(unit.root)
        for n in candidates:
            if n.type == "ERROR" and unit.macro is not None:
                continue
            found = _cast_parts(n)
            if found is None:
                continue
            fn, target = found
            core = self.resolver.core_type(target)
            if core is None:
                continue
            kind = self.resolver.kind_of_name(text_of(core), unit.start(core) if unit.macro is None
                                              else unit.macro.start_byte)
            if kind in (Kind.LEGACY, Kind.LEGACY_SUB, Kind.NCCL2) and not _in_error(n):
                yield Cast(n, unit, fn, target, core, kind)

    def _nccl2_evidence(self) -> list[int]:
        """File offsets of code that handles nccl2: casts to its class, ``ncclx::`` helper
        calls, and uses of macros whose body casts to it."""
        at = [c.unit.start(c.node) if c.unit.macro is None else c.unit.macro.start_byte
              for c in self.casts if c.kind is Kind.NCCL2]
        nccl2_macros = {text_of(c.unit.macro.child_by_field_name("name"))
                        for c in self.casts if c.kind is Kind.NCCL2 and c.unit.macro is not None}
        for call in self.nodes["call_expression"]:
            fn = call.child_by_field_name("function")
            if fn is not None and fn.type == "qualified_identifier" and text_of(fn.child_by_field_name("scope")) == "ncclx" \
                    and text_of(fn.child_by_field_name("name")) in _SHIM_CALLS:
                at.append(call.start_byte)
        for name in nccl2_macros:
            at += [n.start_byte for n in named(self.root, self.cuda, name)]
        return at

    def context(self, n: Node, unit: Unit) -> tuple[int, int]:
        """The byte range of the function (or macro) holding ``n``; the file at top level."""
        if unit.macro is not None:
            return unit.macro.start_byte, unit.macro.end_byte
        fn = outer_function(n)
        return (fn.start_byte, fn.end_byte) if fn is not None else (0, len(self.parsed))

    def self_built(self, n: Node | None) -> bool:
        """Is ``n`` provably an object this file built as the legacy class (:mod:`._values`)?"""
        return n is not None and self.values.built(n)

    def from_process_group(self, n: Node | None) -> bool:
        """Is ``n`` (``pg``, ``pg.get()``, ``*pg``, ``this->pg_``, ``f()``) declared a
        ``c10d::ProcessGroup`` (a pointer, smart pointer or reference to one; for a call, the
        return type of every declaration of the function in the project)?"""
        if n is None:
            return False
        n = strip(n)
        if n.type == "call_expression":
            fn = n.child_by_field_name("function")
            if fn is not None and fn.type == "field_expression" and text_of(fn.child_by_field_name("field")) == "get":
                n = strip(fn.child_by_field_name("argument") or n)
            if n.type == "call_expression":
                return self.values.fact("pg", n)
        name = text_of(n.child_by_field_name("field")) if n.type == "field_expression" \
            else text_of(n) if n.type == "identifier" else ""
        ty = self.declared_type(n, name) if name else None
        return ty is not None and names_process_group(text_of(ty))

    def declared_type(self, at: Node, name: str) -> Node | None:
        """The type ``name`` is declared with where ``at`` uses it: a parameter or local of the
        function around, else a member declared in the file."""
        return declared_type(self.nodes["class_specifier"] + self.nodes["struct_specifier"], at, name)

    def handles_nccl2(self, n: Node, unit: Unit) -> bool:
        lo, hi = self.context(n, unit)
        if any(lo <= a < hi for a in self.nccl2_at):
            return True
        if unit.macro is None:
            return False
        # A macro is fine where every use of it is in a function that handles nccl2.
        name = text_of(unit.macro.child_by_field_name("name"))
        uses = named(self.root, self.cuda, name)
        return bool(uses) and all(self.handles_nccl2(u, self.main) for u in uses)


def _cast_parts(n: Node) -> tuple[str, Node] | None:
    """(cast function, target type node) when ``n`` is a cast expression."""
    if n.type == "cast_expression":
        target = n.child_by_field_name("type")
        return ("C-style cast", target) if target is not None else None
    if n.type != "call_expression":
        return None
    fn = n.child_by_field_name("function")
    while fn is not None and fn.type == "qualified_identifier":
        fn = fn.child_by_field_name("name")
    if fn is None or fn.type != "template_function":
        return None
    name = text_of(fn.child_by_field_name("name"))
    if name not in CHECKED and name not in UNCHECKED:
        return None
    args = fn.child_by_field_name("arguments")
    first = args.named_children[0] if args is not None and args.named_children else None
    return (name, first) if first is not None else None


def cast_operand(cast: Node) -> Node | None:
    """What a cast converts (its one argument)."""
    if cast.type == "cast_expression":
        return cast.child_by_field_name("value")
    args = cast.child_by_field_name("arguments")
    return args.named_children[0] if args is not None and len(args.named_children) == 1 else None


def outer_function(n: Node) -> Node | None:
    """The outermost function definition holding ``n`` (lambdas belong to their function)."""
    found = None
    p = n.parent
    while p is not None:
        if p.type == "function_definition":
            found = p
        p = p.parent
    return found


def _in_error(n: Node) -> bool:
    p: Node | None = n
    while p is not None:
        if p.type == "ERROR":
            return True
        p = p.parent
    return False


def function_of(n: Node) -> Node | None:
    """The innermost function definition holding ``n``."""
    p = n.parent
    while p is not None and p.type != "function_definition":
        p = p.parent
    return p


_GETTERS = frozenset({"get", "getBackend", "getDefaultBackend", "getBackendName"})


def pure(n: Node) -> bool:
    """Cheap and free of side effects, so that it may be evaluated twice: names, members,
    ``this`` and calls of the getters that reach a backend or its name."""
    if n.type in ("identifier", "qualified_identifier", "this"):
        return True
    if n.type == "field_expression":
        arg = n.child_by_field_name("argument")
        return arg is not None and pure(arg)
    if n.type == "call_expression":
        fn = n.child_by_field_name("function")
        args = n.child_by_field_name("arguments")
        return (fn is not None and fn.type == "field_expression" and text_of(fn.child_by_field_name("field")) in _GETTERS
                and pure(fn) and args is not None
                and all(a.type in ("qualified_identifier", "identifier", "number_literal") for a in args.named_children))
    return False
