"""Rank lists as ranges: ``0-4, 6-63`` (so 16k ranks stay one line)."""

from __future__ import annotations

__all__ = ["ranges"]


def ranges(ranks: list[int]) -> str:
    """``[0, 1, 2, 3, 5, 7, 8]`` -> ``'0-3, 5, 7, 8'`` (runs of three or more collapse)."""
    out: list[str] = []
    rs = sorted(ranks)
    i = 0
    while i < len(rs):
        j = i
        while j + 1 < len(rs) and rs[j + 1] == rs[j] + 1:
            j += 1
        if j - i >= 2:
            out.append(f"{rs[i]}-{rs[j]}")
        else:
            out.extend(str(r) for r in rs[i : j + 1])
        i = j + 1
    return ", ".join(out)
