"""Counted nouns for every message: "1 rank", "3 ranks", "1,024 reports", never "rank(s)"."""

from __future__ import annotations

__all__ = ["count"]


def count(n: int, noun: str, many: str | None = None) -> str:
    """``n`` and ``noun``, singular for 1 and plural otherwise (``many``, else ``noun + "s"``)."""
    return f"{n:,} {noun if n == 1 else many or noun + 's'}"
