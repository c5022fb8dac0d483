"""The findings of one C++ file as a ``FileResult``: the views of its ``#if`` arms merged,
selection, ``// ncclx: ignore[...]`` comments, and the edits of the fixes the options ask
for (with their include blocks)."""

from __future__ import annotations

import re

from ..._model import FileResult, Finding, FixKind, Options, is_selected
from ..._suppress import IGNORE, codes_in
from .._text import Edit, LineIndex, apply_edits
from ._fix import include_edit
from ._index import Scan
from ._layout import column_limit, fit_edits
from ._names import text_of
from ._rules import Hit, Unreadable
from ._versions import VersionArms
from ._views import Arm

__all__ = ["UNDER_WIDTH", "file_result", "merge_views"]

UNDER_WIDTH = 32  # at most this much of the condition in a message
MESSAGE_WIDTH = 88  # a message never runs past ruff's line length (the why is in the detail)

_SUPPRESS = re.compile(IGNORE)


def merge_views(scans: list[Scan], found: list[list[Hit]], bad: list[list[Unreadable]],
                versions: VersionArms | None = None) -> list[Hit]:
    """One list of hits from the views of a file, each once.  A hit that some view showing its
    place does not find is dropped when that view handles nccl2 there (one arm of a
    ``__has_include`` guard casts to nccl2's class: the code handles both); otherwise it says
    under which arms it holds.  Its fix is kept only from a view that blanked nothing of the
    text the fix copies or replaces.  ``versions``: a view keeping an arm that no torch with
    nccl2 compiles shows nothing, and an arm every such torch compiles goes unsaid."""
    first: dict[tuple[int, str], Hit] = {}
    where: dict[tuple[int, str], list[int]] = {}
    for i, (scan, hits) in enumerate(zip(scans, found, strict=True)):
        for h in hits:
            key = (h.offset, h.code)
            if h.edits and not _whole(scan, h):
                h.edits, h.fix, h.include = [], FixKind.NONE, ""
            if key not in first or (h.edits and not first[key].edits):
                first[key] = h
            where.setdefault(key, []).append(i)
    out: list[Hit] = []
    for key, h in first.items():
        shown = [i for i, s in enumerate(scans) if (s.view is None or s.view.sees(h.offset))
                 and not any(u.start <= h.offset < u.end for u in bad[i])
                 and not (versions is not None and any(versions.without_nccl2(a) for a in _arms(s)))]
        missing = [i for i in shown if i not in where[key]]
        if any(_handles_nccl2(scans[i], h.offset) for i in missing):
            continue
        home = scans[where[key][0]]
        lo, hi = _function_range(home, h.offset)
        elsewhere = {id(a) for j in missing for a in _arms(scans[j])}  # arms the views without it keep
        arms: dict[int, Arm] = {}
        for i in where[key]:
            for a in _arms(scans[i]):
                if versions is not None and versions.every_nccl2(a):
                    continue
                if a.start <= h.offset < a.end or (missing and lo <= a.start < hi and id(a) not in elsewhere):
                    arms[id(a)] = a
        if arms:
            said = (versions.wording(a) if versions is not None else a.condition
                    for a in sorted(arms.values(), key=lambda a: a.start))
            _under(h, " && ".join(dict.fromkeys(said)))
        out.append(h)
    return out


def _arms(scan: Scan) -> list[Arm]:
    return scan.view.arms if scan.view is not None else []


def _function_range(scan: Scan, offset: int) -> tuple[int, int]:
    n = scan.root.descendant_for_byte_range(offset, offset)
    lo, hi = 0, len(scan.parsed)
    while n is not None:
        if n.type == "function_definition":
            lo, hi = n.start_byte, n.end_byte
        n = n.parent
    return lo, hi


def _handles_nccl2(scan: Scan, offset: int) -> bool:
    n = scan.root.descendant_for_byte_range(offset, offset)
    return n is not None and scan.handles_nccl2(n, scan.main)


def _whole(scan: Scan, h: Hit) -> bool:
    """Did ``scan``'s view blank nothing from the line of ``h`` to the end of its edits (so
    that the text a fix copies and replaces is the file's own)?"""
    if scan.view is None or not scan.view.blanked:
        return True
    text = scan.src.text
    at = scan.src.char(h.offset)
    lo, hi = text.rfind("\n", 0, at) + 1, max(e.end for e in h.edits)
    return not any(scan.src.char(s) < hi and lo < scan.src.char(e) for s, e in scan.view.blanked)


def _under(h: Hit, condition: str) -> None:
    """Say in ``h`` under which condition only it is compiled: whole in the detail, and in the
    message where it fits ruff's line length (:data:`MESSAGE_WIDTH`), else cut, or just "one
    ``#if`` arm" where too little is left to read."""
    h.detail = f"Only under `{condition}`. {h.detail}"
    room = MESSAGE_WIDTH - len(h.message) - len(" (only under ``)")
    if len(condition) <= min(room, UNDER_WIDTH):
        h.message = f"{h.message} (only under `{condition}`)"
    elif min(room, UNDER_WIDTH) >= 16:
        h.message = f"{h.message} (only under `{condition[: min(room, UNDER_WIDTH) - 3]}...`)"
    else:
        h.message = f"{h.message} (one #if arm)"


def file_result(scans: list[Scan], hits: list[Hit], error: str | None = None,
                options: Options | None = None) -> tuple[FileResult, list[Edit]]:
    """The result of the views ``scans`` (the first places the include blocks) under
    ``options`` (by default the scan's: which codes, which fixes), and the edits (sorted) that
    make its new text."""
    scan = scans[0]
    options = options or scan.options
    if not hits:
        return FileResult(scan.path, error=error), []
    index = LineIndex(scan.src.text)
    quiet: dict[int, frozenset[str]] = {}
    for s in scans:
        for row, codes in _suppressions(s).items():
            quiet[row] = quiet.get(row, frozenset()) | codes
    findings: list[Finding] = []
    taken: list[Edit] = []
    includes: list[str] = []
    for hit in sorted(hits, key=lambda h: (h.offset, h.code)):
        if not is_selected(hit.code, options):
            continue
        offset = scan.src.char(hit.offset)
        row, col = index.position(offset)
        codes = quiet.get(row, frozenset())
        if "*" in codes or any(hit.code.startswith(c) for c in codes):
            continue
        applied = False
        # An edit overlapping one taken waits for the next pass of the fixed point (_fixpoint).
        if error is None and hit.edits and options.wants_fix(hit.fix) \
                and not any(_overlaps(e, t) for e in hit.edits for t in taken):
            taken.extend(hit.edits)
            applied = True
            if hit.include and hit.include not in includes:
                includes.append(hit.include)
        findings.append(Finding(scan.path, row, col, hit.code, hit.message, hit.fix, applied, hit.detail))
    for inc in includes:
        edit = include_edit(scan, inc)
        if edit is not None:
            taken.append(edit)
    taken.sort(key=lambda e: (e.start, e.end))
    limit = column_limit(scan.path) if taken else None
    if limit is not None:
        taken = fit_edits(scan.src.text, taken, limit)
    new_text = apply_edits(scan.src.text, taken) if taken else None
    if new_text == scan.src.text:
        new_text, taken = None, []
    return FileResult(scan.path, findings, new_text, error), taken


def _suppressions(scan: Scan) -> dict[int, frozenset[str]]:
    out: dict[int, frozenset[str]] = {}
    for c in scan.nodes["comment"]:
        for m in _SUPPRESS.finditer(text_of(c)):
            line = c.start_point.row + 1
            out[line] = out.get(line, frozenset()) | codes_in(m)
    return out


def _overlaps(a: Edit, b: Edit) -> bool:
    return (a.start < b.end and b.start < a.end) or (a.start == a.end == b.start == b.end)
