"""Views of a file through its ``#if``/``#else`` arms, for code the grammar cannot read whole.

tree-sitter parses the text as written, with every arm of a conditional present: valid C++
that puts a function header or an opening brace in both arms of an ``#if``/``#else``
(two torch majors) becomes one ERROR node over the whole enclosing block.  The C
preprocessor never sees both arms at once, so neither do the views: a view keeps one arm of
each such conditional and blanks the other arms and the directive lines to spaces (newlines
kept), so every byte offset, line and column is the file's own.  Views are made until every
live arm was seen once (``#if 0`` arms are dead); each is parsed on its own.

The directives are the grammar's own tokens: a line starting with ``#if``, ``#else``... is a
directive unless the first parse put its ``#`` in a comment or string.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from tree_sitter import Node

__all__ = ["Arm", "Group", "View", "arm_views", "conditionals", "negate"]

_DIRECTIVE = re.compile(rb"(?m)^[ \t]*#[ \t]*(ifdef|ifndef|if|elifdef|elifndef|elif|else|endif)\b"
                        rb"((?:[^\n\\]|\\\r?\n|\\(?!\r?\n))*)")
_NOT_CODE = ("comment", "string_literal", "string_content", "raw_string_literal", "raw_string_content", "char_literal",
             "system_lib_string")
_MAX_VIEWS = 8


@dataclass
class Arm:
    start: int  # the first byte after its directive line
    end: int  # the first byte of the next directive line of its group
    condition: str  # when the arm is compiled, as C preprocessor text
    dead: bool = False  # ``#if 0``: never compiled
    # The same as (directive condition, the value it must have) pairs, all of which hold:
    # an ``#elif``'s or ``#else``'s earlier conditions false, its own true (._versions).
    terms: tuple[tuple[str, bool], ...] = ()


@dataclass
class Group:
    """One ``#if`` ... ``#endif``: its arms and its directive lines."""

    start: int
    end: int
    arms: list[Arm] = field(default_factory=list)
    directives: list[tuple[int, int]] = field(default_factory=list)


@dataclass
class View:
    data: bytes  # the file with the other arms and the chosen groups' directives blanked
    arms: list[Arm]  # the arms this view keeps, of the groups it splits
    blanked: list[tuple[int, int]]  # byte ranges turned into spaces

    def sees(self, offset: int) -> bool:
        return not any(s <= offset < e for s, e in self.blanked)


_FLIP = {">=": "<", "<": ">=", "<=": ">", ">": "<=", "==": "!=", "!=": "=="}


def negate(cond: str) -> str:
    if re.fullmatch(r"!?\s*(?:defined\s*\(\s*\w+\s*\)|\w+)", cond):
        return cond[1:].strip() if cond.startswith("!") else f"!{cond}"
    compare = re.fullmatch(r"([\w.]+)\s*(>=|<=|==|!=|<|>)\s*([\w.]+)", cond)
    if compare:  # TORCH_VERSION_MAJOR >= 2 -> TORCH_VERSION_MAJOR < 2
        return f"{compare.group(1)} {_FLIP[compare.group(2)]} {compare.group(3)}"
    return f"!({cond})"


def _condition(kind: bytes, rest: bytes) -> str:
    text = " ".join(re.sub(r"\\\r?\n", " ", rest.decode("utf-8", "replace")).split())
    text = re.sub(r"\s*(?://.*|/\*.*?\*/)\s*$", "", text)  # a trailing comment
    if kind in (b"ifdef", b"elifdef"):
        return f"defined({text})"
    if kind in (b"ifndef", b"elifndef"):
        return f"!defined({text})"
    return text


def conditionals(data: bytes, root: Node) -> list[Group]:
    """Every complete ``#if`` ... ``#endif`` group of the file, in document order."""
    stack: list[Group] = []
    done: list[Group] = []
    earlier: list[list[str]] = []  # per open group: the conditions of its arms so far
    for m in _DIRECTIVE.finditer(data):
        hash_at = data.index(b"#", m.start())
        node = root.descendant_for_byte_range(hash_at, hash_at + 1)
        if node is not None and node.type in _NOT_CODE:
            continue
        kind, rest = m.group(1), m.group(2)
        line_end = m.end() + 1 if data[m.end():m.end() + 1] == b"\n" else m.end()
        if kind.startswith(b"if"):
            g = Group(m.start(), line_end, directives=[(m.start(), line_end)])
            cond = _condition(kind, rest)
            g.arms.append(Arm(line_end, line_end, cond, dead=cond in ("0", "false"), terms=((cond, True),)))
            stack.append(g)
            earlier.append([cond])
            continue
        if not stack:
            continue  # an #else / #endif without its #if (the file is cut): no group
        g, prior = stack[-1], earlier[-1]
        g.arms[-1].end = m.start()
        g.directives.append((m.start(), line_end))
        if kind == b"endif":
            g.end = line_end
            done.append(stack.pop())
            earlier.pop()
            continue
        nots = " && ".join(negate(c) for c in prior)
        terms = tuple((c, False) for c in prior)
        if kind == b"else":
            cond, dead = nots, False
        else:
            own = _condition(kind, rest)
            cond, dead = f"{nots} && {own}", own in ("0", "false")
            terms += ((own, True),)
            prior.append(own)
        g.arms.append(Arm(line_end, line_end, cond, dead, terms))
    return sorted(done, key=lambda g: g.start)


def arm_views(data: bytes, groups: list[Group]) -> list[View]:
    """Views of ``data`` that split ``groups``: each keeps one live arm of every group and
    blanks the rest of it; together they show every live arm (at most :data:`_MAX_VIEWS`)."""
    live = [a for g in groups for a in g.arms if not a.dead]
    seen: set[int] = set()
    views: list[View] = []
    while len(views) < _MAX_VIEWS and (not views or any(id(a) not in seen for a in live)):
        blanked: list[tuple[int, int]] = []
        kept: list[Arm] = []
        for g in groups:  # document order: an outer group before the groups inside it
            if any(s <= g.start < e for s, e in blanked):
                continue
            arm = _choose(g, groups, seen)
            blanked += g.directives
            blanked += [(a.start, a.end) for a in g.arms if a is not arm]
            if arm is not None:
                kept.append(arm)
        fresh = {id(a) for a in kept} - seen
        if views and not fresh:
            break
        seen |= fresh
        views.append(View(_blank(data, blanked), kept, sorted(blanked)))
    return views


def _choose(g: Group, groups: list[Group], seen: set[int]) -> Arm | None:
    """The arm to keep: one not seen yet, else the one holding most unseen arms of inner groups."""
    arms = [a for a in g.arms if not a.dead]
    if not arms:
        return None
    for a in arms:
        if id(a) not in seen:
            return a

    def unseen_inside(a: Arm) -> int:
        return sum(1 for h in groups for b in h.arms
                   if a.start <= h.start < a.end and not b.dead and id(b) not in seen)

    return max(arms, key=unseen_inside)


def _blank(data: bytes, spans: list[tuple[int, int]]) -> bytes:
    buf = bytearray(data)
    for s, e in spans:
        buf[s:e] = re.sub(rb"[^\r\n]", b" ", bytes(buf[s:e]))
    return bytes(buf)
