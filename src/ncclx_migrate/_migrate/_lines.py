"""Where a line of a text is once fixes have rewritten it (and back), from what the fixes changed.

No whole-file diffing: the fixes say which stretches of the old text they rewrote (edits with
their offsets, or the statements they touched); the lines between those stretches are the same
text moved by the line count the rewrites before them added.  Inside a rewritten stretch the
lines equal at its start and end still map one to one; the rest goes to the start of what
replaced it.  Time is linear in the texts.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Sequence

__all__ = ["Alignment", "align", "line_map_edits", "lines_of"]


def lines_of(text: str) -> list[str]:
    """The lines as the scanners and libcst number them (only ``\\n`` ends one)."""
    return text.split("\n")


class Alignment:
    """Two texts as consecutive segments ``(old_start, old_end, new_start, new_end, same)``
    (1-based, half-open): a ``same`` segment maps line for line, any other maps each of its
    lines to the same offset in the other side, clamped to its last line."""

    def __init__(self, segments: list[tuple[int, int, int, int, bool]]) -> None:
        self.segments = segments
        self._old = [s for s in segments if s[1] > s[0]]
        self._new = [s for s in segments if s[3] > s[2]]
        self._old_starts = [s[0] for s in self._old]
        self._new_starts = [s[2] for s in self._new]

    def forward(self, line: int) -> int:
        """Old line ``line`` in the new text."""
        k = bisect.bisect_right(self._old_starts, line) - 1
        if k < 0:
            return line
        o1, o2, n1, n2, _ = self._old[k]
        if line >= o2:  # past the end
            return line - o2 + n2
        return n1 + min(line - o1, max(n2 - n1 - 1, 0))

    def back(self, line: int) -> int:
        """New line ``line`` in the old text."""
        k = bisect.bisect_right(self._new_starts, line) - 1
        if k < 0:
            return line
        o1, o2, n1, n2, _ = self._new[k]
        if line >= n2:
            return line - n2 + o2
        return o1 + min(line - n1, max(o2 - o1 - 1, 0))

    def table(self, *, back: bool = False) -> dict[int, int]:
        """Every line of one side to the other (``back``: new to old)."""
        out: dict[int, int] = {}
        for o1, o2, n1, n2, _ in self.segments:
            a1, a2, b1, b2 = (n1, n2, o1, o2) if back else (o1, o2, n1, n2)
            for i in range(a1, a2):
                out[i] = b1 + min(i - a1, max(b2 - b1 - 1, 0))
        return out


def align(old: Sequence[str], new: Sequence[str],
          blocks: Iterable[tuple[int, int, int, int, bool]]) -> Alignment:
    """The :class:`Alignment` of the lines ``old`` and ``new`` (from :func:`lines_of`) given
    ``blocks`` the fixes know: ``(old_first, old_last, new_first, new_last, same)``, 1-based and
    inclusive, that correspond (``same``: line for line; else as a rewritten stretch).
    Blocks are taken in order of ``old_first``; one that does not follow the last taken on
    both sides is skipped.  In a rewritten block and between blocks, the lines equal at the
    start and at the end map one to one and the middle is one rewritten stretch."""
    segments: list[tuple[int, int, int, int, bool]] = []
    po = pn = 1  # the first lines not yet aligned
    end_o, end_n = len(old) + 1, len(new) + 1

    def gap(o2: int, n2: int) -> None:
        nonlocal po, pn
        o1, n1 = po, pn
        k = 0
        while o1 + k < o2 and n1 + k < n2 and old[o1 + k - 1] == new[n1 + k - 1]:
            k += 1
        if k:
            segments.append((o1, o1 + k, n1, n1 + k, True))
        o1, n1 = o1 + k, n1 + k
        t = 0
        while o2 - t > o1 and n2 - t > n1 and old[o2 - t - 2] == new[n2 - t - 2]:
            t += 1
        if o2 - t > o1 or n2 - t > n1:
            segments.append((o1, o2 - t, n1, n2 - t, False))
        if t:
            segments.append((o2 - t, o2, n2 - t, n2, True))
        po, pn = o2, n2

    for o1, o2, n1, n2, same in sorted(blocks, key=lambda b: (b[0], b[2])):
        if o1 < po or n1 < pn or o2 < o1 or n2 < n1 or o2 >= end_o or n2 >= end_n:
            continue
        gap(o1, n1)
        if same and o2 - o1 == n2 - n1:
            segments.append((o1, o2 + 1, n1, n2 + 1, True))
            po, pn = o2 + 1, n2 + 1
        else:  # the lines equal at its start and end still map one to one
            gap(o2 + 1, n2 + 1)
    gap(end_o, end_n)
    return Alignment(segments)


def line_map_edits(old: str, edits: Iterable[tuple[int, int, str]]) -> Alignment:
    """The :class:`Alignment` of ``old`` and ``old`` with the ``(start, end, text)``
    replacements applied (sorted, not overlapping), in time linear in the text: the lines each
    edit touches are one rewritten stretch (edits that share a line, one stretch), and the
    lines between them move by the line count the edits before added."""
    blocks: list[tuple[int, int, int, int, bool]] = []
    new_parts: list[str] = []
    at = 0  # offset in ``old`` copied up to
    line = 1  # line of ``old`` at ``at``
    delta = 0  # new line minus old line at ``at``
    region: list[int] | None = None  # [old first line, old last line, new first line] being built
    last_end_line = 0
    for start, end, text in edits:
        first = line + old.count("\n", at, start)
        if region is not None and first > last_end_line:
            blocks.append((region[0], last_end_line, region[2], last_end_line + delta, False))
            region = None
        if region is None:
            region = [first, first, first + delta]
        new_parts += [old[at:start], text]
        last_end_line = first + old.count("\n", start, end)
        delta += text.count("\n") - old.count("\n", start, end)
        line, at = last_end_line, end
    if region is not None:
        blocks.append((region[0], last_end_line, region[2], last_end_line + delta, False))
    new = "".join(new_parts) + old[at:]
    return align(lines_of(old), lines_of(new), blocks)
