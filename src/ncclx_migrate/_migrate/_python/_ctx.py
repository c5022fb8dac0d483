"""The single visitor every Python rule runs in, and what rules report through it.

Rules are plain functions registered per node type (``on(cst.Call)``); the visitor walks
the tree once and calls each handler for each node of its type.  Handlers may register
``finish`` callbacks that run after the walk (for rules that need whole-file facts, such
as "is this constant used anywhere else").  Findings carry their edits; the engine applies
only the edits of findings that survive selection, suppression and the fix policy.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar, Union

import libcst as cst
from libcst.metadata import (
    CodeRange,
    PositionProvider,
    QualifiedNameProvider,
    Scope,
    ScopeProvider,
)

from .._model import Finding, FixKind, Options
from ._names import dist_member

__all__ = ["HANDLERS", "Analyzer", "Edit", "Pending", "Rule", "on"]

EditResult = Union[cst.CSTNode, cst.RemovalSentinel, cst.FlattenSentinel[Any]]  # noqa: UP007
Edit = Callable[[Any], EditResult]
Handler = Callable[["Analyzer", Any], None]
N = TypeVar("N", bound=cst.CSTNode)

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
    imports: list[tuple[str, str | None]] = field(default_factory=list)  # (module, name)


class Analyzer(cst.CSTVisitor):
    METADATA_DEPENDENCIES = (PositionProvider, QualifiedNameProvider, ScopeProvider)

    def __init__(self, path: str, module: cst.Module, options: Options, active: set[str]) -> None:
        super().__init__()
        self.path = path
        self.module = module
        self.options = options
        self.pending: list[Pending] = []
        self.stack: list[cst.CSTNode] = []
        self.finishers: list[Callable[[], None]] = []
        self.facts: dict[str, Any] = {}  # per-file scratch space shared between rules
        self._handlers: dict[type[cst.CSTNode], list[Handler]] = {}
        for node_type, entries in HANDLERS.items():
            fns = [fn for codes, fn in entries if not codes or any(c in active for c in codes)]
            if fns:
                self._handlers[node_type] = fns

    # --- the walk ---
    def on_visit(self, node: cst.CSTNode) -> bool:
        self.stack.append(node)
        for fn in self._handlers.get(type(node), ()):
            fn(self, node)
        return True

    def on_leave(self, original_node: cst.CSTNode) -> None:
        if isinstance(original_node, cst.Module):
            self.finish()  # metadata is only available while the walk is on
        self.stack.pop()

    def finish(self) -> None:
        for fn in self.finishers:
            fn()

    # --- metadata helpers ---
    def pos(self, node: cst.CSTNode) -> CodeRange:
        return self.get_metadata(PositionProvider, node)

    def qnames(self, node: cst.CSTNode) -> set[str]:
        try:
            found = self.get_metadata(QualifiedNameProvider, node, set())
        except KeyError:
            return set()
        return {q.name for q in found}

    def dist(self, node: cst.CSTNode) -> str | None:
        """The torch.distributed member ``node`` names, through the file's imports."""
        if not isinstance(node, (cst.Name, cst.Attribute)):
            return None
        return dist_member(self.qnames(node))

    def scope(self, node: cst.CSTNode) -> Scope | None:
        try:
            return self.get_metadata(ScopeProvider, node, None)
        except KeyError:
            return None

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

    # --- reporting ---
    def report(
        self,
        node: cst.CSTNode,
        code: str,
        message: str,
        fix: FixKind = FixKind.NONE,
        edits: Sequence[tuple[cst.CSTNode, Edit]] = (),
        imports: Sequence[tuple[str, str | None]] = (),
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
        )
        p = Pending(finding, (rng.start.line, rng.end.line), list(edits), list(imports))
        self.pending.append(p)
        return p
