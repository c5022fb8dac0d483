"""What a name of the file provably holds: an object the code built itself as the legacy
class, or a ``c10d::ProcessGroup``.

A library that builds its own ``c10d::ProcessGroupNCCL`` (``c10::make_intrusive``,
``std::make_shared``, ``new``) and later casts it, calls its members or compares its name
never sees nccl2 there: the object is the legacy class on every torch that has it.  A name
is *self-built* when every value written to it in the file (initialisers, default member
initialisers, constructor initialiser lists, assignments; a parameter of that name is a value
from elsewhere) is such a construction, or another self-built name, its ``.get()``, or a cast
of one.  Names are matched by spelling across the file (a local ``pg`` of one function and a
parameter ``pg`` of another are one name), so a name with any other origin is not self-built:
the rules then judge it as before.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from tree_sitter import Node

from ._names import Kind, Resolver, text_of
from ._parse import find

__all__ = ["BUILDERS", "Build", "Values", "names_process_group", "strip"]

_WRITES = ("init_declarator", "field_declaration", "field_initializer", "assignment_expression",
           "parameter_declaration", "optional_parameter_declaration")

BUILDERS = frozenset({"make_intrusive", "make_shared", "make_unique"})
_PROCESS_GROUP = re.compile(r"(?:^|[^\w:]|::)ProcessGroup\b")
_CASTS = frozenset({"dynamic_cast", "static_cast", "reinterpret_cast", "dynamic_pointer_cast",
                    "static_pointer_cast", "reinterpret_pointer_cast", "dynamic_intrusive_pointer_cast",
                    "static_intrusive_pointer_cast", "reinterpret_intrusive_pointer_cast", "const_cast"})


@dataclass
class Build:
    node: Node  # the make_intrusive<...>(...) call or the new expression
    builder: str  # "make_intrusive", "make_shared", "make_unique", "new"
    name: Node  # the class name built
    kind: Kind


def _template_call(n: Node) -> tuple[str, Node] | None:
    """(function name, first template argument) of ``f<T>(...)`` / ``ns::f<T>(...)``."""
    fn = n.child_by_field_name("function") if n.type == "call_expression" else None
    while fn is not None and fn.type == "qualified_identifier":
        fn = fn.child_by_field_name("name")
    if fn is None or fn.type != "template_function":
        return None
    args = fn.child_by_field_name("arguments")
    first = args.named_children[0] if args is not None and args.named_children else None
    return (text_of(fn.child_by_field_name("name")), first) if first is not None else None


class Values:
    def __init__(self, root: Node, cuda: bool, nodes: dict[str, list[Node]], resolver: Resolver) -> None:
        self.resolver = resolver
        self.builds: list[Build] = []
        self.nccl2_builds: list[int] = []  # where the file builds nccl2's class (byte offsets)
        for n in nodes["call_expression"]:
            found = _template_call(n)
            if found is not None and found[0] in BUILDERS:
                self._build(n, found[0], found[1])
        for n in nodes["new_expression"]:
            ty = n.child_by_field_name("type")
            if ty is not None:
                self._build(n, "new", ty)
        self._built_at = {b.node.id for b in self.builds}
        self.self_built: set[str] = set()
        if self.builds:  # the writes are looked for only in a file that builds the class
            self._nodes = find(root, cuda, _WRITES)
            self._solve()

    def _build(self, n: Node, builder: str, ty: Node) -> None:
        core = self.resolver.core_type(ty)
        kind = self.resolver.kind_of_name(text_of(core), core.start_byte) if core is not None else None
        if core is not None and kind in (Kind.LEGACY, Kind.LEGACY_SUB):
            self.builds.append(Build(n, builder, core, kind))
        elif kind is Kind.NCCL2:
            self.nccl2_builds.append(n.start_byte)

    def _writes(self) -> dict[str, list[Node | None]]:
        """name -> the values written to it (None: a value from elsewhere)."""
        out: dict[str, list[Node | None]] = {}
        for d in self._nodes.get("init_declarator", []):
            name = _name(d.child_by_field_name("declarator"))
            value = d.child_by_field_name("value")
            if value is not None and value.type in ("argument_list", "initializer_list"):
                value = value.named_children[0] if len(value.named_children) == 1 else None
            if name:
                out.setdefault(name, []).append(value)
        for d in self._nodes.get("field_declaration", []):
            value = d.child_by_field_name("default_value")
            for decl in d.children_by_field_name("declarator") if value is not None else ():
                out.setdefault(_name(decl), []).append(value)
        for f in self._nodes.get("field_initializer", []):
            name = next((text_of(c) for c in f.named_children if c.type == "field_identifier"), "")
            args = next((c for c in f.named_children if c.type in ("argument_list", "initializer_list")), None)
            if name:
                only = args.named_children[0] if args is not None and len(args.named_children) == 1 else None
                out.setdefault(name, []).append(only)
        for a in self._nodes.get("assignment_expression", []):
            left = a.child_by_field_name("left")
            name = text_of(left.child_by_field_name("field")) if left is not None and left.type == "field_expression" \
                else text_of(left) if left is not None and left.type == "identifier" else ""
            if name:
                out.setdefault(name, []).append(a.child_by_field_name("right"))
        for p in self._nodes.get("parameter_declaration", []) + self._nodes.get("optional_parameter_declaration", []):
            name = _name(p.child_by_field_name("declarator"))
            if name:
                out.setdefault(name, []).append(None)
        return out

    def _solve(self) -> None:
        writes = self._writes()
        changed = True
        while changed:  # the least set closed under "every write is built"
            changed = False
            for name, values in writes.items():
                if name not in self.self_built and all(v is not None and self.built(v) for v in values):
                    self.self_built.add(name)
                    changed = True

    def built(self, n: Node) -> bool:
        """Is ``n`` provably an object the file built as the legacy class (or its subclass)?"""
        n = strip(n)
        if n.id in self._built_at:
            return True
        if n.type == "identifier":
            return text_of(n) in self.self_built
        if n.type == "field_expression":
            return text_of(n.child_by_field_name("field")) in self.self_built
        if n.type == "call_expression":
            fn = n.child_by_field_name("function")
            if fn is not None and fn.type == "field_expression" and text_of(fn.child_by_field_name("field")) == "get":
                arg = fn.child_by_field_name("argument")
                return arg is not None and self.built(arg)
            cast = _template_call(n)
            args = n.child_by_field_name("arguments")
            if cast is not None and cast[0] in _CASTS and args is not None and len(args.named_children) == 1:
                return self.built(args.named_children[0])
        if n.type == "cast_expression":
            value = n.child_by_field_name("value")
            return value is not None and self.built(value)
        return False


def strip(n: Node) -> Node:
    """``n`` without parentheses, ``*``/``&`` and ``std::move(...)``."""
    while True:
        if n.type == "parenthesized_expression" and len(n.named_children) == 1:
            n = n.named_children[0]
        elif n.type == "pointer_expression" and n.child_by_field_name("argument") is not None:
            n = n.child_by_field_name("argument")  # type: ignore[assignment]
        elif n.type == "call_expression" and text_of(n.child_by_field_name("function")) in ("std::move", "move"):
            args = n.child_by_field_name("arguments")
            if args is None or len(args.named_children) != 1:
                return n
            n = args.named_children[0]
        else:
            return n


def _name(d: Node | None) -> str:
    while d is not None and d.type not in ("identifier", "field_identifier"):
        d = d.child_by_field_name("declarator") or (d.named_children[0] if d.named_children else None)
    return text_of(d)


def names_process_group(type_text: str) -> bool:
    """Does a declared type name ``c10d::ProcessGroup`` (raw, a smart pointer of it, a reference)?"""
    return bool(_PROCESS_GROUP.search(type_text))
