"""C++ and CUDA sources: the casts and bindings that nccl2 breaks (NCX301-NCX306).

Everything is read from tree-sitter's syntax tree (comments, strings and ``#if 0`` blocks
are nodes, never matches), in layers that import only downwards:

- :mod:`._parse`: the grammars, and the text they cannot read blanked to same-length text;
- :mod:`._views`: the file through one arm of each ``#if``/``#else`` the grammar cannot
  read with both arms present;
- :mod:`._names` (which class a name means) and :mod:`._members` (legacy-only members);
- :mod:`._index`: one file's (or view's) nodes, names, casts and where it handles nccl2;
- :mod:`._rules`: the findings (:class:`._rules.Hit`);
- :mod:`._fix`: the unsafe rewrites of the findings that have one;
- :mod:`._result`: views merged, suppressions, selection and the edits applied.
"""

from __future__ import annotations

from ..._model import FileResult, Options
from ._fix import add_fixes
from ._index import Scan, may_match
from ._result import file_result, merge_views
from ._rules import Hit, Unreadable, hits, unreadable
from ._views import arm_views, conditionals

__all__ = ["may_match", "read_trees", "scan_cpp"]


def read_trees(scan: Scan) -> list[Scan]:
    """Every tree :func:`scan_cpp` reads a file through (``scan``: the file's own)."""
    bad = unreadable(scan)
    return [scan, *_view_scans(scan, bad)] if bad else [scan]


def _view_scans(scan: Scan, bad: list[Unreadable]) -> list[Scan]:
    """The scans a file's findings come from when ``bad`` (its :func:`unreadable` regions)
    is not empty: the arms of the conditionals around them read one view at a time (what is
    still unreadable then is an error, the rest is scanned); ``[scan]`` when no conditional
    is around them."""
    groups = [g for g in conditionals(scan.parsed, scan.root)
              if len([a for a in g.arms if not a.dead]) > 1 and any(g.start < u.end and u.start < g.end for u in bad)]
    text = scan.src.text
    return [Scan(scan.path, text, scan.options, v) for v in arm_views(scan.src.data, groups)] if groups else [scan]


def scan_cpp(path: str, text: str, options: Options) -> FileResult:
    scan = Scan(path, text, options)
    bad = unreadable(scan)
    if not bad:
        found = list(hits(scan))
        add_fixes(scan, found)
        return file_result([scan], found)
    scans = _view_scans(scan, bad)
    found_in: list[list[Hit]] = []
    bad_in: list[list[Unreadable]] = []
    for s in scans:
        b = bad if s is scan else unreadable(s)
        got = [h for h in hits(s) if not any(u.start <= h.offset < u.end for u in b)]
        add_fixes(s, got)
        found_in.append(got)
        bad_in.append(b)
    errors = sorted((u for b in bad_in for u in b), key=lambda u: (u.line, u.column))
    return file_result(scans, merge_views(scans, found_in, bad_in), errors[0].message() if errors else None)
