"""C++ and CUDA sources: the casts and bindings that nccl2 breaks (NCX301-NCX306).

Everything is read from tree-sitter's syntax tree (comments, strings and ``#if 0`` blocks
are nodes, never matches), in layers that import only downwards:

- :mod:`._parse`: the grammars, and the text they cannot read blanked to same-length text;
- :mod:`._names` (which class a name means) and :mod:`._members` (legacy-only members);
- :mod:`._index`: one file's nodes, names, casts and where it handles nccl2;
- :mod:`._rules`: the findings (:class:`._rules.Hit`);
- :mod:`._fix`: the unsafe rewrites of the findings that have one;
- :mod:`._result`: suppressions, selection and the edits applied, as a ``FileResult``.
"""

from __future__ import annotations

from ..._model import FileResult, Options
from ._fix import add_fixes
from ._index import Scan, may_match
from ._result import file_result
from ._rules import find_error, hits

__all__ = ["may_match", "scan_cpp"]


def scan_cpp(path: str, text: str, options: Options) -> FileResult:
    scan = Scan(path, text, options)
    error = find_error(scan)
    if error is not None:
        return FileResult(path, error=error)
    found = list(hits(scan))
    add_fixes(scan, found)
    return file_result(scan, found)
