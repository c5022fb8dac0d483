"""A comment that only explains a removed line goes with it, in every file kind.

The comment lines right above a line a fix deletes as a whole (no blank line between) are
about that line: they go too.  A comment a blank line separates from it (a section header),
one at another indentation (a YAML parent's), the comments that open the file (about the
file, like a Python module's header), and directives written as comments (``#!``,
``#SBATCH``, a Dockerfile's ``# syntax=``, ``# ncclx: ignore``) stay.  Python does the same
(_python/_engine._kept_head).
"""

from __future__ import annotations

import re

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
    if line < 0:  # the comments open the file: they are about the file (Python's module header)
        return edit
    return Edit(start, edit.end, "") if start != edit.start else edit
