"""Where a line of a text is once a fix has rewritten it (and back)."""

from __future__ import annotations

import difflib
from collections.abc import Iterable

__all__ = ["line_map", "line_map_edits"]


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


def line_map_edits(old: str, edits: Iterable[tuple[int, int, str]]) -> dict[int, int]:
    """:func:`line_map` for ``old`` with the ``(start, end, text)`` replacements applied
    (sorted, not overlapping), in time linear in the text: only the lines the edits touch
    are diffed, and the lines between them move by the line count the edits before added."""
    # The whole lines each edit touches; edits that share a line are one region.
    regions: list[tuple[int, int, list[tuple[int, int, str]]]] = []
    for start, end, text in edits:
        line_start = old.rfind("\n", 0, start) + 1
        line_end = old.find("\n", end)
        line_end = len(old) if line_end < 0 else line_end
        if regions and line_start <= regions[-1][1]:
            regions[-1] = (regions[-1][0], max(line_end, regions[-1][1]), [*regions[-1][2], (start, end, text)])
        else:
            regions.append((line_start, line_end, [(start, end, text)]))
    out: dict[int, int] = {}
    delta = 0  # new line minus old line, after the regions so far
    done = 0  # old lines mapped so far
    pos, line = 0, 1  # an offset in ``old`` and its line
    for line_start, line_end, group in regions:
        line += old.count("\n", pos, line_start)
        first = line
        for n in range(done + 1, first):
            out[n] = n + delta
        region = old[line_start:line_end]
        parts, at = [], line_start
        for start, end, text in group:
            parts += [old[at:start], text]
            at = end
        new_region = "".join(parts) + old[at:line_end]
        for n, m in line_map(region, new_region).items():
            out[first + n - 1] = first + delta + m - 1
        done = first + region.count("\n")
        for n in range(first, done + 1):
            out.setdefault(n, first + delta)  # an empty line has no entry in line_map
        delta += new_region.count("\n") - region.count("\n")
        pos, line = line_end, done
    for n in range(done + 1, old.count("\n") + 2 - old.endswith("\n")):
        out[n] = n + delta
    return out
