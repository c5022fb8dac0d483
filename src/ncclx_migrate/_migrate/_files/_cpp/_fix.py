"""The unsafe rewrite of the common idiom: a checked cast to the legacy class into a
variable that is then only null-checked and asked for ``getCommPtr()``::

    auto* pg = dynamic_cast<c10d::ProcessGroupNCCL*>(backend.get());
    TORCH_CHECK(pg != nullptr, "Backend is not ProcessGroupNCCL");
    auto comm = reinterpret_cast<ncclComm_t>(pg->getCommPtr());

becomes, for torch 2.13, 2.14 and 2.15 alike (the nccl2 header is included the same way)::

    auto* pg = dynamic_cast<c10d::ProcessGroupNCCL*>(backend.get());
    #if __has_include(<torch/csrc/distributed/c10d/nccl2/ProcessGroupNCCL.hpp>)
    auto* pg_nccl2 = dynamic_cast<c10d::nccl2::ProcessGroupNCCL*>(backend.get());
    #else
    c10d::ProcessGroupNCCL* pg_nccl2 = nullptr;  // no nccl2 class before torch 2.14
    #endif
    TORCH_CHECK(pg != nullptr || pg_nccl2 != nullptr, "Backend is not ProcessGroupNCCL");
    auto comm = reinterpret_cast<ncclComm_t>(pg ? pg->getCommPtr() : pg_nccl2->getCommPtr());

or, with ``--use-shim``, into the helpers of ``<ncclx/compat.h>`` (``ncclx::is_nccl``,
``ncclx::comm_ptr``).  Any other use of the variable leaves the finding flag-only.
"""

from __future__ import annotations

import os
import re

from tree_sitter import Node

from ..._model import FixKind
from .._text import Edit
from ._index import NCCL2_HEADER, Cast, Scan, cast_operand, outer_function, pure
from ._members import LEGACY_ONLY
from ._names import Kind, text_of
from ._parse import walk
from ._rules import Hit
from ._setup import BUILD_HINT, SETUP_HINT

__all__ = ["add_fixes", "include_edit"]

_CHECKS = frozenset({"TORCH_CHECK", "TORCH_INTERNAL_ASSERT", "CHECK", "assert", "AT_ASSERT", "TORCH_CHECK_VALUE"})
_NCCL2 = "c10d::nccl2::ProcessGroupNCCL"
GUARDED_INCLUDE = (f"#if __has_include(<{NCCL2_HEADER}>)\n#include <{NCCL2_HEADER}>\n#endif\n")
SHIM_INCLUDE = "#include <ncclx/compat.h>\n"


def add_fixes(scan: Scan, hits: list[Hit]) -> None:
    """Give each hit the (unsafe) edits that fix it, where a rewrite is known."""
    for hit in hits:
        cast = hit.cast
        if hit.code == "NCX301" and cast is not None and cast.unit.macro is None and cast.kind is Kind.LEGACY:
            fix = _idiom_fix(scan, cast)
            if fix is not None:
                hit.fix, hit.edits, hit.include = FixKind.UNSAFE, fix[0], fix[1]
                if hit.include == SHIM_INCLUDE and "<ncclx/compat.h>" not in scan.src.text:
                    scan.options.project.asked("cpp_shim_builds", "")
                    built = os.path.normpath(scan.path) in {src for _, src in scan.options.cpp_shim_builds}
                    hit.detail += f" With --use-shim the fix includes <ncclx/compat.h>: {SETUP_HINT if built else BUILD_HINT}."
        elif hit.code == "NCX307" and hit.node is not None:
            edits = _construction_fix(scan, hit.node)
            if edits is not None:
                hit.fix, hit.edits, hit.include = FixKind.UNSAFE, edits, GUARDED_INCLUDE
            elif (factory := _relied_factory(scan, hit.node)) is not None:
                hit.detail += (f" Code that casts what `{text_of(_declared_name(factory))}` returns to the legacy "
                               "class relies on getting it: give those casts an nccl2 branch first.")
        elif hit.code == "NCX304" and hit.node is not None and hit.replacement:
            operand = _compared(hit.node)
            if operand is not None and pure(operand):
                hit.fix, hit.edits = FixKind.UNSAFE, [scan_edit(scan, hit.node, hit.replacement)]
    _keep_visible(scan, hits)


_LEGACY_USES = ("NCX301", "NCX302", "NCX303")


def _keep_visible(scan: Scan, hits: list[Hit]) -> None:
    """Withdraw the NCX301 fixes of a function where another cast to the legacy class (or a
    legacy-only member) gets none: the rewrite casts to nccl2's class or calls the ``ncclx::``
    helpers, after which the function counts as handling both (``Scan.handles_nccl2``) and the
    one left would lose its finding without being fixed."""
    def function(h: Hit) -> int | None:
        if h.cast is not None and h.cast.unit.macro is not None:
            return None
        n = scan.root.descendant_for_byte_range(h.offset, h.offset)
        fn = outer_function(n) if n is not None else None
        return fn.id if fn is not None else None

    unfixed = {function(h) for h in hits if h.code in _LEGACY_USES and not h.edits} - {None}
    for h in hits:
        if h.code == "NCX301" and h.edits and function(h) in unfixed:
            h.fix, h.edits, h.include = FixKind.NONE, [], ""
            h.detail += (" Not rewritten: another legacy cast or member in this function has no fix, and once "
                         "this cast handles nccl2 the function would count as handling both, hiding that one.")


# What a self-built backend may be used for when the fix builds nccl2's class instead: a
# member both classes declare, or handing it on as a c10d::Backend.
_HANDS_ON = frozenset({"setBackend", "registerBackend"})


def _construction_fix(scan: Scan, build: Node) -> list[Edit] | None:
    """``auto b = make_intrusive<c10d::ProcessGroupNCCL>(...);`` (or ``return`` of it from a
    function returning a ``c10d::Backend`` pointer that no code casting to the legacy class
    calls: it relies on getting the legacy class) on its own lines, whose variable is only
    asked for members nccl2's class declares too or handed to ``setBackend``: the same
    statement building ``c10d::nccl2::ProcessGroupNCCL`` under ``__has_include``, the legacy
    one in the ``#else``."""
    found = next((b for b in scan.values.builds if b.node.id == build.id), None)
    stmt = build.parent
    if found is None or stmt is None:
        return None
    if stmt.type == "return_statement":
        fn = _enclosing_function(stmt)
        ret = fn.child_by_field_name("type") if fn is not None else None
        if ret is None or "Backend" not in text_of(ret) or "ProcessGroupNCCL" in text_of(ret):
            return None
        if _relied_factory(scan, build) is not None:
            return None  # its callers cast what it returns to the legacy class
    else:
        decl = stmt.parent
        ty = decl.child_by_field_name("type") if decl is not None else None
        if decl is None or stmt.type != "init_declarator" or decl.type != "declaration" or ty is None \
                or ty.type != "placeholder_type_specifier" or len(decl.children_by_field_name("declarator")) != 1 \
                or stmt.child_by_field_name("value") != build:
            return None
        var = _name_node(stmt.child_by_field_name("declarator"))
        block = decl.parent
        if var is None or block is None or any(not _hands_on(u) for u in walk(block)
                                               if u.type == "identifier" and text_of(u) == text_of(var)
                                               and u.start_byte >= decl.end_byte):
            return None
        stmt = decl
    if stmt.parent is None or stmt.parent.type != "compound_statement" or not _own_lines(scan, stmt):
        return None
    text = scan.src.text
    start, end = scan.src.char(stmt.start_byte), scan.src.char(stmt.end_byte)
    indent = text[text.rfind("\n", 0, start) + 1:start]
    line_end = text.find("\n", end)
    line_end = len(text) if line_end < 0 else line_end + 1
    nl = "\r\n" if text[:line_end].endswith("\r\n") else "\n"
    body = text_of(stmt)
    s, e = found.name.start_byte - stmt.start_byte, found.name.end_byte - stmt.start_byte
    copy = body[:s] + _NCCL2 + body[e:]
    line_start = text.rfind("\n", 0, start) + 1
    block_text = (f"#if __has_include(<{NCCL2_HEADER}>){nl}{indent}{copy}{nl}#else{nl}"
                  f"{indent}{body}{nl}#endif{nl}")
    if not text[:line_end].endswith("\n"):
        block_text = block_text.rstrip("\r\n")
    return [Edit(line_start, line_end, block_text)]


def _relied_factory(scan: Scan, build: Node) -> Node | None:
    """The function ``build`` is returned from, when code that casts to the legacy class calls it."""
    fn = _enclosing_function(build) if build.parent is not None and build.parent.type == "return_statement" else None
    casts_here = any(c.kind in (Kind.LEGACY, Kind.LEGACY_SUB) for c in scan.casts)
    return fn if fn is not None and scan.values.relied_on(fn, casts_here, scan.nodes["call_expression"]) else None


def _declared_name(fn: Node) -> Node | None:
    d = fn.child_by_field_name("declarator")
    while d is not None and d.type != "function_declarator":
        d = d.child_by_field_name("declarator")
    return d.child_by_field_name("declarator") if d is not None else None


def _enclosing_function(n: Node) -> Node | None:
    p = n.parent
    while p is not None and p.type not in ("function_definition", "lambda_expression"):
        p = p.parent
    return p if p is not None and p.type == "function_definition" else None


def _hands_on(use: Node) -> bool:
    """A use of a self-built backend that nccl2's class serves as well."""
    p = use.parent
    if p is not None and p.type == "call_expression" and text_of(p.child_by_field_name("function")) in ("std::move",):
        use, p = p, p.parent
    if p is None:
        return False
    if p.type == "field_expression" and p.child_by_field_name("argument") == use:
        field = text_of(p.child_by_field_name("field"))
        return field not in LEGACY_ONLY and field != "get" and p.parent is not None \
            and p.parent.type == "call_expression"
    if p.type == "return_statement":
        fn = _enclosing_function(p)
        ret = text_of(fn.child_by_field_name("type")) if fn is not None else ""
        return "Backend" in ret and "ProcessGroupNCCL" not in ret
    if p.type == "argument_list" and p.parent is not None and p.parent.type == "call_expression":
        fn = p.parent.child_by_field_name("function")
        callee = fn.child_by_field_name("field") if fn is not None and fn.type == "field_expression" else fn
        return text_of(callee) in _HANDS_ON
    return False


def _compared(n: Node) -> Node | None:
    """The side of ``x == "nccl"`` that is not the literal."""
    left, right = n.child_by_field_name("left"), n.child_by_field_name("right")
    if left is None or right is None:
        return None
    return right if left.type == "string_literal" else left


def scan_edit(scan: Scan, n: Node, new: str) -> Edit:
    """Replace node ``n`` of ``scan``'s file with ``new`` (byte offsets to text offsets)."""
    return Edit(scan.src.char(n.start_byte), scan.src.char(n.end_byte), new)


def include_edit(scan: Scan, block: str) -> Edit | None:
    """``block`` (an include, maybe guarded) after the file's includes, unless present."""
    header = re.search(r"#include\s*<([^>]+)>", block)
    includes = scan.nodes["preproc_include"]
    if header and any(_header(n) == header.group(1) for n in includes):
        return None
    nl = "\r\n" if "\r\n" in scan.src.text else "\n"
    block = block.replace("\n", nl)
    # After the legacy include (``<...>`` or quoted), inside whatever #ifdef holds it.
    legacy = [n for n in includes if _header(n).endswith("c10d/ProcessGroupNCCL.hpp") and "nccl2" not in _header(n)]
    top = [n for n in includes if n.parent is not None and n.parent.type == "translation_unit"]
    if not (legacy or top):
        return Edit(0, 0, block)
    anchor = (legacy or top)[-1]
    end = scan.src.char(anchor.end_byte)
    if not scan.src.text[:end].endswith("\n"):
        return Edit(end, end, nl + block.rstrip("\r\n"))
    return Edit(end, end, block)


def _header(include: Node) -> str:
    """The header an ``#include`` names, without its ``<>`` or quotes."""
    return text_of(include.child_by_field_name("path")).strip().strip('<>"')


def _idiom_fix(scan: Scan, cast: Cast) -> tuple[list[Edit], str] | None:
    """(edits, include block) for the idiom around ``cast``, or None when it is not one."""
    init = cast.node.parent
    if init is not None and init.type == "declaration" and init.parent is not None \
            and init.parent.type == "condition_clause" and init.child_by_field_name("value") == cast.node:
        return _if_fix(scan, cast, init)
    decl = init.parent if init is not None else None
    if init is None or decl is None or init.type != "init_declarator" or decl.type != "declaration" \
            or init.child_by_field_name("value") != cast.node or decl.parent is None \
            or decl.parent.type != "compound_statement" or len(decl.children_by_field_name("declarator")) != 1:
        return None
    var_node = _name_node(init.child_by_field_name("declarator"))
    operand = cast_operand(cast.node)
    if var_node is None or operand is None or not pure(operand) or not _own_lines(scan, decl):
        return None
    var = text_of(var_node)
    checks: list[tuple[Node, bool]] = []
    comms: list[Node] = []
    for n in walk(decl.parent):
        if n.type != "identifier" or text_of(n) != var or n.start_byte < decl.end_byte:
            continue
        use = _comm_use(n)
        if use is not None:
            comms.append(use)
            continue
        check = _check(n)
        if check is None:
            return None  # any other use: not the idiom
        checks.append(check)
    if not comms:
        return None
    smart = cast.fn != "dynamic_cast"
    edits: list[Edit] = []
    if scan.options.use_shim:
        arg = f"{var}.get()" if cast.fn == "dynamic_pointer_cast" else var
        ty = decl.child_by_field_name("type")
        if ty is not None and scan.resolver.kind_of_type(ty) is Kind.LEGACY:
            edits.append(scan_edit(scan, ty, "auto"))
        edits.append(scan_edit(scan, cast.node, text_of(operand)))
        edits += [scan_edit(scan, c, f"{'' if pos else '!'}ncclx::is_nccl({arg})") for c, pos in checks]
        edits += [scan_edit(scan, c, f"ncclx::comm_ptr({arg})") for c in comms]
        return edits, SHIM_INCLUDE
    var2 = _fresh(scan, f"{var}_nccl2")
    edits.append(_branch(scan, decl, cast, var_node, var2, smart))
    for c, pos in checks:
        other = _renamed(c, var, var2)
        joined = f"{text_of(c)} {'||' if pos else '&&'} {other}"
        edits.append(scan_edit(scan, c, joined if _bare(c) else f"({joined})"))
    for c in comms:
        ternary = f"{var} ? {text_of(c)} : {_renamed(c, var, var2)}"
        edits.append(scan_edit(scan, c, ternary if _bare(c) else f"({ternary})"))
    return edits, GUARDED_INCLUDE


def _if_fix(scan: Scan, cast: Cast, decl: Node) -> tuple[list[Edit], str] | None:
    """``if (auto* pg = dynamic_cast<legacy*>(b)) { ... }`` with no ``else``, whose body uses
    ``pg`` only for members nccl2's class declares too: the same ``if`` for nccl2's class
    follows under ``__has_include`` (or, with --use-shim and only ``getCommPtr()``, the
    condition becomes ``ncclx::is_nccl(b)``)."""
    clause = decl.parent
    stmt = clause.parent if clause is not None else None
    operand = cast_operand(cast.node)
    if stmt is None or stmt.type != "if_statement" or stmt.child_by_field_name("alternative") \
            or operand is None or not pure(operand) or not _own_lines(scan, stmt):
        return None
    var_node = _name_node(decl.child_by_field_name("declarator"))
    body = stmt.child_by_field_name("consequence")
    if var_node is None or body is None:
        return None
    var = text_of(var_node)
    uses = [n for n in walk(body) if n.type == "identifier" and text_of(n) == var]
    members = [n.parent for n in uses]
    if not uses or any(m is None or m.type != "field_expression" or m.child_by_field_name("argument") not in uses
                       or text_of(m.child_by_field_name("field")) in LEGACY_ONLY for m in members):
        return None
    comms = [c for c in map(_comm_use, uses) if c is not None]
    if scan.options.use_shim and len(comms) == len(uses):
        arg = f"{text_of(operand)}.get()" if cast.fn == "dynamic_pointer_cast" else text_of(operand)
        return ([scan_edit(scan, decl, f"ncclx::is_nccl({arg})")]
                + [scan_edit(scan, c, f"ncclx::comm_ptr({arg})") for c in comms]), SHIM_INCLUDE
    # The new ``if`` follows this one in its block (after the ``if`` of a braceless body it
    # would run whatever that tested), and it copies the body: not a body that casts to the
    # legacy class again (the copy would, where the object is nccl2's).
    if stmt.parent is None or stmt.parent.type != "compound_statement" \
            or any(c.node.id != cast.node.id and c.kind in (Kind.LEGACY, Kind.LEGACY_SUB)
                   and stmt.start_byte <= c.node.start_byte < stmt.end_byte for c in scan.casts):
        return None
    text = scan.src.text
    start, end = scan.src.char(stmt.start_byte), scan.src.char(stmt.end_byte)
    indent = text[text.rfind("\n", 0, start) + 1:start]
    line_end = text.find("\n", end)
    line_end = len(text) if line_end < 0 else line_end + 1
    nl = "\r\n" if text[:line_end].endswith("\r\n") else "\n"
    swaps = [(n.start_byte, n.end_byte) for n in walk(decl)
             if n.type in ("qualified_identifier", "type_identifier")
             and (n.parent is None or n.parent.type != "qualified_identifier")
             and scan.resolver.kind_of_name(text_of(n), n.start_byte) is Kind.LEGACY]
    copy = text_of(stmt)
    for s, e in sorted(swaps, reverse=True):
        copy = copy[: s - stmt.start_byte] + _NCCL2 + copy[e - stmt.start_byte:]
    block = f"#if __has_include(<{NCCL2_HEADER}>){nl}{indent}{copy}{nl}#endif{nl}"
    if not text[:line_end].endswith("\n"):
        block = nl + block.rstrip("\r\n")
    return [Edit(line_end, line_end, block)], GUARDED_INCLUDE


def _branch(scan: Scan, decl: Node, cast: Cast, var_node: Node, var2: str, smart: bool) -> Edit:
    """The guarded declaration of ``var2`` after ``decl``'s line."""
    text = scan.src.text
    start, end = scan.src.char(decl.start_byte), scan.src.char(decl.end_byte)
    line_start = text.rfind("\n", 0, start) + 1
    indent = text[line_start:start]
    line_end = text.find("\n", end)
    line_end = len(text) if line_end < 0 else line_end + 1
    nl = "\r\n" if text[:line_end].endswith("\r\n") else "\n"
    # The nccl2 declaration: the same text, every legacy class name and the variable swapped.
    swaps = [(n.start_byte, n.end_byte, _NCCL2) for n in walk(decl)
             if n.type in ("qualified_identifier", "type_identifier")
             and (n.parent is None or n.parent.type != "qualified_identifier")
             and scan.resolver.kind_of_name(text_of(n), n.start_byte) is Kind.LEGACY]
    swaps.append((var_node.start_byte, var_node.end_byte, var2))
    body = text_of(decl)
    for s, e, new in sorted(swaps, reverse=True):
        body = body[: s - decl.start_byte] + new + body[e - decl.start_byte:]
    target = text_of(cast.target)
    if not smart:
        empty = f"{target} {var2} = nullptr;"
    else:
        wrapper = "std::shared_ptr" if cast.fn.endswith("pointer_cast") and "intrusive" not in cast.fn \
            else "c10::intrusive_ptr"
        empty = f"{wrapper}<{target}> {var2};"
    block = (f"#if __has_include(<{NCCL2_HEADER}>){nl}{indent}{body}{nl}#else{nl}"
             f"{indent}{empty}  // no nccl2 class before torch 2.14{nl}#endif{nl}")
    if not text[:line_end].endswith("\n"):
        block = nl + block.rstrip("\r\n")
    return Edit(line_end, line_end, block)


def _name_node(d: Node | None) -> Node | None:
    while d is not None and d.type in ("pointer_declarator", "reference_declarator"):
        d = d.child_by_field_name("declarator") or (d.named_children[-1] if d.named_children else None)
    return d if d is not None and d.type == "identifier" else None


def _own_lines(scan: Scan, decl: Node) -> bool:
    """The declaration starts its line and nothing but a comment follows it."""
    text = scan.src.text
    start, end = scan.src.char(decl.start_byte), scan.src.char(decl.end_byte)
    before = text[text.rfind("\n", 0, start) + 1:start]
    after_end = text.find("\n", end)
    after = text[end: len(text) if after_end < 0 else after_end].strip()
    return not before.strip() and (not after or after.startswith("//"))


def _comm_use(n: Node) -> Node | None:
    """``var->getCommPtr()``: the call node."""
    f = n.parent
    call = f.parent if f is not None else None
    if f is None or call is None or f.type != "field_expression" or f.child_by_field_name("argument") != n \
            or text_of(f.child_by_field_name("field")) != "getCommPtr" or call.type != "call_expression":
        return None
    args = call.child_by_field_name("arguments")
    return call if args is not None and not args.named_children else None


def _check(n: Node) -> tuple[Node, bool] | None:
    """(the null test, True if it holds for a non-null value) for ``n`` in a null test."""
    p = n.parent
    if p is None:
        return None
    if p.type == "unary_expression" and text_of(p.child_by_field_name("operator")) == "!":
        return p, False
    if p.type == "binary_expression":
        op = text_of(p.child_by_field_name("operator"))
        others = [c for c in (p.child_by_field_name("left"), p.child_by_field_name("right")) if c is not None and c != n]
        if op in ("==", "!=") and len(others) == 1 and (others[0].type == "null" or text_of(others[0]) in ("NULL", "nullptr")):
            return p, op == "!="
        return None
    if p.type == "condition_clause":
        return n, True
    if p.type == "argument_list" and p.named_children and p.named_children[0] == n:
        call = p.parent
        fn = call.child_by_field_name("function") if call is not None else None
        if text_of(fn) in _CHECKS:
            return n, True
    return None


def _bare(n: Node) -> bool:
    """No parentheses needed: a whole condition, argument, initializer or return value."""
    p = n.parent
    return p is not None and p.type in ("condition_clause", "argument_list", "init_declarator", "return_statement",
                                        "parenthesized_expression")


def _renamed(n: Node, var: str, var2: str) -> str:
    """``n``'s text with each use of ``var`` renamed ``var2``."""
    body = text_of(n)
    spans = [(m.start_byte - n.start_byte, m.end_byte - n.start_byte) for m in walk(n)
             if m.type == "identifier" and text_of(m) == var]
    for s, e in sorted(spans, reverse=True):
        body = body[:s] + var2 + body[e:]
    return body


def _fresh(scan: Scan, name: str) -> str:
    taken = set(re.findall(r"\b" + re.escape(name) + r"\w*", scan.src.text))
    out, k = name, 2
    while out in taken:
        out, k = f"{name}{k}", k + 1
    return out
