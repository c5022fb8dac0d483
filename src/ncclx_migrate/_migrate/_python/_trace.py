"""Which lines of the fixed text came from which lines of the source, as the fixes record it.

Each transform that writes the fix (the engine's own, and libcst's import visitors) records,
for every statement it leaves, the statement it came from and whether anything in it changed.
Chained, that says which statements of the fixed module are those of the source, untouched or
rewritten; their lines (one code generation of each tree, counting newlines) are the blocks
that :func:`_lines.align` joins in linear time.  No diff of the two texts.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, Protocol, TypeVar, Union, cast

import libcst as cst
from libcst._nodes.internal import CodegenState

from .._lines import Alignment, align, lines_of
from ._walk import Kinds

__all__ = ["Lines", "StatementLines", "Trace", "alignment", "is_statement", "pair_copies", "trace_of", "traced"]

STATEMENTS = (cst.SimpleStatementLine, cst.BaseCompoundStatement)
is_statement = Kinds(*STATEMENTS)  # (also the unit test of _positions)
_Statement = Union[cst.SimpleStatementLine, cst.BaseCompoundStatement]  # noqa: UP007
# Nodes that hold statements (and are not expressions): the walk that pairs two copies of a
# tree descends only into these.
_HOLDERS = (cst.Module, cst.BaseCompoundStatement, cst.BaseSuite, cst.Else, cst.ExceptHandler,
            cst.ExceptStarHandler, cst.Finally, cst.MatchCase)

# id(statement after) -> (that statement, the statement before it came from, changed)
Trace = dict[int, tuple[cst.CSTNode, cst.CSTNode, bool]]

# id(statement) -> (the statement, its first line, its last line)
Lines = dict[int, tuple[cst.CSTNode, int, int]]

T = TypeVar("T")


class _Traced(Protocol):
    came_from: Trace


def trace_of(visitor: object) -> Trace:
    """The :data:`Trace` a :func:`traced` transform recorded."""
    return cast(_Traced, visitor).came_from


def _imports(node: cst.CSTNode) -> bool:
    return isinstance(node, cst.SimpleStatementLine) and any(
        isinstance(s, (cst.Import, cst.ImportFrom)) for s in node.body)


def traced(base: type[T]) -> type[T]:
    """``base`` (a CSTTransformer) that records its :data:`Trace` in ``came_from``.  A statement
    changed when the transform counted a change inside it (``self.changes += 1``), when a
    statement in it went or came, or (for libcst's import visitors, which count nothing) when
    it is an import line that is not what it was."""

    class Traced(base):  # type: ignore[valid-type,misc]
        def __init__(self, *args: Any) -> None:
            super().__init__(*args)
            self.came_from: Trace = {}
            self.changes = getattr(self, "changes", 0)
            self._marks: list[int] = []
            self._copied: dict[int, cst.CSTNode] = {}

        def transform_module_impl(self, tree: cst.Module) -> cst.Module:
            # transform_module visits a deep copy (MetadataWrapper): its statements are paired
            # with those of the tree it was given
            given = getattr(self, "_given", None)
            if given is not None and given is not tree:
                self._copied = pair_copies(given, tree)
            out: cst.Module = super().transform_module_impl(tree)
            return out

        def transform_module(self, tree: cst.Module) -> cst.Module:
            self._given = tree
            out: cst.Module = super().transform_module(tree)
            return out

        def on_visit(self, node: cst.CSTNode) -> bool:
            if isinstance(node, STATEMENTS):
                self._marks.append(self.changes)
            return bool(super().on_visit(node))

        def on_leave(self, original_node: cst.CSTNode, updated_node: cst.CSTNode):  # type: ignore[no-untyped-def]
            result = super().on_leave(original_node, updated_node)
            if isinstance(original_node, STATEMENTS):
                changed = self.changes > self._marks.pop() or (
                    _imports(original_node) and not original_node.deep_equals(result))
                if isinstance(result, STATEMENTS):
                    self.came_from[id(result)] = (result, self._copied.get(id(original_node), original_node), changed)
                if changed or not isinstance(result, STATEMENTS):
                    self.changes += 1
            return result

    return Traced


def pair_copies(a: cst.CSTNode, b: cst.CSTNode) -> dict[int, cst.CSTNode]:
    """id of each statement of ``b``, a deep copy of ``a``, to the statement of ``a`` it copies."""
    out: dict[int, cst.CSTNode] = {}
    todo = [(a, b)]
    while todo:
        x, y = todo.pop()
        if isinstance(y, STATEMENTS):
            out[id(y)] = x
        for cx, cy in zip(x.children, y.children, strict=False):
            if isinstance(cy, _HOLDERS):
                todo.append((cx, cy))
    return out


class StatementLines(CodegenState):
    """Code generation that also records the first and last line of every statement."""

    def __init__(self, module: cst.Module) -> None:
        super().__init__(default_indent=module.default_indent, default_newline=module.default_newline)
        self.lines: Lines = {}
        self._counted = 0
        self._line = 1
        self._starts: list[int] = []

    def _now(self) -> int:
        tokens = self.tokens
        if len(tokens) > self._counted:
            self._line += "".join(tokens[self._counted:]).count("\n")
            self._counted = len(tokens)
        return self._line

    def before_codegen(self, node: cst.CSTNode) -> None:
        if is_statement(node):
            self._starts.append(self._now() + len(cast(_Statement, node).leading_lines))

    def after_codegen(self, node: cst.CSTNode) -> None:
        if is_statement(node):
            self.lines[id(node)] = (node, self._starts.pop(), self._now() - 1)

    def pop_trailing_newline(self) -> None:
        self._now()
        super().pop_trailing_newline()
        self._counted = len(self.tokens)

    @classmethod
    def of(cls, module: cst.Module) -> tuple[str, Lines]:
        """(the module's code, each statement with its first and last line, by id)."""
        state = cls(module)
        module._codegen(state)
        return "".join(state.tokens), state.lines


def _origin(node: cst.CSTNode, traces: Sequence[Trace]) -> tuple[cst.CSTNode, bool]:
    changed = False
    for trace in reversed(traces):
        entry = trace.get(id(node))
        if entry is not None and entry[0] is node:
            node, changed = entry[1], changed or entry[2]
    return node, changed


def _blocks(final: Lines, before: Lines, traces: Sequence[Trace]) -> Iterator[tuple[int, int, int, int, bool]]:
    for node, nf, nl in final.values():
        origin, changed = _origin(node, traces)
        old = before.get(id(origin))
        if old is None or old[0] is not origin:
            continue  # a statement a fix added
        _, of, ol = old
        if not changed:
            yield of, ol, nf, nl, True
        elif isinstance(origin, cst.BaseCompoundStatement):
            yield of, of, nf, nf, False  # its statements inside give their own blocks
        else:
            yield of, ol, nf, nl, False


def alignment(source: str, before_lines: Lines, code: str, after_lines: Lines, traces: Sequence[Trace]) -> Alignment:
    """The lines of ``source`` (whose statements' lines are ``before_lines``) against ``code``
    (whose statements' lines are ``after_lines``), through the transforms' ``traces``."""
    blocks = list(_blocks(after_lines, before_lines, traces))
    return align(lines_of(source), lines_of(code), blocks)
