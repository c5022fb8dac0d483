"""The single visitor every Python rule runs in, and what rules report through it.

Rules are plain functions registered per node type (``on(cst.Call)``); the visitor walks
the tree once and calls each handler for each node of its type.  Handlers may register
``finish`` callbacks that run after the walk (for rules that need whole-file facts, such
as "is this constant used anywhere else").  Findings carry their edits; the engine applies
only the edits of findings that survive selection, suppression and the fix policy.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar, Union

import libcst as cst
from libcst.metadata import (
    CodeRange,
    MetadataWrapper,
    PositionProvider,
    QualifiedNameProvider,
    Scope,
    ScopeProvider,
)
from libcst.metadata.base_provider import LazyValue  # type: ignore[attr-defined]

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


# The last name component of every torch name a rule resolves.  Resolving names needs
# libcst's scope analysis, the costliest step by far; it runs (once per file) only when a
# node ending in one of these names, or in an import alias of one, is met.
RESOLVED_NAMES = frozenset({
    "init_process_group", "new_group", "new_subgroups", "new_subgroups_by_enumeration",
    "is_backend_available", "Backend", "NCCL", "ProcessGroupNCCL", "ProcessGroupNCCL2",
    "ProcessGroupNCCLLazy", "get_backend", "BAND", "BOR", "BXOR", "_dump_nccl_trace",
    "_dump_nccl_trace_json", "_dump_nccl_trace_pickle", "_dump_fr_trace", "_dump_fr_trace_json",
    "_reset_fr_trace", "set_device", "environ", "isinstance", "issubclass", "torch",
})
_ALIAS = re.compile(r"\b(\w+)\s+as\s+(\w+)")


def _value(v: Any) -> Any:
    return v() if isinstance(v, LazyValue) else v


class Analyzer(cst.CSTVisitor):
    """One walk over a parsed module.  Metadata (positions, scopes, qualified names) is
    computed lazily, on first use, from the wrapper: most files never need scopes."""

    def __init__(self, path: str, wrapper: MetadataWrapper, source: str, options: Options, active: set[str]) -> None:
        super().__init__()
        self.path = path
        self.wrapper = wrapper
        self.source = source
        self.module = wrapper.module
        self._positions: Mapping[cst.CSTNode, CodeRange] | None = None
        self._qnames: Mapping[cst.CSTNode, Any] | None = None
        self._scopes: Mapping[cst.CSTNode, Any] | None = None
        self._aliases: set[str] | None = None
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

    # --- metadata helpers (lazy) ---
    def pos(self, node: cst.CSTNode) -> CodeRange:
        if self._positions is None:
            self._positions = self.wrapper.resolve(PositionProvider)
        return self._positions[node]

    def _may_resolve(self, node: cst.CSTNode) -> bool:
        last = node.value if isinstance(node, cst.Name) else node.attr.value if isinstance(node, cst.Attribute) else None
        if last is None:
            return False
        if last in RESOLVED_NAMES:
            return True
        if self._aliases is None:
            self._aliases = {
                m.group(2) for line in self.source.splitlines() if "import" in line and " as " in line
                for m in _ALIAS.finditer(line) if m.group(1) in RESOLVED_NAMES or m.group(1) in ("distributed", "cuda", "os")
            }
        return last in self._aliases

    def qnames(self, node: cst.CSTNode) -> set[str]:
        """Qualified names of a Name/Attribute through the file's imports (only for names a
        rule can ask about; anything else resolves to nothing)."""
        if not self._may_resolve(node):
            return set()
        if self._qnames is None:
            self._qnames = self.wrapper.resolve(QualifiedNameProvider)
        found = _value(self._qnames.get(node, ()))
        return {q.name for q in found}

    def dist(self, node: cst.CSTNode) -> str | None:
        """The torch.distributed member ``node`` names, through the file's imports."""
        if not isinstance(node, (cst.Name, cst.Attribute)):
            return None
        return dist_member(self.qnames(node))

    def scope(self, node: cst.CSTNode) -> Scope | None:
        if self._scopes is None:
            self._scopes = self.wrapper.resolve(ScopeProvider)
        found = _value(self._scopes.get(node))
        return found if isinstance(found, Scope) else None

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
