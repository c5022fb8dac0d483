"""Makefiles, read with tree-sitter-make: ``export NAME = value`` directives (what make puts
in every recipe's environment) and recipe lines (shell commands: the shell kind's analysis).

A make variable that is not exported is in no environment; one whose name says backend
(``BACKEND ?= nccl-legacy``) is still checked for its value, as a Dockerfile ``ARG`` is.
Each recipe line runs in a shell of its own, so a fix there never adds or drops a line
(``Ctx(lines_ok=False)``), and never adds a ``$`` (make would expand it first).
The safe add for an export is ``export NEW ?= $(OLD)``: NEW keeps a value from the
environment or the command line, else takes OLD's, which is what torch read before.
"""

from __future__ import annotations

import re

from ._checks import Collector, EnvAssign
from ._grammar import Node, Offsets, nodes, parse
from ._shell import Ctx, continued_lines, scan_shell_range
from ._text import Edit, LineIndex, newline_of

__all__ = ["scan_make"]

_WANTED = frozenset({"export_directive", "variable_assignment", "recipe_line"})
_LITERAL = re.compile(r"[^$]*")


def scan_make(text: str, sink: Collector) -> None:
    root, offsets = parse("tree_sitter_make", text)
    continued_lines(text, sink)
    index = LineIndex(text)
    ctx = Ctx(text, sink, lines_ok=False, quotable=False, refs="k8s")  # $(B) is make's reference
    for node in nodes(root, _WANTED):
        if node.type == "recipe_line":
            start, end = offsets.char(node.start_byte), offsets.char(node.end_byte)
            while start < end and text[start] in "@-+":  # echo off, ignore errors, always run
                start += 1
            scan_shell_range(ctx, start, end)
        elif node.type == "export_directive":
            for assign in node.children:
                if assign.type == "variable_assignment":
                    _assign(text, index, offsets, assign, sink, exported=node)
        else:
            _assign(text, index, offsets, node, sink, exported=None)


def _assign(text: str, index: LineIndex, offsets: Offsets, node: Node, sink: Collector,
            exported: Node | None) -> None:
    name_node = node.children[0] if node.children else None
    op = next((c for c in node.children if c.type in ("=", ":=", "::=", "?=", "+=", "!=")), None)
    if name_node is None or name_node.type != "word" or op is None:
        return
    name_start = offsets.char(name_node.start_byte)
    name = text[name_start:offsets.char(name_node.end_byte)]
    value_node = next((c for c in node.children if c.start_byte >= op.end_byte and c.type == "text"), None)
    if value_node is not None:
        value_start, value_end = offsets.char(value_node.start_byte), offsets.char(value_node.end_byte)
    else:
        value_start = value_end = offsets.char(op.end_byte)
    raw_value = text[value_start:value_end]
    literal = _LITERAL.fullmatch(raw_value) is not None and op.type not in ("+=", "!=")
    if exported is None:  # a make variable only: its value may still reach --backend $(B)
        sink.env(EnvAssign(name, name_start, raw_value if literal else None, raw_value, value_start,
                           sets_env=False))
        return
    first = index.line_of(offsets.char(exported.start_byte))
    last = index.line_of(max(offsets.char(exported.start_byte), offsets.char(exported.end_byte) - 1))
    line_start, (_, _, line_end) = index.starts[first], index.bounds(last)
    row = text[line_start:offsets.char(exported.end_byte)].rstrip("\r\n")
    nl = newline_of(text)
    once = len(exported.children) == 2 and op.type not in ("+=",)

    def insert(row_text: str) -> list[Edit]:
        if line_end == len(text) and not text.endswith("\n"):
            return [Edit(line_end, line_end, nl + row_text)]
        return [Edit(line_end, line_end, row_text + nl)]

    def add(new: str) -> list[Edit] | None:
        if not once or "\\" in row:
            return None
        rel = name_start - line_start
        return insert(row[:rel] + new + row[rel + len(name):])

    def keep_add(new: str, alone: bool) -> list[Edit] | None:
        if not alone or not once or re.search(rf"\bunexport\b[^\n]*\b{re.escape(name)}\b", text):
            return None  # OLD is set elsewhere too, or taken out of the environment later
        lead = text[line_start:name_start]
        return insert(f"{lead}{new} ?= $({name})")

    def remove() -> list[Edit] | None:
        return [Edit(line_start, line_end, "")] if once else None

    sink.env(EnvAssign(name, name_start, raw_value if literal else None, raw_value, value_start,
                       add=add, remove=remove, keep_add=keep_add,
                       also_lines=tuple(range(first + 1, last + 1))))
