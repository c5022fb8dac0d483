"""A comment that only explains a removed line goes with it, in every file kind.

The comment lines right above a line a fix deletes as a whole (no blank line between) go
with it when they are about that line alone (``_explains``: the line ends its paragraph, or the
comment is about what it sets and not about the line after it).  A comment a blank line separates from it (a section header),
one at another indentation (a YAML parent's), the comments that open the file (about the
file, like a Python module's header), and directives written as comments (``#!``,
``#SBATCH``, a Dockerfile's ``# syntax=``, ``# ncclx: ignore``) stay.  Python does the same
(_python/_engine._kept_head).
"""

from __future__ import annotations

import re

from .._explains import explains_only, rollback_comment
from ._text import Edit, LineIndex

__all__ = ["with_comments"]

_ROLLBACK_VALUE = re.compile(r"nccl-legacy|TORCH_DIST_USE_NCCL2", re.IGNORECASE)
_DIRECTIVE = re.compile(r"#!|#\s*(?:SBATCH|PBS|BSUB|\$|syntax\s*=|escape\s*=|check\s*=|ncclx\s*:)", re.IGNORECASE)


def _indent(text: str) -> str:
    return text[: len(text) - len(text.lstrip())]


def _rollback_rewritten(index: LineIndex, edit: Edit) -> Edit:
    """A rewrite of the rollback inside one line (``BACKEND=nccl-legacy`` -> ``nccl``) widened
    over the comments that speak of rolling back (now untrue): the one right above, when the
    line after does not, and one that follows the rewritten word on its line; else ``edit``."""
    text = index.text
    first = index.line_of(edit.start)
    if edit.end > len(text) or index.line_of(max(edit.start, edit.end - 1)) != first:
        return edit
    if not _ROLLBACK_VALUE.search(text[edit.start:edit.end]) or _ROLLBACK_VALUE.search(edit.text):
        return edit
    line_start = index.starts[first]
    row = index.line_text(first)
    rest = row[edit.end - line_start:]
    end = edit.end
    if rest.lstrip().startswith("#") and rollback_comment(rest, ""):  # `B=nccl-legacy  # roll back`
        end = edit.end + len(rest)
    start = _comment_start(index, first, _indent(row))
    following = index.line_text(first + 1) if first + 1 < len(index) else ""
    if start in (line_start, 0) or not rollback_comment(text[start:line_start], following):
        start = line_start  # no comment above, the file's opening comments, or one that stays
    if (start, end) == (line_start, edit.end):
        return edit
    return Edit(start, end, text[line_start:edit.start] + edit.text)


def _comment_start(index: LineIndex, first: int, indent: str) -> int:
    """Where the comment lines right above line ``first`` (same indentation) begin."""
    start, line = index.starts[first], first - 1
    while line >= 0:
        row = index.line_text(line)
        body = row.strip()
        if not body.startswith("#") or _DIRECTIVE.match(body) or _indent(row) != indent:
            break
        if line > 0 and index.line_text(line - 1).rstrip().endswith("\\"):
            break  # inside a continued instruction
        start, line = index.starts[line], line - 1
    return start if line >= 0 else 0


def with_comments(index: LineIndex, edit: Edit) -> Edit:
    """``edit`` widened over the comment lines that explain what it deletes, when it deletes
    whole lines (or rewrites the rollback in a line: ``_rollback_rewritten``); else ``edit``."""
    text = index.text
    if edit.start >= edit.end:
        return edit
    if edit.text:
        return _rollback_rewritten(index, edit)
    first = index.line_of(edit.start)
    if index.starts[first] != edit.start or not (edit.end == len(text) or text[edit.end - 1] == "\n"):
        return edit
    indent = _indent(index.line_text(first))
    start = _comment_start(index, first, indent)
    if start in (edit.start, 0):  # the comments open the file: they are about the file
        return _one_blank(index, edit)
    after = index.line_of(edit.end) if edit.end < len(text) else None
    ends_paragraph = after is None or not index.line_text(after).strip() or len(
        _indent(index.line_text(after))) < len(indent)
    if not ends_paragraph and not explains_only(text[start:edit.start], text[edit.start:edit.end],
                                                index.line_text(after) if after is not None else ""):
        return _one_blank(index, edit)  # a header of the lines that stay
    return _one_blank(index, Edit(start, edit.end, ""))


def _one_blank(index: LineIndex, edit: Edit) -> Edit:
    """A deletion of whole lines between two blank lines takes the blank line after it too:
    one blank line stays where there was one, not two."""
    text, start, end = index.text, edit.start, edit.end
    if start == 0 or end >= len(text) or index.line_text(index.line_of(start - 1)).strip():
        return edit
    after = index.line_of(end)
    if index.line_text(after).strip():
        return edit
    _, _, full = index.bounds(after)
    return Edit(start, full, "")
