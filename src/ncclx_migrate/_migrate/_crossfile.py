"""The kinds of cross-file fact a file's analysis asks of its project (``_project.Project``).

A file's findings depend on its own text, the options, and a few facts the run gathers
from other files: the project's own helpers (``_xref``: looked up by name), the deprecated
names another file also sets (``_shared``), the line length its config files set
(``_python/_layout``), the package it is in (``__init__.py`` files above it) and the
functions the project's C++ files bind to Python (``_files/_cpp/_bindings``).  A scanner
asks each through ``Project.asked`` (the indexes below report their own lookups to it);
while the project records (the cache's worker, around one file), each (kind, key) is kept,
and the cache stores the project's answers with the file's result: a later run reuses the
result only where every answer is still the same (``Project.answer``).
"""

from __future__ import annotations

from collections.abc import Callable

__all__ = ["SharedNames", "ignored"]


def ignored(kind: str, key: str) -> None:
    """The ``asked`` of an index that belongs to no project yet (nothing records)."""


class SharedNames(frozenset[str]):
    """The run's deprecated names that several files set (``_shared``): a test of a name is a
    fact asked of the project (``asked``: its ``Project.asked``), whatever the answer."""

    asked: Callable[[str, str], None] = staticmethod(ignored)

    def __contains__(self, name: object) -> bool:
        self.asked("shared", str(name))
        return super().__contains__(name)
