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

from .._explains import explains_only
from ._text import Edit, LineIndex

__all__ = ["with_comments"]

_DIRECTIVE = re.compile(r"#!|#\s*(?:SBATCH|PBS|BSUB|\$|syntax\s*=|escape\s*=|check\s*=|ncclx\s*:)", re.IGNORECASE)


def _indent(text: str) -> str:
    return text[: len(text) - len(text.lstrip())]


def with_comments(index: LineIndex, edit: Edit) -> Edit:
    """``edit`` widened over the comment lines that explain what it deletes, when it deletes
    whole lines; else ``edit`` itself."""
    text = index.text
    if edit.text or edit.start >= edit.end:
        return edit
    first = index.line_of(edit.start)
    if index.starts[first] != edit.start or not (edit.end == len(text) or text[edit.end - 1] == "\n"):
        return edit
    indent = _indent(index.line_text(first))
    start, line = edit.start, first - 1
    while line >= 0:
        row = index.line_text(line)
        body = row.strip()
        if not body.startswith("#") or _DIRECTIVE.match(body) or _indent(row) != indent:
            break
        if line > 0 and index.line_text(line - 1).rstrip().endswith("\\"):
            break  # inside a continued instruction
        start, line = index.starts[line], line - 1
    if line < 0 or start == edit.start:  # the comments open the file: they are about the file
        return edit
    after = index.line_of(edit.end) if edit.end < len(text) else None
    ends_paragraph = after is None or not index.line_text(after).strip() or len(
        _indent(index.line_text(after))) < len(indent)
    if not ends_paragraph and not explains_only(text[start:edit.start], text[edit.start:edit.end],
                                                index.line_text(after) if after is not None else ""):
        return edit  # a header of the lines that stay
    return Edit(start, edit.end, "")
