"""Which facts of other files one file's analysis consumed (for the cache, ``_cache``).

A file's findings depend on its own text, the options, and a few facts the run gathers
from other files: the project's own helpers (``_xref``: looked up by name), the deprecated
names another file also sets (``_shared``), the line length its config files set
(``_python/_layout``) and the package it is in (``__init__.py`` files above it).  Where a
scanner reads one of those, it calls :func:`consumed`; while :func:`recording` is on (the
cache's worker, around one file), each (kind, key) is kept, and the cache stores the
answers with the file's result: a later run reuses the result only where every answer is
still the same.  Off (no cache), :func:`consumed` costs one test.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["SharedNames", "consumed", "recording"]

_seen: dict[tuple[str, str], None] | None = None


def consumed(kind: str, key: str) -> None:
    """The analysis read fact ``key`` of kind ``kind`` (see ``_cache.answer`` for the kinds)."""
    if _seen is not None:
        _seen[(kind, key)] = None


@contextmanager
def recording() -> Iterator[list[tuple[str, str]]]:
    """Record the facts consumed inside the block into the list it yields (in order met)."""
    global _seen
    out: list[tuple[str, str]] = []
    was, _seen = _seen, {}
    try:
        yield out
    finally:
        out.extend(_seen)
        _seen = was


class SharedNames(frozenset[str]):
    """The run's deprecated names that several files set (``_shared``): a test of a name is a
    fact consumed, whatever the answer."""

    def __contains__(self, name: object) -> bool:
        consumed("shared", str(name))
        return super().__contains__(name)
