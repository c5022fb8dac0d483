"""The single visitor every Python rule runs in, and what rules report through it.

Rules are plain functions registered per node type (``on(cst.Call)``); the visitor walks
the tree once and calls each handler for each node of its type.  Handlers may register
``finish`` callbacks that run after the walk (for rules that need whole-file facts, such
as "is this constant used anywhere else").  Findings carry their edits; the engine applies
only the edits of findings that survive selection, suppression and the fix policy.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar, Union

import libcst as cst
from libcst.metadata import CodeRange, MetadataWrapper, PositionProvider

from .._model import Finding, FixKind, Options
from ._names import dist_member
from ._positions import Units
from ._scope import Scope, Scopes
from ._trace import Lines

__all__ = ["HANDLERS", "Analyzer", "Edit", "ImportSpec", "Pending", "Rule", "on"]

EditResult = Union[cst.CSTNode, cst.RemovalSentinel, cst.FlattenSentinel[Any]]  # noqa: UP007
Edit = Callable[[Any], EditResult]
Handler = Callable[["Analyzer", Any], None]
N = TypeVar("N", bound=cst.CSTNode)
ImportSpec = tuple[str, str | None, str | None]  # (module, name or None, as-name or None)

HANDLERS: dict[type[cst.CSTNode], list[tuple[tuple[str, ...], Handler]]] = {}


def on(node_type: type[N], *codes: str) -> Callable[[Callable[[Analyzer, N], None]], Callable[[Analyzer, N], None]]:
    """Register a handler for ``node_type``; ``codes`` are the rules it can report (for --select)."""

    def deco(fn: Callable[[Analyzer, N], None]) -> Callable[[Analyzer, N], None]:
        HANDLERS.setdefault(node_type, []).append((codes, fn))
        return fn

    return deco


Rule = on  # alias read by rule modules


@dataclass
class Pending:
    finding: Finding
    lines: tuple[int, ...]  # lines on which a suppression comment counts
    edits: list[tuple[cst.CSTNode, Edit]] = field(default_factory=list)
    imports: list[ImportSpec] = field(default_factory=list)  # what the fix's new code imports
    # imports the fix may leave unused: (module, name, asname), removed when nothing uses them
    unused: list[ImportSpec] = field(default_factory=list)
    # module-level names the fix's new code reads (the module's torch.distributed spelling, a
    # constant it defines): at the sites it edits they must mean the module's (_bindings)
    reads: list[str] = field(default_factory=list)


class Analyzer(cst.CSTVisitor):
    """One walk over a parsed module.  Metadata (positions, scopes, qualified names) is
    computed lazily, on first use, from the wrapper: most files never need scopes."""

    def __init__(self, path: str, wrapper: MetadataWrapper, source: str, options: Options, active: set[str],
                 tree: ast.Module | None = None) -> None:
        super().__init__()
        self.path = path
        self.wrapper = wrapper
        self.source = source
        self.module = wrapper.module
        self._positions: Mapping[cst.CSTNode, CodeRange] | None = None
        self.units = Units(self.module, source, tree)  # positions per statement, as they are asked for
        self.scopes = Scopes(self.module)
        self.order = 0  # visit counter: "comes before" without computing positions
        # The rules see no fix mode: the same findings serve a report's fixed points with and
        # without --unsafe-fixes, except where a rule asks (unsafe_fixes_on)
        self.options = replace(options, apply_safe=False, apply_unsafe=False)
        self._apply_unsafe = options.apply_unsafe
        self.pending: list[Pending] = []
        self.stack: list[cst.CSTNode] = []
        self.finishers: list[Callable[[], None]] = []
        self.facts: dict[str, Any] = {}  # per-file scratch space shared between rules
        self.depends_on_mode = False  # a rule asked unsafe_fixes_on
        # id(statement) -> (statement, first line, last line), once a fix needs them (_trace)
        self.lines: Lines | None = None
        self._handlers: dict[type[cst.CSTNode], list[Handler]] = {}
        for node_type, entries in HANDLERS.items():
            fns = [fn for codes, fn in entries if not codes or any(c in active for c in codes)]
            if fns:
                self._handlers[node_type] = fns

    # --- the walk ---
    def on_visit(self, node: cst.CSTNode) -> bool:
        self.stack.append(node)
        self.units.enter(node, self.stack)
        self.order += 1
        binder = _BINDERS.get(type(node))
        if binder is not None:
            binder(self.scopes, node)
        for fn in self._handlers.get(type(node), ()):
            fn(self, node)
        return True

    def on_leave(self, original_node: cst.CSTNode) -> None:
        kind = type(original_node)
        if kind is cst.Module:
            self.finish()
        elif kind in _SCOPED:  # (by exact type, as _BINDERS pushes them)
            self.scopes.pop()
        self.units.leave(original_node)
        self.stack.pop()

    def unsafe_fixes_on(self) -> bool:
        """Does this run apply unsafe fixes (--unsafe-fixes)?  A rule that reports otherwise
        then asks: its findings hold only for runs in the same mode."""
        self.depends_on_mode = True
        return self._apply_unsafe

    def finish(self) -> None:
        for fn in self.finishers:
            fn()

    # --- metadata helpers (lazy) ---
    def pos(self, node: cst.CSTNode) -> CodeRange:
        """libcst's PositionProvider range of ``node``, from the code of the one statement of
        the module (or of a class body) that holds it: a large file with few findings is not
        generated again as a whole (the whole module only where that cannot be done)."""
        if self._positions is None:
            rng = self.units.pos(node)
            if rng is not None:
                return rng
            self._positions = self.wrapper.resolve(PositionProvider)
        return self._positions[node]

    def qnames(self, node: cst.CSTNode, scope: Scope | None = None) -> set[str]:
        """Qualified name of a Name/Attribute through the file's imports (empty if local)."""
        if not isinstance(node, (cst.Name, cst.Attribute)):
            return set()
        q = self.scopes.qualify(node, scope)
        return {q} if q else set()

    def dist(self, node: cst.CSTNode, scope: Scope | None = None) -> str | None:
        """The torch.distributed member ``node`` names, through the file's imports."""
        return dist_member(self.qnames(node, scope))

    def scope(self) -> Scope:
        """The scope the walk is in (capture it for resolution after the walk)."""
        return self.scopes.chain()

    def source_of(self, node: cst.CSTNode) -> str:
        """The original text of a (large) node, sliced from the source: no code generation."""
        if isinstance(node, cst.Module):
            return self.source
        rng = self.pos(node)
        lines = self.source.splitlines(keepends=True)[rng.start.line - 1: rng.end.line]
        return "".join(lines)

    def parent(self, depth: int = 1) -> cst.CSTNode | None:
        """The ancestor ``depth`` levels above the node being visited."""
        i = len(self.stack) - 1 - depth
        return self.stack[i] if i >= 0 else None

    def enclosing_function(self) -> cst.CSTNode | None:
        for node in reversed(self.stack[:-1]):
            if isinstance(node, (cst.FunctionDef, cst.Lambda)):
                return node
        return None

    def suites(self) -> tuple[int, ...]:
        """ids of the blocks enclosing the current node, outermost first, up to its function."""
        out: list[int] = []
        for node in reversed(self.stack[:-1]):
            if isinstance(node, (cst.IndentedBlock, cst.SimpleStatementSuite, cst.Module)):
                out.append(id(node))
            if isinstance(node, (cst.FunctionDef, cst.Lambda)):
                break
        return tuple(reversed(out))

    def statement(self) -> tuple[cst.BaseSmallStatement | None, cst.CSTNode | None]:
        """(small statement, its line node) directly holding the current node as its
        expression, i.e. the node is ``expr`` of an ``Expr`` statement or an ``Assign``."""
        small = self.parent()
        line = self.parent(2)
        if isinstance(small, cst.BaseSmallStatement):
            return small, line
        return None, None

    def code(self, node: cst.CSTNode) -> str:
        return self.module.code_for_node(node)

    def line_length(self) -> int:
        """The longest line a fix may write: --line-length, else the project's setting."""
        if self.options.line_length is not None:
            return self.options.line_length
        return self.options.project.line_length(self.path)  # (asked of the project: the cache keys on it)

    def line(self, number: int) -> str:
        """Source line ``number`` (1-based), without its newline."""
        lines = self.facts.get("lines")
        if lines is None:
            lines = self.facts["lines"] = self.source.splitlines()
        return lines[number - 1] if 0 < number <= len(lines) else ""

    # --- reporting ---
    def report(
        self,
        node: cst.CSTNode,
        code: str,
        message: str,
        fix: FixKind = FixKind.NONE,
        edits: Sequence[tuple[cst.CSTNode, Edit]] = (),
        imports: Sequence[tuple[str, str | None] | ImportSpec] = (),
        detail: str = "",
    ) -> Pending:
        rng = self.pos(node)
        if not edits:
            fix = FixKind.NONE
        finding = Finding(
            path=self.path,
            line=rng.start.line,
            column=rng.start.column + 1,
            code=code,
            message=message,
            fix=fix,
            detail=detail,
        )
        specs = [(i[0], i[1], i[2] if len(i) == 3 else None) for i in imports]
        p = Pending(finding, (rng.start.line, rng.end.line), list(edits), specs)
        self.pending.append(p)
        return p


# --- scope building, run before the rule handlers of each node ---
def _bind_function(scopes: Scopes, node: cst.FunctionDef) -> None:
    scopes.bind_shadow(node.name.value)
    scopes.push(node)
    _bind_params(scopes, node.params)


def _bind_params(scopes: Scopes, params: cst.Parameters) -> None:
    for p in (*params.posonly_params, *params.params, *params.kwonly_params):
        scopes.bind_shadow(p.name.value)
    for star in (params.star_arg, params.star_kwarg):
        if isinstance(star, cst.Param):
            scopes.bind_shadow(star.name.value)


def _bind_lambda(scopes: Scopes, node: cst.Lambda) -> None:
    scopes.push(node)
    _bind_params(scopes, node.params)


def _bind_class(scopes: Scopes, node: cst.ClassDef) -> None:
    scopes.bind_shadow(node.name.value)
    scopes.push(node)


def _bind_assign(scopes: Scopes, node: cst.Assign) -> None:
    for t in node.targets:
        if isinstance(t.target, cst.Name):
            scopes.bind_assign(t.target.value, node.value)
        else:
            scopes.bind_targets(t.target)


def _bind_annassign(scopes: Scopes, node: cst.AnnAssign) -> None:
    if isinstance(node.target, cst.Name) and node.value is not None:
        scopes.bind_assign(node.target.value, node.value)


def _bind_augassign(scopes: Scopes, node: cst.AugAssign) -> None:
    if isinstance(node.target, cst.Name):
        scopes.bind_other(node.target.value)


def _bind_for(scopes: Scopes, node: cst.For) -> None:
    scopes.bind_targets(node.target)


def _bind_with_item(scopes: Scopes, node: cst.WithItem) -> None:
    if node.asname is not None:
        scopes.bind_targets(node.asname.name)


def _bind_except(scopes: Scopes, node: cst.ExceptHandler) -> None:
    if node.name is not None and isinstance(node.name.name, cst.Name):
        scopes.bind_other(node.name.name.value)


def _bind_walrus(scopes: Scopes, node: cst.NamedExpr) -> None:
    if isinstance(node.target, cst.Name):
        scopes.bind_other(node.target.value)


def _bind_global(scopes: Scopes, node: cst.Global) -> None:
    scopes.current.globals.update(n.name.value for n in node.names)


_SCOPED = frozenset({cst.FunctionDef, cst.Lambda, cst.ClassDef})
_BINDERS: dict[type[cst.CSTNode], Callable[[Scopes, Any], None]] = {
    cst.Import: lambda s, n: s.bind_import(n),
    cst.ImportFrom: lambda s, n: s.bind_import(n),
    cst.FunctionDef: _bind_function,
    cst.Lambda: _bind_lambda,
    cst.ClassDef: _bind_class,
    cst.Assign: _bind_assign,
    cst.AnnAssign: _bind_annassign,
    cst.AugAssign: _bind_augassign,
    cst.For: _bind_for,
    cst.WithItem: _bind_with_item,
    cst.ExceptHandler: _bind_except,
    cst.NamedExpr: _bind_walrus,
    cst.Global: _bind_global,
}
