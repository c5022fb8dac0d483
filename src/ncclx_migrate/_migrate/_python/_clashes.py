"""What a module binds, by libcst's scope analysis: a fix never introduces a name clash and
never leaves an import it stopped using.

Every name a fix brings into a module (an import, a shim helper, ``_NCCL_PG_CLASSES``, the
module's spelling of torch.distributed) must not collide with a name the module binds in a
scope that sees the new code: a module-level ``def is_nccl()`` next to an added ``from
ncclx_migrate.backend import is_nccl`` is a TypeError at run time (pyflakes F811), and a
parameter named ``dist`` in the function a fix writes ``dist.X`` into is another object.
What to do on a clash (docs/migrate.md, "Safe fixes"): a shim helper is imported under an alias
(``is_nccl as _ncclx_is_nccl``); a name that must keep its spelling (``_NCCL_PG_CLASSES``,
``torch``, the module's ``dist``) makes the fix go (the finding stays, unfixed, and says why).

The scope analysis runs only for files with such a fix, once per pass.
"""

from __future__ import annotations

import ast
import re
from collections import Counter
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field

import libcst as cst
from libcst.metadata import BaseAssignment, GlobalScope, ImportAssignment, Scope, ScopeProvider

from ._ctx import Analyzer, ImportSpec, Pending

__all__ = ["Edited", "bound_name", "drop_clashing_fixes", "reads", "shim_import", "unused_after"]

_Accept = Callable[[BaseAssignment], bool]


def _scopes(a: Analyzer) -> Mapping[cst.CSTNode, Scope | None]:
    cached: Mapping[cst.CSTNode, Scope | None] | None = a.facts.get("libcst_scopes")
    if cached is None:
        cached = a.facts["libcst_scopes"] = a.wrapper.resolve(ScopeProvider)
    return cached


def bound_name(spec: ImportSpec) -> str:
    """The name an import binds: ``as`` name, imported name, or a dotted module's head."""
    mod, obj, asname = spec
    return asname or obj or mod.split(".", 1)[0]


def _same_import(a: Analyzer, spec: ImportSpec) -> _Accept:
    """An existing binding that is this very import (adding it again changes nothing)."""
    mod, obj, _ = spec
    name = bound_name(spec)

    def accept(asg: BaseAssignment) -> bool:
        node = getattr(asg, "node", None)
        if not isinstance(asg, ImportAssignment):
            return False
        if obj is None and isinstance(node, cst.Import):
            return any(al.asname is None and a.code(al.name).split(".", 1)[0] == name for al in node.names)
        if (obj is not None and isinstance(node, cst.ImportFrom) and node.module is not None and not node.relative
                and a.code(node.module) == mod and not isinstance(node.names, cst.ImportStar)):
            return any(a.code(al.name) == obj and (a.code(al.asname.name) if al.asname else obj) == name
                       for al in node.names)
        return False

    return accept


def _module_level(asg: BaseAssignment) -> bool:
    """A module-level import or assignment (``dist = None`` in an ``except ImportError``), not a
    def or class of that name, nor a local of a scope around the new code."""
    return isinstance(asg.scope, GlobalScope) and (
        isinstance(asg, ImportAssignment) or isinstance(getattr(asg, "node", None), cst.Name))


def _clash(a: Analyzer, name: str, at: Sequence[cst.CSTNode], accept: _Accept) -> int | None:
    """The line of a binding of ``name`` that new code at the nodes ``at`` would collide with
    (one at module level, or one in a scope that encloses a node), or None."""
    scopes = _scopes(a)
    seen: list[BaseAssignment] = []
    module = scopes.get(a.module)
    if module is not None:
        seen.extend(module[name])
    for node in at:
        scope = scopes.get(node)
        if scope is not None:
            seen.extend(scope[name])
    for asg in seen:
        if not accept(asg):
            where = getattr(asg, "node", None)
            return a.pos(where).start.line if isinstance(where, cst.CSTNode) else 0
    return None


def shim_import(a: Analyzer, helper: str, at: cst.CSTNode) -> tuple[str, ImportSpec] | str:
    """How new code at ``at`` calls ``ncclx_migrate.backend.<helper>``: (spelling, import), under
    the alias ``_ncclx_<helper>`` when the module binds ``helper`` itself; else why it cannot."""
    lines = []
    for name in (helper, f"_ncclx_{helper}"):
        spec: ImportSpec = ("ncclx_migrate.backend", helper, None if name == helper else name)
        line = _clash(a, name, [at], _same_import(a, spec))
        if line is None:
            return name, spec
        lines.append(f"{name} (line {line})")
    return f"Not rewritten: this module binds {' and '.join(lines)}, the names the fix would import."


def drop_clashing_fixes(a: Analyzer, pending: Sequence[Pending]) -> None:
    """The fixes whose new names collide with the module's lose their edits (the finding
    stays, with no fix, and its detail says which name and line)."""
    for p in pending:
        if not p.edits or not (p.imports or p.reads):
            continue
        at = [node for node, _ in p.edits]
        why = None
        for spec in p.imports:
            line = _clash(a, bound_name(spec), at, _same_import(a, spec))
            if line is not None:
                why = f"the name {bound_name(spec)} it would import is bound here already (line {line})"
                break
        for name in p.reads if why is None else ():
            line = _clash(a, name, at, _module_level)
            if line is not None:
                why = f"{name}, which it would use, means something else there (line {line})"
                break
        if why is not None:
            p.edits.clear()
            p.imports.clear()
            p.finding.fix = p.finding.fix.NONE
            p.finding.detail = f"{p.finding.detail} Not rewritten: {why}.".strip()


@dataclass(frozen=True)
class Edited:
    """The subtrees of the nodes a fix rewrites or removes: what they spell (every name, and
    every word of a string, as a string annotation is a use too) and the nodes themselves."""

    names: frozenset[str]
    nodes: frozenset[int]  # id() of every node inside
    spelt: Mapping[str, int] = field(default_factory=dict)  # how many Name nodes spell each name

    @classmethod
    def of(cls, roots: Sequence[cst.CSTNode]) -> Edited:
        names: set[str] = set()
        nodes: set[int] = set()
        spelt: Counter[str] = Counter()

        class _Walk(cst.CSTVisitor):
            def on_visit(self, node: cst.CSTNode) -> bool:
                nodes.add(id(node))
                if isinstance(node, cst.Name):
                    names.add(node.value)
                    spelt[node.value] += 1
                elif isinstance(node, cst.SimpleString):
                    names.update(_WORD.findall(node.value))
                return True

        walk = _Walk()
        for root in roots:
            root.visit(walk)
        return cls(frozenset(names), frozenset(nodes), spelt)


def _read_elsewhere(tree: ast.Module, names: set[str], edited: Edited) -> set[str]:
    """Which of ``names`` Python's own tree shows read outside the edited nodes where nothing
    but one top-level import binds the name anywhere in the module: such an import is still
    used after the fix, and needs no scope analysis.  (Reads counted from ``ast``, against every
    Name node of that spelling inside the edited nodes: an overcount there only sends a name to
    the scope analysis.)"""
    reads: Counter[str] = Counter()
    binds: Counter[str] = Counter()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            if node.id in names:
                (reads if isinstance(node.ctx, ast.Load) else binds)[node.id] += 1
        elif isinstance(node, ast.arg):
            binds[node.arg] += 1
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            binds[node.name] += 1
        elif isinstance(node, ast.alias):
            binds[node.asname or node.name.split(".", 1)[0]] += 1
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            binds.update(node.names)
        elif isinstance(node, (ast.ExceptHandler, ast.MatchAs, ast.MatchStar)) and node.name:
            binds[node.name] += 1
        elif isinstance(node, ast.MatchMapping) and node.rest:
            binds[node.rest] += 1
    return {n for n in names if binds[n] == 1 and reads[n] > edited.spelt.get(n, 0)}


_WORD = re.compile(r"[A-Za-z_]\w*")


def reads(nodes: Sequence[object]) -> set[str]:
    """Names the new code of a fix reads where a plain name is read (not an attribute, a
    keyword or anything bound in it): an import one of them names is still used after the fix
    (a fix's code reads the module's bindings, never a shadow: drop_clashing_fixes)."""
    out: set[str] = set()

    class _Reads(cst.CSTVisitor):
        def visit_Name(self, node: cst.Name) -> None:
            out.add(node.value)

        def visit_Attribute(self, node: cst.Attribute) -> bool:
            node.value.visit(self)
            return False

        def visit_Arg(self, node: cst.Arg) -> bool:
            node.value.visit(self)
            return False

        def on_visit(self, node: cst.CSTNode) -> bool:
            if isinstance(node, _BINDS):
                return False
            return super().on_visit(node)

    visitor = _Reads()
    for node in nodes:
        for one in node.nodes if isinstance(node, cst.FlattenSentinel) else [node]:
            if isinstance(one, cst.CSTNode):
                one.visit(visitor)
    return out


# Nodes that bind names (or hold a scope of their own): what a fix's new code spells inside them
# is not a read of the module's binding, so reads() leaves them out.
_BINDS = (cst.Lambda, cst.FunctionDef, cst.ClassDef, cst.Import, cst.ImportFrom, cst.AsName, cst.Param,
          cst.AssignTarget, cst.AnnAssign, cst.AugAssign, cst.NamedExpr, cst.ListComp, cst.SetComp,
          cst.DictComp, cst.GeneratorExp, cst.Global, cst.Nonlocal, cst.For, cst.With, cst.ExceptHandler,
          cst.Match)


def unused_after(a: Analyzer, edited: Edited, kept: Collection[str] = ()) -> list[ImportSpec]:
    """Top-level imports every use of which lies in an edited node: a fix that removes their
    last use removes them too (libcst's RemoveImportsVisitor drops only those the fixed module
    no longer uses, and its scope analysis is most of a fix's cost, so it gets only these).  An
    import used anywhere else is still used after the fix (a fix never shadows a name).  The
    scope analysis runs only when an edited node spells a top-level import's name that the
    new code (``kept``: the names it reads) does not."""
    out: list[ImportSpec] = []
    module: Scope | None = None
    read_elsewhere: set[str] | None = None

    def _used(name: str, stmt: cst.CSTNode) -> bool:
        nonlocal module, read_elsewhere
        if name not in edited.names or name in kept:
            return False
        if read_elsewhere is None:
            tree = a.units.tree
            read_elsewhere = set() if tree is None else _read_elsewhere(tree, set(edited.names) - set(kept), edited)
        if name in read_elsewhere:
            return False
        if module is None:
            module = _scopes(a).get(a.module)
            if module is None:
                return False
        return any(isinstance(asg, ImportAssignment) and asg.node is stmt and asg.references
                   and all(id(ref.node) in edited.nodes for ref in asg.references)
                   for asg in module[name])

    for stmt in a.module.body:
        if not isinstance(stmt, cst.SimpleStatementLine):
            continue
        for small in stmt.body:
            if isinstance(small, cst.Import):
                for al in small.names:
                    name = a.code(al.asname.name) if al.asname else a.code(al.name).split(".", 1)[0]
                    if _used(name, small):
                        out.append((a.code(al.name), None, a.code(al.asname.name) if al.asname else None))
            elif (isinstance(small, cst.ImportFrom) and small.module is not None and not small.relative
                  and not isinstance(small.names, cst.ImportStar)):
                mod = a.code(small.module)
                if mod == "__future__":
                    continue
                for al in small.names:
                    name = a.code(al.asname.name) if al.asname else a.code(al.name)
                    if _used(name, small):
                        out.append((mod, a.code(al.name), a.code(al.asname.name) if al.asname else None))
    return out


