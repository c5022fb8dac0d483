"""NCX301-NCX306 over an indexed C++ file (:class:`._index.Scan`): what is wrong and where.

A rule says what a fix would need (the cast, the node and its replacement); whether and how
to rewrite is :mod:`._fix`'s.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field

from tree_sitter import Node

from ..._model import FixKind
from .._text import Edit
from ._bindings import binding_calls, function_declarators, may_bind
from ._index import NCCL2_HEADER, Cast, Scan, cast_operand, declarator_name, function_of
from ._members import LEGACY_ONLY
from ._names import Kind, text_of
from ._parse import find, walk
from ._values import strip

__all__ = ["Hit", "Unreadable", "hits", "unreadable"]


@dataclass
class Hit:
    offset: int  # file byte offset
    code: str
    message: str
    fix: FixKind = FixKind.NONE  # set by ._fix with the edits
    detail: str = ""
    edits: list[Edit] = field(default_factory=list)  # character offsets
    include: str = ""  # the include block an applied fix needs (once per file)
    cast: Cast | None = None  # NCX301/302: the cast reported
    node: Node | None = None  # the node a replacement would take
    replacement: str = ""  # its new text, when a rule can say it

# What a rule would report, as text: a cast to the class, a base class, a compare with "nccl".
_REPORTABLE = re.compile(
    rb"_cast\s*<[^;{}]*?ProcessGroupNCCL"
    rb"|\(\s*(?:const\s+)?[\w:]*ProcessGroupNCCL\s*[*&]\s*\)"
    rb"|\b(?:public|protected|private)\s+(?:virtual\s+)?[\w:]*ProcessGroupNCCL\b"
    rb"|getBackendName\(\)\s*[=!]=\s*\"nccl\"|\"nccl\"\s*[=!]=[^;]*getBackendName\(")
_GUARDED_CAST = "dynamic_cast<c10d::nccl2::ProcessGroupNCCL*>"


@dataclass(frozen=True)
class Unreadable:
    """A region the grammar could not read that holds what a rule would report."""

    start: int  # byte range of the region
    end: int
    line: int  # where the grammar first failed in it (1-based)
    column: int

    def message(self) -> str:
        return (f"cannot parse C++ at line {self.line}, column {self.column} (tree-sitter's C++ grammar): "
                "fix the syntax there, or --exclude the file")


def unreadable(scan: Scan) -> list[Unreadable]:
    """The regions the grammar could not read that hold what a rule would report (a cast to
    the class, a base class, a compare with "nccl"); an unreadable region elsewhere (an
    attribute macro, a kernel launch in a .cpp file) costs nothing."""
    out: list[Unreadable] = []
    stack = [scan.root]
    while stack:
        n = stack.pop()
        if n.type == "ERROR" or n.is_missing:
            around = _statement(n) if n.is_missing else n  # a missing token: the statement it breaks
            chunk = scan.parsed[around.start_byte:around.end_byte]
            for m in _REPORTABLE.finditer(chunk):
                at = around.start_byte + m.start()
                if not _in_comment(scan.root, at):
                    row, col = _innermost_error(n, at).start_point
                    out.append(Unreadable(around.start_byte, around.end_byte, row + 1, col + 1))
                    break
            continue
        if n.has_error:
            stack.extend(n.children)
    return sorted(out, key=lambda u: u.start)


def _innermost_error(n: Node, at: int) -> Node:
    """The smallest ERROR node in ``n`` holding byte ``at`` (``n`` itself when none)."""
    inner = next((c for c in n.children if c.start_byte <= at < c.end_byte and c.has_error), None)
    while inner is not None:
        if inner.type == "ERROR":
            n = inner
        inner = next((c for c in inner.children if c.start_byte <= at < c.end_byte and c.has_error), None)
    return n


def _statement(n: Node) -> Node:
    p = n
    while p.parent is not None and not p.type.endswith(("statement", "declaration", "definition")):
        p = p.parent
    return p


def _in_comment(root: Node, byte: int) -> bool:
    n = root.descendant_for_byte_range(byte, byte + 1)
    return n is not None and n.type in ("comment", "string_content", "string_literal", "raw_string_literal")


def hits(scan: Scan) -> Iterator[Hit]:
    for cast in scan.casts:
        if cast.kind is Kind.NCCL2 or scan.handles_nccl2(cast.node, cast.unit):
            continue
        if cast.unit is scan.main and _not_from_torch(scan, cast):
            continue
        yield _cast_hit(scan, cast)
    yield from _constructions(scan)
    yield from _members(scan)
    yield from _name_compares(scan)
    yield from _bindings(scan)
    yield from _subclasses(scan)


def _cls(cast: Cast) -> str:
    return "legacy ProcessGroupNCCL subclass" if cast.kind is Kind.LEGACY_SUB else "legacy ProcessGroupNCCL"


def _cast_hit(scan: Scan, cast: Cast) -> Hit:
    start = cast.unit.start(cast.node)
    operand = cast_operand(cast.node)
    arg = text_of(operand) if operand is not None else "backend"
    shim = f"`ncclx::comm_ptr({arg})` / `ncclx::is_nccl({arg})` from <ncclx/compat.h>"
    if cast.checked:
        hit = Hit(start, "NCX301", f"{cast.fn} to {_cls(cast)}: null under nccl2",
                  detail=(f"Under torch 2.15's nccl2 the backend is c10d::nccl2::ProcessGroupNCCL, a sibling class, "
                          f"so this cast gives null. Add a second branch, `{_GUARDED_CAST}({arg})` under "
                          f"`#if __has_include(<{NCCL2_HEADER}>)` (with that include), or use {shim}."))
        hit.cast = cast
        return hit
    message = f"{cast.fn} to {_cls(cast)}: undefined behaviour under nccl2"
    return Hit(start, "NCX302", message if len(message) <= 88 else message.replace("undefined behaviour", "UB"),
               detail=(f"Under nccl2 the backend is c10d::nccl2::ProcessGroupNCCL, not the legacy class: this "
                       f"unchecked cast is undefined behaviour. Replace it with {shim}, or with "
                       f"`{_GUARDED_CAST}({arg})` next to a dynamic_cast to the legacy class, under "
                       f"`#if __has_include(<{NCCL2_HEADER}>)`."))


def _short(name: str, width: int = 20) -> str:
    return name if len(name) <= width else name[: width - 3] + "..."


# --- NCX307: the legacy class built by the code itself ---
def _constructions(scan: Scan) -> Iterator[Hit]:
    for b in scan.values.builds:
        if b.kind is not Kind.LEGACY or _builds_both(scan, b.node):
            continue
        what = f"`{b.builder}`" if b.builder == "new" else f"`{b.builder}<...>`"
        yield Hit(b.node.start_byte, "NCX307", f"{what} builds legacy ProcessGroupNCCL: goes with the rollback",
                  detail=("An object the code builds itself is the legacy class on every torch that ships it, so "
                          "casts and calls on it keep working under nccl2; but the legacy class stays only as "
                          "torch 2.15's rollback (TORCH_DIST_USE_NCCL2=0, \"nccl-legacy\"), which has no "
                          "announced future, and this line stops compiling when it goes. Build "
                          f"`c10d::nccl2::ProcessGroupNCCL` (torch 2.14+, the same constructor arguments) under "
                          f"`#if __has_include(<{NCCL2_HEADER}>)`, with the legacy construction in its `#else` "
                          "for torch 2.13."),
                  node=b.node)


def _builds_both(scan: Scan, n: Node) -> bool:
    """Is the construction ``n`` in a function that also builds nccl2's class, or under an
    ``#if``/``#else`` whose condition names nccl2 (its header, a macro for it)?"""
    lo, hi = scan.context(n, scan.main)
    if any(lo <= at < hi for at in scan.values.nccl2_builds):
        return True
    p = n.parent
    while p is not None:
        if p.type in ("preproc_if", "preproc_elif", "preproc_ifdef", "preproc_elifdef"):
            cond = p.child_by_field_name("condition") or p.child_by_field_name("name")
            if cond is not None and b"nccl2" in scan.src.data[cond.start_byte:cond.end_byte].lower():
                return True
        p = p.parent
    return False


# --- NCX303: legacy-only members ---
# name -> (start, end, legacy?) for each declaration of it: where it is in scope, and its class
_Decls = dict[str, list[tuple[int, int, bool]]]


def _legacy_vars(scan: Scan, fn: Node) -> _Decls:
    """The variables (and parameters) of ``fn``, each declaration with its scope (its block; a
    condition's ``if``, ``while`` or ``switch``; a ``for``'s loop; a parameter's function) and
    whether it is typed as, or initialised from a cast to, the legacy class."""
    out: _Decls = {}
    cast_at = {c.node.id: c for c in scan.casts if c.unit is scan.main}
    for n in walk(fn):
        if n.type not in ("declaration", "parameter_declaration", "optional_parameter_declaration"):
            continue
        ty = n.child_by_field_name("type")
        typed = ty is not None and scan.resolver.kind_of_type(ty) is Kind.LEGACY
        end = _scope_end(n, fn)
        for d in n.children_by_field_name("declarator"):
            value = _value_of(n, d)
            legacy = typed or (value is not None and (
                (value.id in cast_at and cast_at[value.id].kind is Kind.LEGACY) or _const_cast_to_legacy(scan, value)))
            name = declarator_name(d)
            if name:
                out.setdefault(name, []).append((n.start_byte, end, legacy))
    return out


def _value_of(decl: Node, d: Node) -> Node | None:
    """The value declarator ``d`` of ``decl`` is initialised with (``if (auto* p = ...)``: a
    condition's declaration holds it itself)."""
    if d.type == "init_declarator":
        return d.child_by_field_name("value")
    return decl.child_by_field_name("value") if decl.parent is not None and decl.parent.type == "condition_clause" \
        else None


def _scope_end(decl: Node, fn: Node) -> int:
    """Where the scope of a declaration in ``fn`` ends: its block's end, through ``#if`` arms and
    ``case`` labels (a ``for``'s for its init); a condition's ``if``, ``while`` or ``switch``;
    a parameter's function."""
    p = decl.parent
    if p is not None and p.type == "condition_clause":
        return p.parent.end_byte if p.parent is not None else fn.end_byte
    if decl.type != "declaration":
        return fn.end_byte
    while p is not None and p.type not in ("compound_statement", "for_statement", "translation_unit"):
        p = p.parent
    return p.end_byte if p is not None else fn.end_byte


def _legacy_at(names: _Decls, name: str, at: int) -> bool:
    """Is ``name`` at ``at`` a legacy variable (by the innermost declaration in scope there)?"""
    held = [(start, legacy) for start, end, legacy in names.get(name, ()) if start < at < end]
    return bool(held) and max(held)[1]


def _const_cast_to_legacy(scan: Scan, n: Node) -> bool:
    fn = n.child_by_field_name("function") if n.type == "call_expression" else None
    args = fn.child_by_field_name("arguments") if fn is not None and fn.type == "template_function" else None
    return text_of(fn.child_by_field_name("name") if fn is not None else None) == "const_cast" and args is not None \
        and bool(args.named_children) and scan.resolver.kind_of_type(args.named_children[0]) is Kind.LEGACY


def _not_from_torch(scan: Scan, cast: Cast) -> bool:
    """Is the operand of ``cast`` never nccl2's object: one the file built itself as the legacy
    class, a ``c10d::ProcessGroup`` (not a Backend since torch 2.0: the cast is null on every
    torch), or already a legacy pointer or reference cast to the file's own subclass (the break
    is where that pointer came from)?"""
    operand = cast_operand(cast.node)
    if operand is None:
        return False
    if scan.self_built(operand) or scan.from_process_group(operand):
        return True
    return (cast.kind is Kind.LEGACY_SUB or not cast.checked) and _from_legacy(scan, cast, operand)


def _from_legacy(scan: Scan, cast: Cast, operand: Node) -> bool:
    """Is ``operand`` already a pointer or reference to the legacy class: a parameter or local
    of that type (of the function or the lambda around), else a member of a class of the file,
    a call of a function of the file declared to return one, its ``.get()`` or ``*``, or a
    const_cast to it?  The same in every dialect: the grammars differ only in CUDA's syntax."""
    operand = strip(operand)
    if operand.type == "call_expression":
        f = operand.child_by_field_name("function")
        if f is not None and f.type == "field_expression" and text_of(f.child_by_field_name("field")) == "get":
            operand = strip(f.child_by_field_name("argument") or operand)
    if operand.type == "identifier":
        scope = function_of(cast.node) or _lambda_of(cast.node)
        held = [(start, legacy) for start, end, legacy in (_legacy_vars(scan, scope) if scope is not None else {})
                .get(text_of(operand), ()) if start < operand.start_byte < end]
        if held:
            return max(held)[1]
    if operand.type in ("identifier", "field_expression"):
        name = text_of(operand.child_by_field_name("field")) if operand.type == "field_expression" else text_of(operand)
        ty = scan.declared_type(operand, name) if name else None
        return ty is not None and scan.resolver.kind_of_type(ty) is Kind.LEGACY
    if operand.type == "call_expression" and not _const_cast_to_legacy(scan, operand):
        return _returns_legacy(scan, operand)
    return _const_cast_to_legacy(scan, operand)


def _lambda_of(n: Node) -> Node | None:
    """The outermost lambda holding ``n`` (a lambda at namespace scope has no function)."""
    found, p = None, n.parent
    while p is not None:
        if p.type == "lambda_expression":
            found = p
        p = p.parent
    return found


def _returns_legacy(scan: Scan, call: Node) -> bool:
    """Is every declaration in the file of the function ``call`` calls declared to return the
    legacy class (a reference, pointer or smart pointer to it)?"""
    fn = call.child_by_field_name("function")
    while fn is not None and fn.type in ("qualified_identifier", "field_expression"):
        fn = fn.child_by_field_name("name" if fn.type == "qualified_identifier" else "field")
    name = text_of(fn) if fn is not None and fn.type in ("identifier", "field_identifier") else ""
    if not name:
        return False
    kinds = []
    for d in find(scan.root, scan.cuda, ("function_declarator",)).get("function_declarator", []):
        inner = d.child_by_field_name("declarator")
        while inner is not None and inner.type == "qualified_identifier":
            inner = inner.child_by_field_name("name")
        if text_of(inner) != name:
            continue
        decl = d.parent
        while decl is not None and decl.type in ("pointer_declarator", "reference_declarator"):
            decl = decl.parent
        ty = decl.child_by_field_name("type") if decl is not None else None
        kinds.append(ty is not None and scan.resolver.kind_of_type(ty) is Kind.LEGACY)
    return bool(kinds) and all(kinds)


def _cast_not_from_torch(scan: Scan, arg: Node) -> bool:
    """``arg`` is a cast (or a variable set from one) that :func:`_not_from_torch` clears.  A
    variable declared more than once before ``arg`` (the arms of an ``#if``) must be set from
    such casts in each declaration that is not a literal (``constexpr bool p = false;``)."""
    fn = function_of(arg)
    values = [arg]
    if arg.type == "identifier" and fn is not None:
        values = [v for n in walk(fn) if n.type == "declaration" and n.start_byte < arg.start_byte < _scope_end(n, fn)
                  for d in n.children_by_field_name("declarator") if declarator_name(d) == text_of(arg)
                  and (v := _value_of(n, d)) is not None and v.type not in _LITERALS] or [arg]
    casts = {c.node.id: c for c in scan.casts}
    return all(v.id in casts and _not_from_torch(scan, casts[v.id]) for v in values)


_LITERALS = frozenset({"true", "false", "null", "nullptr", "number_literal"})


def _members(scan: Scan) -> Iterator[Hit]:
    cast_at = {c.node.id for c in scan.casts if c.unit is scan.main and c.kind is Kind.LEGACY}
    fns: dict[int, _Decls] = {}
    for n in scan.nodes["field_expression"]:
        member = text_of(n.child_by_field_name("field"))
        if member not in LEGACY_ONLY:
            continue
        arg = n.child_by_field_name("argument")
        while arg is not None and arg.type == "parenthesized_expression" and arg.named_children:
            arg = arg.named_children[0]
        if arg is None:
            continue
        fn = function_of(n)
        legacy = arg.id in cast_at
        if not legacy and arg.type == "identifier" and fn is not None:
            names = fns.setdefault(fn.id, _legacy_vars(scan, fn))
            legacy = _legacy_at(names, text_of(arg), n.start_byte)
        if not legacy or scan.handles_nccl2(n, scan.main) or scan.self_built(arg) or _cast_not_from_torch(scan, arg):
            continue
        field_node = n.child_by_field_name("field")
        assert field_node is not None
        base = " (nccl2 reaches only c10d::Backend's default)" if LEGACY_ONLY[member] else ""
        yield Hit(field_node.start_byte, "NCX303", f"`{member}` is legacy-only: nccl2's ProcessGroupNCCL has no counterpart",
                  detail=(f"c10d::nccl2::ProcessGroupNCCL does not declare {member}{base} (torch 2.15.0 headers). "
                          "Keep the call on the legacy branch only, behind a dynamic_cast to the legacy class, "
                          "and give the nccl2 branch its own path."))


# --- NCX304: backend name compared with "nccl" ---
def _name_compares(scan: Scan) -> Iterator[Hit]:
    for n in scan.nodes["binary_expression"]:
        op = text_of(n.child_by_field_name("operator"))
        left, right = n.child_by_field_name("left"), n.child_by_field_name("right")
        if op not in ("==", "!=") or left is None or right is None:
            continue
        lit, other = (left, right) if _is_str(left, "nccl") else (right, left) if _is_str(right, "nccl") else (None, None)
        if lit is None or other is None or not _names_backend(scan, other):
            continue
        if _compares_nccl2(n, text_of(other)):
            continue
        x = text_of(other)
        joined = f'{x} == "nccl" || {x} == "nccl2"' if op == "==" else f'{x} != "nccl" && {x} != "nccl2"'
        parent = n.parent
        bare = parent is not None and parent.type in ("condition_clause", "parenthesized_expression",
                                                      "argument_list", "return_statement", "init_declarator")
        new = joined if bare else f"({joined})"
        hit = Hit(n.start_byte, "NCX304", 'backend name compared with "nccl": nccl2 answers "nccl2"',
                  detail=(f'Under torch 2.15 getBackendName() of the default NCCL backend is "nccl2". Replace '
                          f"`{text_of(n)}` with `{new}` (and check what the branch does with the backend: "
                          "a cast to the legacy class there fails under nccl2)."))
        hit.node, hit.replacement = n, new
        yield hit


def _is_str(n: Node, value: str) -> bool:
    return n.type == "string_literal" and text_of(n) == f'"{value}"'


def _names_backend(scan: Scan, n: Node) -> bool:
    """Is ``n`` a backend's name: ``b->getBackendName()`` on a c10d::Backend, or a variable
    of the function set from one?  A c10d::ProcessGroup answers "nccl" for the default
    "nccl" under nccl2 too, so its getBackendName() is not one."""
    call = _name_call(n)
    if call is None and n.type == "identifier":
        fn = function_of(n)
        for d in walk(fn) if fn is not None else ():
            value = d.child_by_field_name("value") if d.type == "init_declarator" else None
            if value is not None and declarator_name(d) == text_of(n) and d.start_byte < n.start_byte:
                call = _name_call(value)
    if call is None:
        return False
    fn = call.child_by_field_name("function")
    receiver = fn.child_by_field_name("argument") if fn is not None else None
    return receiver is None or not (_is_process_group(scan, receiver) or scan.self_built(receiver)
                                    or _cast_not_from_torch(scan, strip(receiver)))


def _name_call(n: Node) -> Node | None:
    """``n`` itself when it is a ``x->getBackendName()`` / ``x.getBackendName()`` call."""
    fn = n.child_by_field_name("function") if n.type == "call_expression" else None
    if fn is not None and fn.type == "field_expression" and text_of(fn.child_by_field_name("field")) == "getBackendName":
        return n
    return None


_PG_TYPE = re.compile(r"\bProcessGroup\b")


def _is_process_group(scan: Scan, receiver: Node) -> bool:
    """Is the receiver a c10d::ProcessGroup (by its declared type, else by its name)?"""
    if receiver.type == "call_expression":
        return False  # pg->getBackend(...) and the like return a Backend
    name = receiver.child_by_field_name("field") if receiver.type == "field_expression" else receiver
    spelled = text_of(name)
    for d in scan.nodes["function_definition"]:
        if not d.start_byte <= receiver.start_byte < d.end_byte:
            continue
        for decl in walk(d):
            if decl.type in ("parameter_declaration", "declaration") and any(
                    declarator_name(x) == spelled for x in decl.children_by_field_name("declarator")):
                return bool(_PG_TYPE.search(text_of(decl.child_by_field_name("type"))))
    low = spelled.lower()
    return "backend" not in low and ("process_group" in low or "processgroup" in low or low.rstrip("_") in ("pg", "group"))


def _compares_nccl2(n: Node, operand: str) -> bool:
    """Does the logical expression around ``n`` also compare ``operand`` with "nccl2"?"""
    top = n
    while top.parent is not None and (top.parent.type == "parenthesized_expression" or (
            top.parent.type == "binary_expression"
            and text_of(top.parent.child_by_field_name("operator")) in ("&&", "||"))):
        top = top.parent
    for m in walk(top):
        if m.type == "binary_expression" and any(_is_str(c, "nccl2") for c in m.named_children) \
                and any(text_of(c) == operand for c in m.named_children):
            return True
    return False


# --- NCX305: bindings ---
def _bindings(scan: Scan) -> Iterator[Hit]:
    """Legacy parameters of the functions bound in this file (lambdas, definitions and
    declarations), and of this file's functions that another file of the run binds."""
    local = may_bind(scan.parsed)
    scan.options.project.asked("cpp_bound", "")  # what the other files bind: a cross-file fact (_cache)
    project = dict(scan.options.cpp_bound)
    if not local and not project:
        return
    functions = function_declarators(scan.root, find(scan.root, scan.cuda, ("function_declarator",)))
    seen: set[int] = set()
    here: set[str] = set()
    for b in binding_calls(scan.nodes["call_expression"]) if local else ():
        if not b.target:
            yield from _legacy_params(scan, b.params, b.exposed, seen)
            continue
        here.add(b.target)
        for d in functions.get(b.target, []):
            yield from _legacy_params(scan, d.child_by_field_name("parameters"), b.exposed, seen)
    for name, site in project.items():
        if name in here:
            continue
        for d in functions.get(name, []):
            yield from _legacy_params(scan, d.child_by_field_name("parameters"), name, seen, site)


def _legacy_params(scan: Scan, params: Node | None, exposed: str, seen: set[int], site: str = "") -> Iterator[Hit]:
    for p in params.named_children if params is not None else ():
        ty = p.child_by_field_name("type")
        if ty is None or p.id in seen or scan.resolver.kind_of_type(ty) is not Kind.LEGACY:
            continue
        seen.add(p.id)
        core = scan.resolver.core_type(ty)
        assert core is not None
        new = text_of(p)[: core.start_byte - p.start_byte] + "c10d::Backend" + text_of(p)[core.end_byte - p.start_byte:]
        yield Hit(ty.start_byte, "NCX305", f"binding `{_short(exposed)}` takes legacy ProcessGroupNCCL: TypeError under nccl2",
                  detail=(("" if not site else f"Bound to Python at {site}. ")
                          + "Python callers pass the group's backend, which under torch 2.15 is "
                          + f"c10d::nccl2::ProcessGroupNCCL: pybind11 rejects it. Take `{new}` and get the "
                          + "communicator with `ncclx::comm_ptr(...)` from <ncclx/compat.h>, or cast to both classes."))


# --- NCX306: subclasses ---
def _subclasses(scan: Scan) -> Iterator[Hit]:
    for n in scan.nodes["base_class_clause"]:
        for b in n.named_children:
            if b.type in ("qualified_identifier", "type_identifier", "template_type") \
                    and scan.resolver.kind_of_type(b) is Kind.LEGACY:
                cls = n.parent.child_by_field_name("name") if n.parent is not None else None
                yield Hit(b.start_byte, "NCX306", f"`{_short(text_of(cls))}` derives from legacy ProcessGroupNCCL: goes with the rollback",
                          detail=("Under torch 2.15 \"nccl\" builds c10d::nccl2::ProcessGroupNCCL; a custom backend "
                                  "derived from the legacy class keeps working only while the rollback "
                                  "(TORCH_DIST_USE_NCCL2=0, \"nccl-legacy\") does, which has no announced future. "
                                  "Derive from c10d::Backend, or wrap the backend the group already has."))

