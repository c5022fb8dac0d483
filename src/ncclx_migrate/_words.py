"""Counted nouns for every message: "1 rank", "3 ranks", "1,024 reports", never "rank(s)"; and
the verb that agrees with them ("1 job builds", "2 jobs build")."""

from __future__ import annotations

__all__ = ["count", "verb"]


def count(n: int, noun: str, many: str | None = None) -> str:
    """``n`` and ``noun``, singular for 1 and plural otherwise (``many``, else ``noun + "s"``)."""
    return f"{n:,} {noun if n == 1 else many or noun + 's'}"


def verb(n: int, one: str, many: str) -> str:
    """The form of a verb that agrees with ``n`` things: ``one`` ("builds") for 1, else ``many``."""
    return one if n == 1 else many
