"""Text plumbing shared by the non-Python scanners: offsets, lines, edits, suppression.

Every scanner works on the file's text as one string and describes a fix as
:class:`Edit` objects on absolute offsets, so line endings, comments and layout that
no fix touches stay byte-identical.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass

from .._suppress import ALL, HASH, codes_in, ignore_comments

__all__ = [
    "Edit",
    "LineIndex",
    "apply_edits",
    "newline_of",
    "remove_span_lines",
    "remove_word",
    "suppressed",
]


@dataclass(frozen=True)
class Edit:
    start: int
    end: int
    text: str


class LineIndex:
    """Maps offsets to 1-based (line, column) and back to physical lines."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.starts = [0]
        for m in re.finditer("\n", text):
            self.starts.append(m.end())

    def line_of(self, offset: int) -> int:
        """0-based line index of ``offset``."""
        return bisect.bisect_right(self.starts, offset) - 1

    def position(self, offset: int) -> tuple[int, int]:
        line = self.line_of(offset)
        return line + 1, offset - self.starts[line] + 1

    def bounds(self, line: int) -> tuple[int, int, int]:
        """(start, end without the line break, end including it) of 0-based ``line``."""
        start = self.starts[line]
        full = self.starts[line + 1] if line + 1 < len(self.starts) else len(self.text)
        end = full
        if end > start and self.text[end - 1] == "\n":
            end -= 1
        if end > start and self.text[end - 1] == "\r":
            end -= 1
        return start, end, full

    def line_text(self, line: int) -> str:
        start, end, _ = self.bounds(line)
        return self.text[start:end]

    def __len__(self) -> int:
        return len(self.starts)


def newline_of(text: str) -> str:
    """The file's line break: CRLF if its first line ends with one, else LF."""
    i = text.find("\n")
    return "\r\n" if i > 0 and text[i - 1] == "\r" else "\n"


def suppressed(line_text: str, code: str, marker: str = HASH) -> bool:
    """True when a comment (``marker``: `#` or `//`) on the line says `ncclx: ignore` (bare,
    or naming ``code``): the syntax of _suppress, matched per physical line here."""
    for m in ignore_comments(marker).finditer(line_text):
        codes = codes_in(m)
        if codes is ALL or any(code.startswith(c) for c in codes):
            return True
    return False


def remove_span_lines(index: LineIndex, first: int, last: int) -> Edit:
    """Delete 0-based physical lines ``first``..``last`` including their line breaks."""
    start = index.starts[first]
    _, _, end = index.bounds(last)
    return Edit(start, end, "")


def apply_edits(text: str, edits: list[Edit]) -> str:
    """Apply non-overlapping edits (callers drop overlaps first); insertions keep their order."""
    out = []
    pos = 0
    for e in sorted(edits, key=lambda e: (e.start, e.end)):
        out.append(text[pos : e.start])
        out.append(e.text)
        pos = e.end
    out.append(text[pos:])
    return "".join(out)


def remove_word(index: LineIndex, start: int, end: int) -> Edit:
    """Delete the word ``text[start:end]`` and the blanks that separated it from its
    neighbours.  A word alone on a ``\\``-continued line takes the line with it (and,
    on the last line of a continuation, the ``\\`` that led to it); the last word of a
    continued line that starts with others (``ENV A=1 \\``) takes the ``\\`` and the next
    line's indentation, so that the next line joins it (``ENV B=2``, never a bare ``ENV \\``)."""
    text = index.text
    line = index.line_of(start)
    ls, le, full = index.bounds(line)
    before, after = text[ls:start], text[end:le].strip()
    if after == "\\" and before.strip() and line + 1 < len(index):
        nls, nle, _ = index.bounds(line + 1)
        k = nls
        while k < nle and text[k] in " \t":
            k += 1
        if k < nle and text[k] != "#":
            return Edit(start, k, "")
    if line > 0 and not before.strip() and after in ("", "\\"):
        pls, ple, _ = index.bounds(line - 1)
        prev = text[pls:ple].rstrip()
        if prev.endswith("\\") and len(prev) > 1:
            if after == "\\":
                return Edit(ls, full, "")
            cut = pls + len(prev) - 1
            while cut > pls and text[cut - 1] in " \t":
                cut -= 1
            return Edit(cut, le, "")
    j = end
    while j < le and text[j] in " \t":
        j += 1
    if j < le and text[j] != "#" and j > end:
        return Edit(start, j, "")
    i = start
    while i > ls and text[i - 1] in " \t":
        i -= 1
    return Edit(i, end, "")
