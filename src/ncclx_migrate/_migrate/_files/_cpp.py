"""C++ and CUDA sources: the casts and bindings that nccl2 breaks (NCX301-NCX306).

Everything is read from tree-sitter's syntax tree (comments, strings and ``#if 0`` blocks
are nodes, never matches).  Macro bodies, which the grammar leaves as raw text, are parsed
on their own: a cast in a macro is reported where the macro defines it (the one place to
fix), unless every use of the macro is in a function that also handles nccl2.

A function (or macro) that already casts to nccl2's class, or calls the ``ncclx::`` helpers
of ``<ncclx/compat.h>``, handles both classes: its casts and members are not findings.
Fixes are all unsafe; the idiom they rewrite is in :mod:`._cpp_fix`.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field

from tree_sitter import Node

from .._model import FileResult, Finding, FixKind, Options, is_selected
from .._suppress import IGNORE, codes_in
from ._cpp_members import LEGACY_ONLY
from ._cpp_names import Kind, Resolver, text_of
from ._cpp_parse import Source, index, is_cuda, named, parse_bytes, parse_snippet, walk
from ._text import Edit, LineIndex, apply_edits

__all__ = ["CHECKED", "LEGACY_ONLY", "NCCL2_HEADER", "UNCHECKED", "Cast", "Hit", "Scan", "Unit", "cast_operand",
           "may_match", "scan_cpp", "scan_edit"]

CHECKED = frozenset({"dynamic_cast", "dynamic_pointer_cast", "dynamic_intrusive_pointer_cast"})
UNCHECKED = frozenset({"static_cast", "reinterpret_cast", "static_pointer_cast", "reinterpret_pointer_cast",
                       "static_intrusive_pointer_cast", "reinterpret_intrusive_pointer_cast"})
_SHIM_CALLS = frozenset({"comm_ptr", "is_nccl", "nccl_kind"})
_SUPPRESS = re.compile(IGNORE)
_MACRO_PREFIX = b"void __ncclx_macro_body__() {\n"
_FUNCS = ("function_definition", "lambda_expression")
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


@dataclass
class Hit:
    offset: int  # file byte offset
    code: str
    message: str
    fix: FixKind = FixKind.NONE
    detail: str = ""
    edits: list[Edit] = field(default_factory=list)  # character offsets
    include: str = ""  # the include block an applied fix needs (once per file)


class Scan:
    def __init__(self, path: str, text: str, options: Options) -> None:
        self.path = path
        self.options = options
        self.src = Source(text, text.encode("utf-8"))
        tree, self.parsed = parse_bytes(path, self.src.data)
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
        fn = _outer_function(n)
        return (fn.start_byte, fn.end_byte) if fn is not None else (0, len(self.parsed))

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

    # --- results ---
    def result(self, hits: list[Hit]) -> FileResult:
        if not hits:
            return FileResult(self.path)
        index = LineIndex(self.src.text)
        quiet = self._suppressions()
        findings: list[Finding] = []
        taken: list[Edit] = []
        includes: list[str] = []
        for hit in sorted(hits, key=lambda h: (h.offset, h.code)):
            if not is_selected(hit.code, self.options):
                continue
            offset = self.src.char(hit.offset)
            row, col = index.position(offset)
            codes = quiet.get(row, frozenset())
            if "*" in codes or any(hit.code.startswith(c) for c in codes):
                continue
            applied = False
            if hit.edits and self.options.wants_fix(hit.fix) \
                    and not any(_overlaps(e, t) for e in hit.edits for t in taken):
                taken.extend(hit.edits)
                applied = True
                if hit.include and hit.include not in includes:
                    includes.append(hit.include)
            findings.append(Finding(self.path, row, col, hit.code, hit.message, hit.fix, applied, hit.detail))
        for inc in includes:
            edit = self.include_edit(inc)
            if edit is not None:
                taken.append(edit)
        new_text = apply_edits(self.src.text, taken) if taken else None
        return FileResult(self.path, findings, None if new_text == self.src.text else new_text)

    def _suppressions(self) -> dict[int, frozenset[str]]:
        out: dict[int, frozenset[str]] = {}
        for c in self.nodes["comment"]:
            for m in _SUPPRESS.finditer(text_of(c)):
                line = c.start_point.row + 1
                out[line] = out.get(line, frozenset()) | codes_in(m)
        return out

    def include_edit(self, block: str) -> Edit | None:
        """``block`` (an include, maybe guarded) after the file's includes, unless present."""
        header = re.search(r"#include\s*(<[^>]+>)", block)
        includes = self.nodes["preproc_include"]
        if header and any(text_of(n.child_by_field_name("path")) == header.group(1) for n in includes):
            return None
        nl = "\r\n" if "\r\n" in self.src.text else "\n"
        block = block.replace("\n", nl)
        legacy = [n for n in includes if text_of(n.child_by_field_name("path")).endswith(
            "c10d/ProcessGroupNCCL.hpp>") and "nccl2" not in text_of(n)]
        top = [n for n in includes if n.parent is not None and n.parent.type == "translation_unit"]
        if not (legacy or top):
            return Edit(0, 0, block)
        anchor = (legacy or top)[-1]
        end = self.src.char(anchor.end_byte)
        if not self.src.text[:end].endswith("\n"):
            return Edit(end, end, nl + block.rstrip("\r\n"))
        return Edit(end, end, block)


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


def _outer_function(n: Node) -> Node | None:
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


def _overlaps(a: Edit, b: Edit) -> bool:
    return (a.start < b.end and b.start < a.end) or (a.start == a.end == b.start == b.end)


def scan_cpp(path: str, text: str, options: Options) -> FileResult:
    from ._cpp_rules import find_error, hits

    scan = Scan(path, text, options)
    error = find_error(scan)
    if error is not None:
        return FileResult(path, error=error)
    return scan.result(list(hits(scan)))


def scan_edit(scan: Scan, n: Node, new: str) -> Edit:
    """Replace node ``n`` of ``scan``'s file with ``new`` (byte offsets to text offsets)."""
    return Edit(scan.src.char(n.start_byte), scan.src.char(n.end_byte), new)
