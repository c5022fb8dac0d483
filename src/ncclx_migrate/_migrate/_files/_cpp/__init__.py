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

:func:`scan_cpp` is one pass; the scanner applies it to the fixed point (``_fixpoint``), as for
every other kind: a fix copies code (the ``if`` for nccl2's class repeats the body, with any
``"nccl"`` compare in it) that the next pass fixes too.
"""

from __future__ import annotations

from ..._lines import Alignment, line_map_edits
from ..._model import FileResult, Options
from ._fix import add_fixes
from ._index import Scan, may_match
from ._result import file_result, merge_views
from ._rules import Hit, Unreadable, hits, unreadable
from ._versions import VersionArms
from ._views import arm_views, conditionals

__all__ = ["Found", "may_match", "read_trees", "scan_cpp"]


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


# The views of one text and their hits (with fixes), and the error if some region is unreadable
Found = tuple[list[Scan], list[Hit], str | None]


def scan_cpp(path: str, text: str, options: Options,
             memo: dict[str, Found] | None = None) -> tuple[FileResult, Alignment | None]:
    """One pass over ``text``: its findings, the fixed text, and the lines of ``text`` against it.
    ``memo``: the hits of the texts the passes of one fixed point read (which fixes a pass
    applies depends on its options, the hits do not: a report reads the file as given twice)."""
    found = memo.get(text) if memo is not None else None
    if found is None:
        found = _found(path, text, options)
        if memo is not None:
            memo[text] = found
    result, edits = file_result(*found, options=options)
    if result.new_text is None:
        return result, None
    return result, line_map_edits(text, [(e.start, e.end, e.text) for e in edits])


def _compiled(scan: Scan, found: list[Hit], versions: list[VersionArms]) -> list[Hit]:
    """``found`` less the hits in code that no torch with nccl2 compiles (:mod:`._versions`);
    ``versions`` holds the file's arms once read."""
    if not found or b"#" not in scan.parsed:
        return found
    if not versions:
        versions.append(VersionArms(conditionals(scan.parsed, scan.root), scan.options.target_torch))
    return [h for h in found if not versions[0].never_nccl2(h.offset)]


def _found(path: str, text: str, options: Options) -> Found:
    scan = Scan(path, text, options)
    bad = unreadable(scan)
    versions: list[VersionArms] = []
    if not bad:
        found = _compiled(scan, list(hits(scan)), versions)
        add_fixes(scan, found)
        return [scan], found, None
    scans = _view_scans(scan, bad)
    found_in: list[list[Hit]] = []
    bad_in: list[list[Unreadable]] = []
    for s in scans:
        b = bad if s is scan else unreadable(s)
        got = _compiled(scan, [h for h in hits(s) if not any(u.start <= h.offset < u.end for u in b)], versions)
        add_fixes(s, got)
        found_in.append(got)
        bad_in.append(b)
    errors = sorted((u for b in bad_in for u in b), key=lambda u: (u.line, u.column))
    if not versions:
        versions.append(VersionArms(conditionals(scan.parsed, scan.root), options.target_torch))
    return scans, merge_views(scans, found_in, bad_in, versions[0]), errors[0].message() if errors else None
