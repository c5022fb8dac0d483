"""Which class a C++ type name means, resolved the way the compiler would.

A name is looked up from where it is written: aliases (``using PG = ...``, ``typedef``),
using-declarations (``using c10d::ProcessGroupNCCL;``) and classes declared in the file,
innermost scope first; then in the enclosing namespaces (``namespace c10d { ... }``,
``namespace c10d::nccl2 { ... }``), innermost first; then through the using-directives
in force (``using namespace c10d;``).  ``c10d::nccl2::ProcessGroupNCCL`` is nccl2's class,
never the legacy one.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from tree_sitter import Node

__all__ = ["Kind", "Resolver", "text_of"]


class Kind(enum.Enum):
    LEGACY = "legacy"  # c10d::ProcessGroupNCCL
    LEGACY_SUB = "legacy-sub"  # a class of this file derived from it
    NCCL2 = "nccl2"  # c10d::nccl2::ProcessGroupNCCL (or its lazy wrapper)
    OTHER = "other"  # a class of this file that hides the name
    GROUP = "group"  # c10d::ProcessGroup (a cast from one is null on every torch)


_KNOWN = {
    ("c10d", "ProcessGroup"): Kind.GROUP,
    ("c10d", "ProcessGroupNCCL"): Kind.LEGACY,
    ("c10d", "nccl2", "ProcessGroupNCCL"): Kind.NCCL2,
    ("c10d", "nccl2", "ProcessGroupNCCLLazy"): Kind.NCCL2,
}
_SMART = ("intrusive_ptr", "shared_ptr", "unique_ptr", "weak_ptr")
_NAME_TYPES = ("qualified_identifier", "type_identifier", "identifier", "template_type",
               "namespace_identifier")


def text_of(node: Node | None) -> str:
    if node is None or node.text is None:
        return ""
    return node.text.decode("utf-8", "replace")


def _parts(name: str) -> tuple[bool, tuple[str, ...]]:
    """(absolute, components) of a qualified name, template arguments dropped."""
    name = "".join(name.split())
    absolute = name.startswith("::")
    return absolute, tuple(p for p in name.strip(":").split("::") if p)


@dataclass
class _Decl:
    pos: int  # where it takes effect (byte offset)
    scope: tuple[int, int]  # the byte range of the scope it belongs to
    name: str = ""  # alias / using-declaration / class name ("" for a using-directive)
    kind: Kind | None = None  # what the name means
    namespace: tuple[str, ...] = ()  # a using-directive's namespace


class Resolver:
    """Built from the file's declaration nodes (namespaces, usings, aliases, classes) in
    document order; only names that can lead to the NCCL classes are resolved."""

    def __init__(self, nodes: list[Node]) -> None:
        self.decls: list[_Decl] = []
        self.namespaces: list[tuple[int, int, tuple[str, ...]]] = []
        self._names = {"ProcessGroup"}  # spellings that may name one of the classes (ProcessGroupNCCL too)
        for n in nodes:
            t = n.type
            if t == "namespace_definition":
                name = text_of(n.child_by_field_name("name"))
                body = n.child_by_field_name("body")
                if body is not None and name:
                    self.namespaces.append((body.start_byte, body.end_byte, _parts(name)[1]))
            elif t == "using_declaration":
                self._using(n)
            elif t in ("alias_declaration", "type_definition"):
                target = n.child_by_field_name("type")
                if target is None or not self._may_name(target):
                    continue
                kind = self.kind_of_type(target)
                if t == "alias_declaration":
                    self._add(n, text_of(n.child_by_field_name("name")), kind)
                for d in n.children_by_field_name("declarator") if t == "type_definition" else ():
                    if d.type == "type_identifier":
                        self._add(n, text_of(d), kind)
            elif n.child_by_field_name("body") is not None:  # class / struct with a body
                name = text_of(n.child_by_field_name("name"))
                if name and "::" not in name:
                    bases = [b for c in n.children if c.type == "base_class_clause"
                             for b in c.named_children if b.type in _NAME_TYPES]
                    derived = any(self._may_name(b) and self.kind_of_type(b) is Kind.LEGACY for b in bases)
                    if derived or name in self._names:
                        self._add(n, name, Kind.LEGACY_SUB if derived else Kind.OTHER, at=n.start_byte)

    def _may_name(self, n: Node) -> bool:
        t = text_of(n)
        return any(name in t for name in self._names)

    def _scope_of(self, n: Node) -> tuple[int, int]:
        p = n.parent
        while p is not None and p.type not in ("translation_unit", "declaration_list", "compound_statement",
                                               "field_declaration_list"):
            p = p.parent
        return (p.start_byte, p.end_byte) if p is not None else (0, 1 << 62)

    def _add(self, n: Node, name: str, kind: Kind | None, at: int | None = None) -> None:
        if name and kind is not None:
            self._names.add(name)
            self.decls.append(_Decl(n.end_byte if at is None else at, self._scope_of(n), name, kind))

    def _using(self, n: Node) -> None:
        target = next((c for c in n.named_children if c.type in ("qualified_identifier", "identifier")), None)
        if target is None:
            return
        if any(c.type == "namespace" for c in n.children):
            self.decls.append(_Decl(n.end_byte, self._scope_of(n), namespace=self._qualify(n, text_of(target))))
            return
        if not self._may_name(target):
            return
        kind = self.kind_of_name(text_of(target), n.start_byte)
        self._add(n, _parts(text_of(target))[1][-1], kind)

    def _qualify(self, n: Node, name: str) -> tuple[str, ...]:
        """A using-directive's namespace, as the full path (``using namespace nccl2;`` in c10d)."""
        absolute, parts = _parts(name)
        if absolute:
            return parts
        enclosing = self._enclosing(n.start_byte)
        known = {k[:i] for k in _KNOWN for i in range(1, len(k))}
        for i in range(len(enclosing), -1, -1):
            if enclosing[:i] + parts in known:
                return enclosing[:i] + parts
        return parts

    def _enclosing(self, pos: int) -> tuple[str, ...]:
        path: tuple[str, ...] = ()
        for start, end, parts in sorted(self.namespaces):
            if start <= pos < end:
                path += parts
        return path

    def _visible(self, pos: int) -> list[_Decl]:
        """Declarations in force at ``pos``, innermost scope first, latest first."""
        seen = [d for d in self.decls if d.pos <= pos and d.scope[0] <= pos < d.scope[1]]
        return sorted(seen, key=lambda d: (d.scope[1] - d.scope[0], -d.pos))

    def kind_of_name(self, name: str, pos: int) -> Kind | None:
        """What the (maybe qualified) class name ``name`` written at ``pos`` means."""
        absolute, parts = _parts(name)
        if not parts:
            return None
        if absolute:
            return _KNOWN.get(parts)
        visible = self._visible(pos)
        if len(parts) == 1:
            for d in visible:
                if d.name == parts[0]:
                    return d.kind
        enclosing = self._enclosing(pos)
        for i in range(len(enclosing), -1, -1):
            kind = _KNOWN.get(enclosing[:i] + parts)
            if kind is not None:
                return kind
        found = {k for d in visible if d.namespace and (k := _KNOWN.get(d.namespace + parts)) is not None}
        return found.pop() if len(found) == 1 else None

    def kind_of_type(self, node: Node) -> Kind | None:
        """The class a type node names, looking into ``intrusive_ptr<...>``-style wrappers and
        type descriptors (``const c10d::ProcessGroupNCCL*``)."""
        core = self.core_type(node)
        return None if core is None else self.kind_of_name(text_of(core), core.start_byte)

    def core_type(self, node: Node) -> Node | None:
        """The class-name node inside a type (the ``T`` of ``c10::intrusive_ptr<T>``)."""
        if node.type == "type_descriptor":
            inner = node.child_by_field_name("type")
            return self.core_type(inner) if inner is not None else None
        name = node
        if node.type == "qualified_identifier":
            name = node
            while name.type == "qualified_identifier":
                nxt = name.child_by_field_name("name")
                if nxt is None:
                    return None
                name = nxt
        if name.type == "template_type":
            if text_of(name.child_by_field_name("name")) not in _SMART:
                return None
            args = name.child_by_field_name("arguments")
            first = args.named_children[0] if args is not None and args.named_children else None
            return self.core_type(first) if first is not None else None
        if node.type in ("qualified_identifier", "type_identifier", "identifier"):
            return node
        return None
