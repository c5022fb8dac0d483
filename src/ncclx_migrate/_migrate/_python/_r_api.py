"""API-shape rules: NCX110, NCX111, NCX112, NCX113, NCX121, NCX133."""

from __future__ import annotations

import functools
import re

import libcst as cst

from .._model import FixKind
from ._clashes import shim_import
from ._ctx import Analyzer, Edit, ImportSpec, Pending, on
from ._edits import blank_head, extend_literal, replace_with
from ._reach import Path, reaching
from ._walk import walk
from ._wrap import statement_expr, wrap_edit

__all__: list[str] = []

_NCCL_CLASSES = ("ProcessGroupNCCL", "ProcessGroupNCCL2", "ProcessGroupNCCLLazy")
_NCCL_SET = '("nccl", "nccl2", "nccl-legacy", "nccl-lazy")'


def _dist_ref(a: Analyzer) -> tuple[str, list[tuple[str, str | None]]] | None:
    """How to spell torch.distributed in new code, plus the import it needs (None: the
    module does not import torch unconditionally, so a fix may not add that import)."""
    md = _module_dist(a)
    return None if md is None else (md[0], md[1])


_CLASSES_CONST = "_NCCL_PG_CLASSES"


def _dist_alias(a: Analyzer, stmt: cst.SimpleStatementLine) -> tuple[str | None, bool]:
    """(the name ``stmt`` binds to torch.distributed, whether it imports torch at all)."""
    name, torch_seen = None, False
    for small in stmt.body:
        if isinstance(small, cst.Import):
            for alias in small.names:
                full = a.code(alias.name)
                torch_seen = torch_seen or full == "torch" or full.startswith("torch.")
                if full == "torch.distributed" and alias.asname is not None and isinstance(alias.asname.name, cst.Name):
                    name = alias.asname.name.value
        elif isinstance(small, cst.ImportFrom) and small.module is not None:
            mod = a.code(small.module)
            torch_seen = torch_seen or mod == "torch" or mod.startswith("torch.")
            if mod == "torch" and not isinstance(small.names, cst.ImportStar) and not small.relative:
                for alias in small.names:
                    if a.code(alias.name) == "distributed":
                        asn = alias.asname.name if alias.asname is not None else alias.name
                        name = asn.value if isinstance(asn, cst.Name) else name
    return name, torch_seen


def _binds(a: Analyzer, body: cst.BaseSuite, name: str) -> bool:
    """Whether a handler body binds ``name`` (``dist = None`` or an import as ``name``)."""
    text = a.code(body)
    return re.search(rf"^\s*{re.escape(name)}\s*=|\bas\s+{re.escape(name)}\b|^\s*import\s+{re.escape(name)}\b",
                     text, re.M) is not None


def _module_dist(a: Analyzer) -> tuple[str, list[tuple[str, str | None]], cst.CSTNode] | None:
    """How module-level code may spell torch.distributed: (spelling, imports to add, the
    top-level statement after which it is bound).  Reuses the name the module binds (also
    in ``try: import ... except ImportError: dist = None``); adds ``import torch.distributed``
    only to a module that imports torch unconditionally at top level; None otherwise (a
    module that imports torch optionally must keep importing without it)."""
    if "module_dist" in a.facts:
        cached: tuple[str, list[tuple[str, str | None]], cst.CSTNode] | None = a.facts["module_dist"]
        return cached
    alias: tuple[str, cst.CSTNode] | None = None
    torch_at: cst.CSTNode | None = None
    last_import: cst.CSTNode | None = None
    leading = True
    for i, stmt in enumerate(a.module.body):
        is_import = False
        if isinstance(stmt, cst.SimpleStatementLine):
            is_import = all(isinstance(x, (cst.Import, cst.ImportFrom)) for x in stmt.body)
            name, torch_seen = _dist_alias(a, stmt)
            if name and alias is None:
                alias = (name, stmt)
            if torch_seen and torch_at is None:
                torch_at = stmt
            if i == 0 and len(stmt.body) == 1 and isinstance(stmt.body[0], cst.Expr):
                is_import = True  # the docstring
        elif isinstance(stmt, cst.Try):
            inner = [x for x in stmt.body.body if isinstance(x, cst.SimpleStatementLine)]
            is_import = len(inner) == len(stmt.body.body)
            for x in inner:
                name, _ = _dist_alias(a, x)
                if name and alias is None and stmt.handlers and all(_binds(a, h.body, name) for h in stmt.handlers):
                    alias = (name, stmt)
        elif isinstance(stmt, cst.If) and "TYPE_CHECKING" in a.code(stmt.test):
            is_import = True
        if leading and is_import:
            last_import = stmt
        elif not is_import:
            leading = False
    result: tuple[str, list[tuple[str, str | None]], cst.CSTNode] | None = None
    body = list(a.module.body)
    def later(x: cst.CSTNode, y: cst.CSTNode | None) -> cst.CSTNode:
        return x if y is None or body.index(x) >= body.index(y) else y  # type: ignore[arg-type]
    if alias is not None:
        result = (alias[0], [], later(alias[1], last_import))
    elif torch_at is not None:
        result = ("torch.distributed", [("torch.distributed", None)], later(torch_at, last_import))
    a.facts["module_dist"] = result
    return result


def _classes_ref(a: Analyzer) -> tuple[str, list[tuple[cst.CSTNode, Edit]], list[tuple[str, str | None]]] | None:
    """The module-level tuple of every NCCL process-group class this torch has, defined
    once after the import block: (its name, the edit that defines it, imports it needs)."""
    if re.search(rf"^{_CLASSES_CONST}\s*=", a.source, re.M):
        return _CLASSES_CONST, [], []
    md = _module_dist(a)
    if md is None:
        return None
    dist, imports, anchor = md
    names = ", ".join(f'"{c}"' for c in _NCCL_CLASSES)
    define = cst.parse_statement(
        f"{_CLASSES_CONST} = tuple(\n"
        f"    getattr({dist}, _n)\n"
        f"    for _n in ({names})\n"
        f"    if hasattr({dist}, _n)\n"
        ")\n"
    )
    # Separated from the imports as the code after them is (a blank line in a module; none in a
    # notebook cell that uses none): the block reads like the rest of the file.
    body: list[cst.CSTNode] = list(a.module.body)
    after = body[body.index(anchor) + 1] if anchor in body and body.index(anchor) + 1 < len(body) else None
    blanks = 1
    if isinstance(after, (cst.SimpleStatementLine, cst.BaseCompoundStatement)):
        blanks = min(1, len(blank_head(after.leading_lines)))
    define = define.with_changes(leading_lines=[
        *[cst.EmptyLine()] * blanks,
        cst.EmptyLine(comment=cst.Comment(
            "# The NCCL process-group classes this torch has (nccl2's is not a ProcessGroupNCCL).")),
    ])

    def edit(u: cst.BaseStatement) -> cst.FlattenSentinel[cst.BaseStatement]:
        return cst.FlattenSentinel([u, define])

    return _CLASSES_CONST, [(anchor, edit)], imports


def _unused_candidates(a: Analyzer, exprs: list[cst.BaseExpression]) -> list[tuple[str, str | None, str | None]]:
    """Module-level ``from M import N [as X]`` imports that ``exprs`` (about to be replaced) use."""
    out: list[tuple[str, str | None, str | None]] = []
    for e in exprs:
        if isinstance(e, cst.Name) and e.value in a.scopes.module_scope.imports:
            q = a.scopes.module_scope.imports[e.value]
            mod, _, obj = q.rpartition(".")
            if mod and not mod.startswith("."):
                out.append((mod, obj, e.value if e.value != obj else None))
    return out


def _is_nccl_class(a: Analyzer, node: cst.BaseExpression) -> bool:
    return a.dist(node) == "ProcessGroupNCCL"


# --- NCX110 ---
@on(cst.Call, "NCX110")
def _isinstance(a: Analyzer, node: cst.Call) -> None:
    if not isinstance(node.func, cst.Name) or node.func.value not in ("isinstance", "issubclass"):
        return
    if len(node.args) != 2:
        return
    cls = node.args[1].value
    msg = ("isinstance against ProcessGroupNCCL is False under nccl2 (the torch 2.15 default) and "
           "nccl-lazy: ProcessGroupNCCL2 is a sibling class, not a subclass")
    if not (_is_nccl_class(a, cls) or (isinstance(cls, cst.Tuple) and any(_is_nccl_class(a, e.value) for e in cls.elements))):
        return
    if a.qnames(node.func) != {f"builtins.{node.func.value}"}:
        return  # a local isinstance
    legacy_use = _legacy_context(a)
    if legacy_use:
        a.report(node, "NCX110", "isinstance against ProcessGroupNCCL is False under nccl2: decide per branch",
                 detail=msg + f". Not rewritten: the code around it relies on the legacy class "
                 f"({legacy_use}), which nccl2 lacks, so this may mean \"is it legacy?\"; decide per branch "
                 "(ncclx_migrate.backend.is_nccl tests for any NCCL).")
        return
    if _is_nccl_class(a, cls):
        if a.options.use_shim and node.func.value == "isinstance":
            short = "isinstance against ProcessGroupNCCL is False under nccl2: use is_nccl_backend()"
            shim = shim_import(a, "is_nccl_backend", node)
            if isinstance(shim, str):
                a.report(node, "NCX110", short, detail=msg + f"; use ncclx_migrate.backend.is_nccl_backend. {shim}")
                return
            new: cst.BaseExpression = cst.parse_expression(f"{shim[0]}({a.code(node.args[0].value)})")
            p = a.report(node, "NCX110", short, FixKind.SAFE, replace_with(node, new), [shim[1]],
                         detail=msg + "; use ncclx_migrate.backend.is_nccl_backend (isinstance against every "
                         "NCCL class this torch has: False for anything else, None included).")
            p.unused.extend(_unused_candidates(a, [cls]))
            return
        ref = _classes_ref(a)
        if ref is None:
            a.report(node, "NCX110", _ISINSTANCE_SHORT, detail=msg + f". {_NO_MODULE_TORCH}")
            return
        const, edits, imports = ref
        p = a.report(node, "NCX110", _ISINSTANCE_SHORT, FixKind.SAFE, [*replace_with(cls, cst.Name(const)), *edits],
                     imports, detail=msg + "; test against every NCCL class that exists.")
        p.unused.extend(_unused_candidates(a, [cls]))
        p.reads.append(_CLASSES_CONST)
    else:
        assert isinstance(cls, cst.Tuple)
        ref = _classes_ref(a)
        if ref is None:
            a.report(node, "NCX110", _ISINSTANCE_SHORT, detail=msg + f". {_NO_MODULE_TORCH}")
            return
        const, edits, imports = ref
        star = cst.parse_expression(f"(*{const},)")
        assert isinstance(star, cst.Tuple)
        replaced = [e.value for e in cls.elements if _is_nccl_class(a, e.value)]
        for e in cls.elements:
            if _is_nccl_class(a, e.value):
                edits = [*edits, (e, _starred(star.elements[0]))]
        p = a.report(node, "NCX110", _ISINSTANCE_SHORT, FixKind.SAFE, edits, imports,
                     detail=msg + "; test against every NCCL class that exists.")
        p.unused.extend(_unused_candidates(a, replaced))
        p.reads.append(_CLASSES_CONST)


_ISINSTANCE_SHORT = "isinstance against ProcessGroupNCCL is False under nccl2: test every NCCL class"
_NO_MODULE_TORCH = ("Not rewritten: this module imports torch only optionally (or not at top level), and a fix "
                    "must not make it need torch; test against every NCCL class that exists, e.g. "
                    f"tuple(getattr(dist, n) for n in {_NCCL_SET.replace('nccl', 'ProcessGroupNCCL')} ...), "
                    "or use ncclx_migrate.backend.is_nccl (--use-shim)")
_NO_MODULE_TORCH_111 = ("Not rewritten: this module imports torch only optionally (or not at top level), and a fix "
                        "must not make it need torch")


# Members whose use makes an isinstance mean "is it legacy?".  The NCCL version getters are
# not among them: NCX111 moves instance calls to the class, which has them on every build.
_LEGACY_USE = re.compile(
    r"\.(uid|_group_start|_group_end|_set_default_timeout|_is_initialized|comm_split_count|"
    r"_set_enable_nan_check|NCCL_CTA_POLICY_\w+|"
    r"split_from|split_color)\b|\bProcessGroupNCCL\s*\("
)


def _legacy_context(a: Analyzer) -> str | None:
    """What makes an isinstance test read as "is it the legacy class?": the enclosing
    function (or module) uses legacy-only members, or the test guards a raise/assert."""
    for anc in reversed(a.stack[:-1]):
        if isinstance(anc, cst.Assert):
            return "an assert on the type"
        if isinstance(anc, cst.If):
            body = a.source_of(anc.body)
            if re.search(r"^\s*raise\b", body, re.M):
                return "a type check that raises"
            break
        if isinstance(anc, cst.BaseSuite):
            break
    # The enclosing function first (the likeliest reason), then the whole file: the object
    # an isinstance admits is often returned and used elsewhere (b = nccl_backend(); b.uid).
    for anc in reversed(a.stack[:-1]):
        if isinstance(anc, cst.FunctionDef):
            m = _LEGACY_USE.search(a.source_of(anc))
            if m:
                return m.group(0).strip(".(").strip()
            break
    m = _LEGACY_USE.search(a.source)
    return f"{m.group(0).strip('.(').strip()} in this file" if m else None


def _starred(el: cst.BaseElement) -> Edit:
    def edit(u: cst.Element) -> cst.BaseElement:
        return el.with_changes(comma=u.comma)

    return edit


def _is_nccl_literal(a: Analyzer, node: cst.BaseExpression) -> bool:
    if isinstance(node, cst.SimpleString):
        return node.evaluated_value == "nccl"
    return a.dist(node) == "Backend.NCCL"


def _quote(lit: cst.BaseExpression | None) -> str:
    """The file's quote for the names a fix adds: the one the compared literal uses."""
    return lit.quote if isinstance(lit, cst.SimpleString) and lit.quote in ("'", '"') else '"'


def _nccl_set(a: Analyzer, nccl: cst.BaseExpression) -> str:
    """The four NCCL names, spelled as the file spells the one it compared against
    (``dist.Backend.NCCL`` stays; a single-quoted "nccl" gives single quotes)."""
    q = _quote(nccl)
    first = f"{q}nccl{q}" if isinstance(nccl, cst.SimpleString) else a.code(nccl)
    return "(" + ", ".join([first, *(f"{q}{n}{q}" for n in ("nccl2", "nccl-legacy", "nccl-lazy"))]) + ")"


@on(cst.Comparison, "NCX110")
def _compare(a: Analyzer, node: cst.Comparison) -> None:
    if len(node.comparisons) != 1:
        return
    left, target = node.left, node.comparisons[0]
    op, right = target.operator, target.comparator
    if (isinstance(op, (cst.Is, cst.IsNot, cst.Equal, cst.NotEqual)) and isinstance(left, cst.Call)
            and isinstance(left.func, cst.Name) and left.func.value == "type" and len(left.args) == 1
            and _is_nccl_class(a, right)):
        msg = ("type(...) is ProcessGroupNCCL is False under nccl2 (the torch 2.15 default): "
               "ProcessGroupNCCL2 is a sibling class")
        legacy_use = _legacy_context(a)
        if legacy_use:
            a.report(node, "NCX110", "type(...) is ProcessGroupNCCL is False under nccl2: decide per branch",
                     detail=msg + f". Not rewritten: the code around it relies on the legacy class ({legacy_use}).")
            return
        prefix = "not " if isinstance(op, (cst.IsNot, cst.NotEqual)) else ""
        ref = _classes_ref(a)
        if ref is None:
            a.report(node, "NCX110", "type(...) is ProcessGroupNCCL is False under nccl2: test every NCCL class",
                     detail=msg + f". {_NO_MODULE_TORCH}")
            return
        const, edits, imports = ref
        new = cst.parse_expression(f"{prefix}isinstance({a.code(left.args[0].value)}, {const})")
        p = a.report(node, "NCX110", "type(...) is ProcessGroupNCCL is False under nccl2: test every NCCL class",
                     FixKind.SAFE, [*replace_with(node, new), *edits], imports,
                     detail=msg + "; test against every NCCL class that exists.")
        p.unused.extend(_unused_candidates(a, [right]))
        p.reads.append(_CLASSES_CONST)
        return
    if isinstance(op, (cst.Equal, cst.NotEqual)) and _is_nccl_literal(a, left):
        left, right = right, left
    held = ""  # the test is on a local that holds the answer: where it was assigned
    why_not = ""  # why such a test is not rewritten
    if isinstance(left, cst.Name):
        if not (_is_nccl_literal(a, right) or isinstance(right, (cst.Tuple, cst.List, cst.Set))):
            return
        sources, others = _held_sources(a, left, tuple(a.stack))
        if not sources:
            return
        source, held = sources[0]
        if others:
            why_not = (f" Not rewritten: {a.code(left)} may also hold {others[0]} here, a value that is not "
                       "a backend name get_backend() returned, so the wider test may not fit it.")
    elif isinstance(left, cst.Call):
        source = left
    else:
        return
    func = source.func
    member = a.dist(func)
    is_get_backend = member == "get_backend"
    is_name = isinstance(func, cst.Attribute) and func.attr.value in ("name", "_get_backend_name") and not source.args
    if not (is_get_backend or is_name):
        return
    if isinstance(op, (cst.Equal, cst.NotEqual)) and _is_nccl_literal(a, right):
        neg = isinstance(op, cst.NotEqual)
    elif isinstance(op, (cst.In, cst.NotIn)) and isinstance(right, (cst.Tuple, cst.List, cst.Set)) and any(
        _is_nccl_literal(a, e.value) for e in right.elements
    ):
        neg = isinstance(op, cst.NotIn)
    else:
        return
    if is_name:
        a.report(node, "NCX110",
                 f'{a.code(func).rpartition(".")[2]}() is "custom" or "nccl2" under nccl2: compare dist.get_backend(group)',
                 detail=f'{a.code(func)}() returns "custom" on a process group created with an explicit '
                 '"nccl2"/"nccl-legacy"/"nccl-lazy", and a backend object reports "nccl2" under nccl2; '
                 f"compare dist.get_backend(group) against {_NCCL_SET} instead.{held}")
        return
    msg = ('get_backend() returns the name the group was created with, so this is False for explicit '
           f'"nccl2", "nccl-legacy" and "nccl-lazy" groups; compare against {_NCCL_SET}.{held}')
    short = 'get_backend() is not "nccl" for nccl2/legacy/lazy: test all four'
    if why_not:
        a.report(node, "NCX110", short, detail=msg + why_not)
        return
    if isinstance(right, (cst.Tuple, cst.List, cst.Set)):
        have = {e.value.evaluated_value for e in right.elements if isinstance(e.value, cst.SimpleString)}
        if len(have & {"nccl", "nccl2", "nccl-legacy", "nccl-lazy"}) > 1:
            return  # the author already chose which NCCL implementations count
        missing = [n for n in ("nccl2", "nccl-legacy", "nccl-lazy") if n not in have]
        if not missing:
            return
        q = _quote(next((e.value for e in right.elements if isinstance(e.value, cst.SimpleString)), None))
        new = extend_literal(right, [cst.SimpleString(f"{q}{n}{q}") for n in missing])
        a.report(node, "NCX110", short, FixKind.SAFE,
                 [*replace_with(right, new), *wrap_edit(a, statement_expr(a, node))], detail=msg)
        return
    op_text = "not in" if neg else "in"
    new_cmp = cst.parse_expression(f"{a.code(left)} {op_text} {_nccl_set(a, right)}")
    a.report(node, "NCX110", short, FixKind.SAFE,
             [*replace_with(node, new_cmp), *wrap_edit(a, statement_expr(a, node))], detail=msg)


def _held_sources(a: Analyzer, name: cst.Name, at: Path) -> tuple[list[tuple[cst.Call, str]], list[str]]:
    """What a local compared against "nccl" holds where it is compared: the ``get_backend(...)``
    / ``.name()`` calls assigned to it (also through names that only pass the value on, ``b =
    backend``), each with a note of where, and the other values that reach it (a parameter, a
    literal, anything else), by how they read.  Only the assignments of its own function count
    (``_reach.reaching``: in straight-line code the nearest one, across branches each)."""
    found: list[tuple[cst.Call, str]] = []
    others: list[str] = []
    todo: list[tuple[str, Path, int]] = [(name.value, at, 0)]
    while todo:
        target, path, depth = todo.pop()
        defs, entry = reaching(target, path)
        if entry:
            others.append(f"the {target} it has on entry (a parameter or a global)")
        for d in defs:
            v = d.value
            line = a.pos(d.path[-1]).start.line
            if v is None or d.index is not None or d.loop:
                others.append(f"the value bound on line {line}")
            elif isinstance(v, cst.Name) and depth < 4:
                todo.append((v.value, d.path, depth + 1))  # b = backend: the value passed on
            elif isinstance(v, cst.Call) and (a.dist(v.func) == "get_backend" or (
                    isinstance(v.func, cst.Attribute) and v.func.attr.value in ("name", "_get_backend_name")
                    and not v.args)):
                found.append((v, f" {name.value} holds {a.code(v).strip()} (line {line})."))
            else:
                others.append(f"{a.code(v).strip()} (line {line})")
    return found, others


# --- NCX111 ---
_DISTINCT = {
    "_group_start": "use `with dist._coalescing_manager(group, device):` (or ncclx_migrate.backend.coalescing)",
    "_group_end": "use `with dist._coalescing_manager(group, device):` (or ncclx_migrate.backend.coalescing)",
    "_set_default_timeout": "use dist.set_timeout(timeout, group) (public since torch 2.14)",
    "comm_split_count": "guard with hasattr(); nccl2 has no split counter",
    "_set_enable_nan_check": "set TORCH_DIST_NAN_CHECK=1 or attach torch._C._distributed_c10d.NanCheckHook (2.14+)",
    "get_runtime_nccl_version": "call it on the class: dist.ProcessGroupNCCL.get_runtime_nccl_version()",
    "get_build_nccl_version": "call it on the class: dist.ProcessGroupNCCL.get_build_nccl_version()",
}
_GENERIC = {
    "_is_initialized": "nccl2 creates its communicator when the group is bound (unless lazy_init)",
    "uid": "dist.distributed_c10d._get_process_group_uid(pg) returns -1 for nccl2; guard with hasattr()",
}
# What to do, in the few words of a finding's message (the why above goes to its detail).
_TODO = {
    "_group_start": "use dist._coalescing_manager",
    "_group_end": "use dist._coalescing_manager",
    "_set_default_timeout": "use dist.set_timeout(timeout, group)",
    "comm_split_count": "guard it with hasattr()",
    "_set_enable_nan_check": "set TORCH_DIST_NAN_CHECK=1",
    "get_runtime_nccl_version": "call it on the class",
    "get_build_nccl_version": "call it on the class",
    "_is_initialized": "guard it with hasattr()",
    "uid": "guard it with hasattr()",
}


def _is_backend_obj(a: Analyzer, expr: cst.BaseExpression) -> bool:
    """``pg._get_backend(...)`` itself, or a name assigned only from such a call."""
    if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) and expr.func.attr.value == "_get_backend":
        return True
    if isinstance(expr, cst.Name):
        return _backend_source(a, expr) is not None
    return False


def _backend_source(a: Analyzer, name: cst.Name) -> cst.Call | None:
    """The ``X._get_backend(...)`` call that is the only value assigned to ``name`` so far."""
    value = a.scopes.single_value(name.value, a.scope())
    if isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and value.func.attr.value == "_get_backend":
        return value
    return None


@on(cst.Attribute, "NCX111")
def _member(a: Analyzer, node: cst.Attribute) -> None:
    name = node.attr.value
    if name.startswith("NCCL_CTA_POLICY"):
        if isinstance(node.value, cst.Call) and isinstance(node.value.func, cst.Name) and node.value.func.value == "type":
            a.report(node, "NCX111", f"type(backend).{name} fails under nccl2: read it from ProcessGroupNCCL",
                     detail=f"type(backend).{name} does not exist on ProcessGroupNCCL2; read it from "
                     f"dist.ProcessGroupNCCL.{name} (CUDA wheels, torch >= 2.14).")
        return
    if name not in _DISTINCT and name not in _GENERIC:
        return
    recv = node.value
    if a.dist(recv) in _NCCL_CLASSES:  # called on the class: fine
        return
    if name in _GENERIC and not _is_backend_obj(a, recv):
        return
    why = _DISTINCT.get(name) or _GENERIC[name]
    msg = f"{name} exists only on legacy ProcessGroupNCCL (AttributeError under nccl2); {why}."
    short = f"{name} does not exist under nccl2: {_TODO[name]}"
    call = a.parent()
    if (name in ("get_runtime_nccl_version", "get_build_nccl_version") and isinstance(call, cst.Call)
            and call.func is node and not call.args and _is_backend_obj(a, recv)):
        if a.options.use_shim:
            shim = shim_import(a, "runtime_nccl_version" if "runtime" in name else "build_nccl_version", call)
            if isinstance(shim, str):
                a.report(node, "NCX111", short, detail=f"{msg} {shim}")
            else:
                a.report(node, "NCX111", short, FixKind.SAFE, replace_with(call, cst.parse_expression(f"{shim[0]}()")),
                         [shim[1]], detail=msg)
        elif (ref := _dist_ref(a)) is not None:
            dist, dimports = ref
            p = a.report(node, "NCX111", short, FixKind.SAFE,
                         replace_with(call, cst.parse_expression(f"{dist}.ProcessGroupNCCL.{name}()")), dimports,
                         detail=msg)
            p.reads.append(dist.split(".", 1)[0])
        else:
            a.report(node, "NCX111", short, detail=msg + f". {_NO_MODULE_TORCH_111}")
        return
    if name == "_group_start" and a.options.use_shim and _coalescing(a, node, recv, msg):
        return
    if (name == "_set_default_timeout" and isinstance(call, cst.Call) and call.func is node
            and len(call.args) == 1 and _is_backend_obj(a, recv) and a.options.target_torch >= (2, 14)):
        src = recv if isinstance(recv, cst.Call) else _backend_source(a, recv) if isinstance(recv, cst.Name) else None
        assert isinstance(src, cst.Call) and isinstance(src.func, cst.Attribute)
        group = a.code(src.func.value)
        td = a.code(call.args[0].value)
        reads: list[str] = []
        if a.options.use_shim:
            shim = shim_import(a, "set_timeout", call)
            if isinstance(shim, str):
                a.report(node, "NCX111", short, detail=f"{msg} {shim}")
                return
            new = cst.parse_expression(f"{shim[0]}({td}, group={group})")
            imports: list[tuple[str, str | None] | ImportSpec] = [shim[1]]
        else:
            ref = _dist_ref(a)
            if ref is None:
                a.report(node, "NCX111", short, detail=msg + f". {_NO_MODULE_TORCH_111}")
                return
            dist, dimports = ref
            imports = [*dimports]
            reads.append(dist.split(".", 1)[0])
            new = cst.parse_expression(f"{dist}.set_timeout({td}, {group})")
        p = a.report(node, "NCX111", short, FixKind.UNSAFE, replace_with(call, new), imports,
                     detail=msg + " (set_timeout also applies to the group's other backends)")
        p.reads.extend(reads)
        return
    if name == "_set_default_timeout":
        msg += (". Not rewritten: set_timeout(timeout, group) needs the process group, and only a backend "
                "got here by pg._get_backend(...) (directly or through a name in this function) names it; "
                "one a helper returned or a parameter holds does not, so pass its group to set_timeout")
    a.report(node, "NCX111", short, detail=msg)


def _group_of(a: Analyzer, recv: cst.BaseExpression) -> str | None:
    """``G`` for a receiver that is ``G._get_backend(...)`` (directly or through a name)."""
    src = recv if isinstance(recv, cst.Call) else _backend_source(a, recv) if isinstance(recv, cst.Name) else None
    if isinstance(src, cst.Call) and isinstance(src.func, cst.Attribute) and src.func.attr.value == "_get_backend":
        return a.code(src.func.value)
    return None


def _is_bare_call(line: cst.CSTNode, recv_code: str, attr: str, a: Analyzer) -> bool:
    if not (isinstance(line, cst.SimpleStatementLine) and len(line.body) == 1 and isinstance(line.body[0], cst.Expr)):
        return False
    call = line.body[0].value
    return (isinstance(call, cst.Call) and not call.args and isinstance(call.func, cst.Attribute)
            and call.func.attr.value == attr and a.code(call.func.value) == recv_code)


def _coalescing(a: Analyzer, node: cst.Attribute, recv: cst.BaseExpression, msg: str) -> bool:
    """``b._group_start(); ...; b._group_end()`` in one block -> ``with coalescing(group=G): ...``."""
    call, expr, line, block = a.parent(), a.parent(2), a.parent(3), a.parent(4)
    if not (isinstance(call, cst.Call) and call.func is node and not call.args and isinstance(expr, cst.Expr)
            and isinstance(line, cst.SimpleStatementLine) and len(line.body) == 1
            and isinstance(block, (cst.IndentedBlock, cst.Module))):
        return False
    group = _group_of(a, recv)
    if group is None:
        return False
    recv_code = a.code(recv)
    body = list(block.body)
    i = next(k for k, st in enumerate(body) if st is line)
    j = next((k for k in range(i + 1, len(body)) if _is_bare_call(body[k], recv_code, "_group_end", a)), None)
    if j is None or any(_is_bare_call(body[k], recv_code, "_group_start", a) for k in range(i + 1, j)):
        return False
    short = "_group_start does not exist under nccl2: use ncclx_migrate.backend.coalescing"
    shim = shim_import(a, "coalescing", block)
    if isinstance(shim, str):
        a.report(node, "NCX111", short, detail=f"{msg} {shim}")
        return True
    n = len(body)
    head = cst.parse_statement(f"with {shim[0]}(group={group}):\n    pass\n")
    assert isinstance(head, cst.With)
    gone = _only_backend_binding(a, recv, body[:i])

    def edit(u: cst.IndentedBlock | cst.Module) -> cst.IndentedBlock | cst.Module:
        stmts = list(u.body)
        if len(stmts) != n:  # another edit changed this block: leave it to the next pass
            return u
        inner = stmts[i + 1:j] or [cst.SimpleStatementLine([cst.Pass()])]
        inner = [inner[0].with_changes(leading_lines=[]), *inner[1:]] if hasattr(inner[0], "leading_lines") else inner
        with_stmt = head.with_changes(body=head.body.with_changes(body=inner), leading_lines=line.leading_lines)
        rest: list[cst.BaseStatement] = [with_stmt, *stmts[j + 1:]]
        before = stmts[:i]
        if gone is not None:  # the backend was fetched only for the pair: its line goes too
            after = [*before[gone + 1:], *rest]
            nxt = after[0]
            if isinstance(nxt, (cst.SimpleStatementLine, cst.BaseCompoundStatement)):
                after[0] = nxt.with_changes(leading_lines=[*blank_head(getattr(before[gone], "leading_lines", ())), *nxt.leading_lines])
            return u.with_changes(body=[*before[:gone], *after])
        return u.with_changes(body=[*before, *rest])

    a.report(node, "NCX111", short, FixKind.UNSAFE, [(block, edit)], [shim[1]],
             detail=msg + " Rewritten to ncclx_migrate.backend.coalescing (torch's _coalescing_manager: "
             "the block waits for the batch on exit and takes one kind of collective).")
    return True


def _only_backend_binding(a: Analyzer, recv: cst.BaseExpression, before: list[cst.BaseStatement]) -> int | None:
    """The index in ``before`` of ``recv = G._get_backend(...)`` when ``recv`` is a local that
    nothing but that line and the ``_group_start``/``_group_end`` pair uses (after the rewrite it
    would be an unused variable, pyflakes F841); None otherwise."""
    if not isinstance(recv, cst.Name) or _backend_source(a, recv) is None:
        return None
    func = a.enclosing_function()
    if func is None:
        return None
    uses = [n for n in _names(func) if n == recv.value]
    if len(uses) != 3:
        return None
    for k, st in enumerate(before):
        if (isinstance(st, cst.SimpleStatementLine) and len(st.body) == 1 and isinstance(st.body[0], cst.Assign)
                and len(st.body[0].targets) == 1 and isinstance(st.body[0].targets[0].target, cst.Name)
                and st.body[0].targets[0].target.value == recv.value):
            return k
    return None


def _names(node: cst.CSTNode) -> list[str]:
    found: list[str] = []

    class _V(cst.CSTVisitor):
        def visit_Name(self, n: cst.Name) -> None:
            found.append(n.value)

    walk(node, _V())
    return found


# --- NCX112 ---
_INIT = ("init_process_group", "new_group")
_BITWISE = ("ReduceOp.BAND", "ReduceOp.BOR", "ReduceOp.BXOR")


class _TryBody(cst.CSTVisitor):
    def __init__(self, a: Analyzer) -> None:
        super().__init__()
        self.a = a
        self.init = False
        self.bitwise = False

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        return False

    def visit_Call(self, node: cst.Call) -> None:
        if self.a.dist(node.func) in _INIT and _may_be_nccl(node):
            self.init = True

    def visit_Attribute(self, node: cst.Attribute) -> None:
        if self.a.dist(node) in _BITWISE:
            self.bitwise = True


def _may_be_nccl(call: cst.Call) -> bool:
    """The group may be NCCL: no backend (CUDA picks "nccl"), a computed one, or a name
    with "nccl" in it; an explicit "gloo" cannot hit the no-GPU failure nccl2 changes."""
    arg = next((x for x in call.args if x.keyword is not None and x.keyword.value == "backend"), None)
    if arg is None and call.args and call.args[0].keyword is None and call.args[0].star == "":
        arg = call.args[0]
    if arg is None or not isinstance(arg.value, cst.SimpleString):
        return True
    value = arg.value.evaluated_value
    return not isinstance(value, str) or "nccl" in value


# A handler for the no-GPU failure falls back or says why; one that mentions none of these
# is about something else (a bad tcp:// address, a timeout) and is left alone.
# A handler that only swallows the error (`pass`) may well be the no-GPU one: still reported.
_GPU_WORDS = re.compile(r"gloo|cpu|gpu|cuda|nccl|device|backend", re.IGNORECASE)
_SILENT = re.compile(r"\bpass\b|\.\.\.|\bcontinue\b|#[^\n]*|\s|:")


def _caught(h: cst.ExceptHandler) -> list[str] | None:
    t = h.type
    if t is None:
        return None
    elems = [e.value for e in t.elements] if isinstance(t, cst.Tuple) else [t]
    return [e.value if isinstance(e, cst.Name) else "?" for e in elems]


@on(cst.Try, "NCX112")
def _try(a: Analyzer, node: cst.Try) -> None:
    body = _TryBody(a)
    walk(node.body, body)
    if not (body.init or body.bitwise):
        return
    for h in node.handlers:
        names = _caught(h)
        if names is None or any(n in ("Exception", "BaseException") for n in names):
            return
        has_v, has_r = "ValueError" in names, "RuntimeError" in names
        if has_v == has_r or (has_r and not body.bitwise):
            continue  # a RuntimeError-only handler around init is usually about something else
        assert h.type is not None
        handler = a.code(h.body)
        if body.init and not body.bitwise and not _GPU_WORDS.search(handler) and _SILENT.sub("", handler):
            continue
        if body.init:
            why = ("init_process_group raises ValueError without a GPU under legacy but RuntimeError "
                   '("nccl2 requires at least one CUDA device") under nccl2 (torch 2.15)')
            short = "init without a GPU raises RuntimeError under nccl2, not ValueError: catch both"
        else:
            why = "bitwise ReduceOp on NCCL raises ValueError on legacy and 2.15 nccl2, RuntimeError on 2.14 nccl2"
            short = "bitwise ReduceOp raises RuntimeError on 2.14 nccl2, not ValueError: catch both"
        t = h.type
        new: cst.BaseExpression
        if isinstance(t, cst.Tuple) and t.lpar:
            new = extend_literal(t, [cst.Name("RuntimeError" if has_v else "ValueError")])
        else:
            new = cst.parse_expression("(ValueError, RuntimeError)")
        a.report(h, "NCX112", short, FixKind.SAFE, [*replace_with(t, new), *wrap_edit(a, (t, h))],
                 detail=f"{why}; catch (ValueError, RuntimeError).")


# --- NCX113 ---
_TEXTS = (
    ("WorkNCCL(SeqNum", "nccl2 timeouts read \"Watchdog caught collective operation timeout: NCCL operation timed out\""),
    (r"WorkNCCL\(SeqNum", "nccl2 timeouts read \"Watchdog caught collective operation timeout: NCCL operation timed out\""),
    ("milliseconds before timing out", "nccl2 timeouts carry no duration text"),
    ("Heartbeat monitor timed out", "nccl2 in torch 2.15 has no heartbeat monitor"),
    ("watchdog got stuck", "nccl2 in torch 2.15 has no heartbeat monitor"),
    ("destroy_process_group() was not called", "nccl2 logs \"... was not finalized before destruction\" instead"),
    ("process group has NOT been destroyed", "nccl2 logs \"... was not finalized before destruction\" instead"),
)


# Calls whose string argument is matched against a message (re.search(p, str(e)), s.startswith(p),
# assertRaisesRegex(E, p), pytest.raises(E, match=p), ...).
_MATCHERS = frozenset({"search", "match", "fullmatch", "compile", "findall", "finditer", "sub", "subn", "split",
                       "startswith", "endswith", "find", "rfind", "index", "count", "fnmatch", "assertRaisesRegex",
                       "assertRaisesRegexp", "assertRegex", "assertRegexpMatches", "assertNotRegex", "assertWarnsRegex",
                       "assertIn", "assertNotIn", "raises", "warns"})


def _is_test_file(path: str) -> bool:
    parts = path.replace("\\", "/").split("/")
    base = parts[-1]
    return (base.startswith("test_") or base.endswith(("_test.py", "_tests.py")) or base == "conftest.py"
            or any(p in ("test", "tests", "testing") for p in parts[:-1]))


def _matched_at(a: Analyzer, depth: int) -> bool:
    """The node ``depth`` levels above the visited one is where a value is matched against text:
    an operand of ``in``/``==``, or an argument of a matching call."""
    parent = a.parent(depth)
    if isinstance(parent, cst.ComparisonTarget):
        return isinstance(parent.operator, (cst.In, cst.NotIn, cst.Equal, cst.NotEqual))
    if isinstance(parent, cst.Comparison):
        return any(isinstance(t.operator, (cst.In, cst.NotIn, cst.Equal, cst.NotEqual)) for t in parent.comparisons)
    if isinstance(parent, cst.Arg):
        call = a.parent(depth + 1)
        func = call.func if isinstance(call, cst.Call) else None
        name = func.attr.value if isinstance(func, cst.Attribute) else func.value if isinstance(func, cst.Name) else ""
        return name in _MATCHERS or (parent.keyword is not None and parent.keyword.value in ("match", "pattern"))
    return False


def _matched(a: Analyzer) -> bool | str:
    """Whether the visited string is matched against text: True, False, or the name it is bound
    to (``PAT = "..."``, an element of ``PATS = ["...", ...]``), matched if that name is."""
    depth = 1
    if isinstance(a.parent(), cst.Element) and isinstance(a.parent(2), (cst.List, cst.Tuple, cst.Set)):
        depth = 3
    if _matched_at(a, depth):
        return True
    parent = a.parent(depth)
    if isinstance(parent, cst.Assign) and len(parent.targets) == 1 and isinstance(parent.targets[0].target, cst.Name):
        return parent.targets[0].target.value
    return False


@on(cst.Call, "NCX113")
def _match_call(a: Analyzer, node: cst.Call) -> None:
    _match_use(a, node)


@on(cst.Comparison, "NCX113")
def _match_comparison(a: Analyzer, node: cst.Comparison) -> None:
    _match_use(a, node)


def _match_use(a: Analyzer, node: cst.Call | cst.Comparison) -> None:
    """Names used where text is matched (for strings bound to a name in a test file)."""
    if not _is_test_file(a.path):
        return
    used: set[str] = a.facts.setdefault("matched_names", set())
    parts = ([arg.value for arg in node.args] if isinstance(node, cst.Call)
             else [node.left, *(t.comparator for t in node.comparisons)])
    if isinstance(node, cst.Call):
        func = node.func
        name = func.attr.value if isinstance(func, cst.Attribute) else func.value if isinstance(func, cst.Name) else ""
        if name not in _MATCHERS:
            parts = [arg.value for arg in node.args if arg.keyword is not None and arg.keyword.value in ("match", "pattern")]
    elif not any(isinstance(t.operator, (cst.In, cst.NotIn, cst.Equal, cst.NotEqual)) for t in node.comparisons):
        return
    used.update(p.value for p in parts if isinstance(p, cst.Name))  # the name itself, not one inside a call


@on(cst.SimpleString, "NCX113")
def _text(a: Analyzer, node: cst.SimpleString) -> None:
    if isinstance(a.parent(), cst.Expr):
        return
    raw = node.value
    for needle, why in _TEXTS:
        if needle in raw:
            # In a test, legacy text that is only sample input (a fake log line, an exception
            # raised with it) changes nothing; only text matched against a message does.
            matched = _matched(a) if _is_test_file(a.path) else True
            p = a.report(node, "NCX113", "matches legacy-only NCCL error text: match on DistBackendError instead",
                         detail=f"matches legacy ProcessGroupNCCL message text ({needle!r}); {why}. Match on "
                         "torch.distributed.DistBackendError and the shared prefix \"Watchdog caught "
                         "collective operation timeout\" instead.")
            if matched is False:
                a.pending.remove(p)
            elif isinstance(matched, str):
                a.finishers.append(functools.partial(_unless_matched, a, p, matched))
            return


def _unless_matched(a: Analyzer, p: Pending, name: str) -> None:
    if name not in a.facts.get("matched_names", ()):
        a.pending.remove(p)


# --- NCX121 ---
_DUMPS = {"_dump_nccl_trace", "_dump_nccl_trace_json", "_dump_nccl_trace_pickle"}
_FR_DUMPS = {"_dump_fr_trace", "_dump_fr_trace_json", "_reset_fr_trace"}


@on(cst.Call, "NCX121")
def _dump(a: Analyzer, node: cst.Call) -> None:
    m = a.dist(node.func)
    if m in _DUMPS:
        a.report(node, "NCX121", f'{m}() is empty for nccl2 groups: add _dump_fr_trace(backend="nccl2")',
                 detail=f"{m}() reads only the legacy recorder: for nccl2 groups it returns a valid dump with zero "
                 'entries. On torch 2.15 also dump _dump_fr_trace(backend="nccl2") (or use '
                 "ncclx_migrate.backend.dump_flight_recorder).")
    elif m in _FR_DUMPS and not any(arg.keyword is not None and arg.keyword.value == "backend" for arg in node.args):
        a.report(node, "NCX121", f'{m}() reads the gloo recorder on 2.15: pass backend="nccl2"',
                 detail=f'{m}() without backend= reads the "gloo" recorder on torch 2.15, not nccl2\'s; pass '
                 'backend="nccl2" (the keyword does not exist on 2.14: version-guard it).')


# --- NCX133 ---
@on(cst.Assign, "NCX133")
def _lazy_init(a: Analyzer, node: cst.Assign) -> None:
    if a.options.target_torch >= (2, 15) or len(node.targets) != 1:
        return
    t = node.targets[0].target
    if not (isinstance(t, cst.Attribute) and t.attr.value == "lazy_init"):
        return
    if "ProcessGroupNCCL" not in a.source:
        return
    for anc in a.stack:
        if isinstance(anc, cst.If) and "hasattr" in a.code(anc.test) and "lazy_init" in a.code(anc.test):
            return
        if isinstance(anc, cst.Try) and any("AttributeError" in a.code(h) for h in anc.handlers):
            return
    small, line = node, a.parent()
    msg = ("Options.lazy_init exists only from torch 2.15: setting it raises AttributeError on 2.14 "
           f"(--target-torch {a.options.target_torch[0]}.{a.options.target_torch[1]}); guard it with hasattr().")
    short = "Options.lazy_init raises AttributeError on torch 2.14: guard it with hasattr()"
    if isinstance(line, cst.SimpleStatementLine) and len(line.body) == 1 and small is node:
        recv = a.code(t.value)
        guard = cst.parse_statement(f'if hasattr({recv}, "lazy_init"):\n    pass\n')
        assert isinstance(guard, cst.If)

        def edit(u: cst.SimpleStatementLine, guard: cst.If = guard) -> cst.If:
            body = guard.body.with_changes(body=[u.with_changes(leading_lines=[])])
            return guard.with_changes(body=body, leading_lines=u.leading_lines)

        a.report(node, "NCX133", short, FixKind.SAFE, [(line, edit)], detail=msg)
    else:
        a.report(node, "NCX133", short, detail=msg)
