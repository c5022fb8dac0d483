"""The findings of one C++ file as a ``FileResult``: selection, ``// ncclx: ignore[...]``
comments, and the edits of the fixes the options ask for (with their include blocks)."""

from __future__ import annotations

import re

from ..._model import FileResult, Finding, is_selected
from ..._suppress import IGNORE, codes_in
from .._text import Edit, LineIndex, apply_edits
from ._fix import include_edit
from ._index import Scan
from ._names import text_of
from ._rules import Hit

__all__ = ["file_result"]

_SUPPRESS = re.compile(IGNORE)


def file_result(scan: Scan, hits: list[Hit]) -> FileResult:
    if not hits:
        return FileResult(scan.path)
    index = LineIndex(scan.src.text)
    quiet = _suppressions(scan)
    findings: list[Finding] = []
    taken: list[Edit] = []
    includes: list[str] = []
    for hit in sorted(hits, key=lambda h: (h.offset, h.code)):
        if not is_selected(hit.code, scan.options):
            continue
        offset = scan.src.char(hit.offset)
        row, col = index.position(offset)
        codes = quiet.get(row, frozenset())
        if "*" in codes or any(hit.code.startswith(c) for c in codes):
            continue
        applied = False
        if hit.edits and scan.options.wants_fix(hit.fix) \
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
    new_text = apply_edits(scan.src.text, taken) if taken else None
    return FileResult(scan.path, findings, None if new_text == scan.src.text else new_text)


def _suppressions(scan: Scan) -> dict[int, frozenset[str]]:
    out: dict[int, frozenset[str]] = {}
    for c in scan.nodes["comment"]:
        for m in _SUPPRESS.finditer(text_of(c)):
            line = c.start_point.row + 1
            out[line] = out.get(line, frozenset()) | codes_in(m)
    return out


def _overlaps(a: Edit, b: Edit) -> bool:
    return (a.start < b.end and b.start < a.end) or (a.start == a.end == b.start == b.end)
