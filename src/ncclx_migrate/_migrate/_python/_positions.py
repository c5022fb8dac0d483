"""Positions of nodes without generating the whole module's code again.

libcst's PositionProvider generates the code of the whole module to place every node; in a
large file with a few findings that is most of the work.  Here a *unit* is a statement of the
module or of a class body: where a unit starts comes from Python's own parser (``ast``, in C),
and a node's position from generating only the innermost unit that holds it, with the same
codegen state PositionProvider uses.  Each unit's first line is checked against the source;
on any mismatch (a syntax ``ast`` of this Python cannot parse, a statement it groups
otherwise) :meth:`Units.pos` returns None and the caller falls back to the whole module.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Sequence

import libcst as cst
from libcst._position import CodePosition, CodeRange
from libcst.metadata.position_provider import PositionProvidingCodegenState

from ._trace import is_statement
from ._walk import Kinds

__all__ = ["Units"]

# Nodes no rule asks the position of (about half of a tree): not recorded, to save memory (one
# asked for anyway falls back to the whole module).
_TRIVIA = (cst.SimpleWhitespace, cst.ParenthesizedWhitespace, cst.TrailingWhitespace, cst.Newline,
           cst.Comma, cst.Dot, cst.LeftParen, cst.RightParen, cst.AssignEqual, cst.Colon)
_is_trivia = Kinds(*_TRIVIA)


class _Computed:
    """What PositionProvidingCodegenState writes into (it expects a provider)."""

    def __init__(self) -> None:
        self._computed: dict[cst.CSTNode, CodeRange] = {}


class Units:
    def __init__(self, module: cst.Module, source: str, tree: ast.Module | None = None) -> None:
        self.module = module
        self.source = source
        self.tree = tree  # Python's own, where the caller has it
        self._owner: dict[cst.CSTNode, tuple[cst.CSTNode, tuple[str, ...]]] = {}  # node -> (unit, indents)
        self._stack: list[tuple[cst.CSTNode, tuple[str, ...]]] = []
        self._outer: dict[int, cst.CSTNode | None] = {}  # id(unit) -> the unit around it
        self._lines: dict[int, int] | None = None  # id(unit) -> its first line (ast)
        self._done: dict[int, tuple[dict[cst.CSTNode, CodeRange], int]] = {}
        self._starts: list[int] | None = None  # offset of each line
        self.broken = False

    # --- during the walk: which unit holds each node ---
    def enter(self, node: cst.CSTNode, stack: Sequence[cst.CSTNode]) -> None:
        if is_statement(node) and len(stack) >= 2:
            parent = stack[-2]
            if type(parent) is cst.Module:
                self._outer[id(node)] = None
                self._stack.append((node, ()))
            elif (isinstance(parent, cst.IndentedBlock) and len(stack) >= 3 and isinstance(stack[-3], cst.ClassDef)
                  and self._stack and self._stack[-1][0] is stack[-3]):
                indent = parent.indent if parent.indent is not None else self.module.default_indent
                self._outer[id(node)] = stack[-3]
                self._stack.append((node, (*self._stack[-1][1], indent)))
        if self._stack and not _is_trivia(node):
            self._owner[node] = self._stack[-1]

    def leave(self, node: cst.CSTNode) -> None:
        if self._stack and self._stack[-1][0] is node:
            self._stack.pop()

    def untouched(self, nodes: Sequence[cst.CSTNode]) -> set[int] | None:
        """ids of the units that hold none of ``nodes`` (a transform of those needs not go
        into them); None when one of ``nodes`` is outside every unit."""
        holding: set[int] = set()
        for node in nodes:
            owner = self._owner.get(node)
            if owner is None:
                return None
            unit: cst.CSTNode | None = owner[0]
            while unit is not None and id(unit) not in holding:
                holding.add(id(unit))
                unit = self._outer.get(id(unit))
        return {u for u in self._outer if u not in holding}

    # --- after (or during) the walk ---
    def pos(self, node: cst.CSTNode) -> CodeRange | None:
        if self.broken:
            return None
        # a node not visited yet (a rule looking into a child) is most likely in the unit the
        # walk is in: if not, it is not in that unit's positions either (and None falls back)
        owner = self._owner.get(node) or (self._stack[-1] if self._stack else None)
        if owner is None:
            return None
        unit, indents = owner
        done = self._done.get(id(unit))
        if done is None:
            done = self._generate(unit, indents)
            if done is None:
                self.broken = True
                return None
        computed, shift = done
        rng = computed.get(node)
        if rng is None:
            return None
        return CodeRange(CodePosition(rng.start.line + shift, rng.start.column),
                         CodePosition(rng.end.line + shift, rng.end.column))

    def _generate(self, unit: cst.CSTNode, indents: tuple[str, ...]) -> tuple[dict[cst.CSTNode, CodeRange], int] | None:
        if self._lines is None:
            self._lines = _unit_lines(self.module, self.source, self.tree) or {}
        line = self._lines.get(id(unit))
        if line is None:
            return None
        holder = _Computed()
        state = PositionProvidingCodegenState(default_indent=self.module.default_indent,
                                              default_newline=self.module.default_newline,
                                              provider=holder)  # type: ignore[arg-type]
        state.indent_tokens = list(indents)
        unit._codegen(state)
        computed = holder._computed
        start = computed[unit].start
        shift = line - start.line
        # the unit's first line, as generated, must be that line of the source
        generated = "".join(state.tokens).split("\n")[start.line - 1]
        if self._starts is None:
            self._starts = [0, *(m.end() for m in re.finditer("\n", self.source))]
        if not 0 < line <= len(self._starts):
            return None
        at = self._starts[line - 1]
        end = self.source.find("\n", at)
        given = self.source[at:end if end >= 0 else len(self.source)]
        if generated.rstrip("\r") != given.rstrip("\r"):
            return None
        done = (computed, shift)
        self._done[id(unit)] = done
        return done


def _unit_lines(module: cst.Module, source: str, tree: ast.Module | None) -> dict[int, int] | None:
    """id of each statement of the module and of its class bodies -> its first line, from
    ``ast``: its statements on one line are one libcst line (``a; b``)."""
    if tree is None:
        try:
            tree = ast.parse(source)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            return None
    out: dict[int, int] = {}

    def match(stmts: Sequence[cst.BaseStatement], body: list[ast.stmt]) -> bool:
        groups: list[list[ast.stmt]] = []
        end = 0
        for s in body:
            if groups and s.lineno <= end:
                groups[-1].append(s)
            else:
                groups.append([s])
            end = max(end, s.end_lineno or s.lineno)
        if len(groups) != len(stmts):
            return False
        for st, group in zip(stmts, groups, strict=True):
            out[id(st)] = group[0].lineno
            if isinstance(st, cst.ClassDef) and isinstance(st.body, cst.IndentedBlock):
                if not isinstance(group[0], ast.ClassDef) or not match(st.body.body, group[0].body):
                    return False
        return True

    return out if match(module.body, tree.body) else None
