"""Where a line of a text is once a fix has rewritten it (and back)."""

from __future__ import annotations

import difflib

__all__ = ["line_map"]


def line_map(old: str, new: str, *, back: bool = False) -> dict[int, int]:
    """Line ``n`` (1-based) of ``old`` to the same line of ``new`` (``back``: of ``new`` to
    ``old``); a line inside a rewritten region goes to that region's start, and lines not in
    the table stay where they are."""
    out: dict[int, int] = {}
    matcher = difflib.SequenceMatcher(None, old.splitlines(), new.splitlines(), autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if back:
            i1, i2, j1, j2 = j1, j2, i1, i2
        for i in range(i1, i2):
            out[i + 1] = j1 + 1 + (i - i1 if tag == "equal" else min(i - i1, max(j2 - j1 - 1, 0)))
    return out
