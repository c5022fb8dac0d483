"""Scanners for the files around the Python code, one per kind in ``_kinds.KINDS``.

The runner calls :func:`scan` for every file that is not ``.py``; it returns None for
kinds handled elsewhere (or not at all).  Rules: NCX201 (``TORCH_DIST_USE_NCCL2``),
NCX202 (``nccl-legacy`` as a backend value), NCX203 (deprecated or nccl2-ignored
env names, from ``ncclx_migrate._torch.envvars``), NCX204 (an explicit ``nccl2`` backend);
notebooks also get the Python rules.  C++ and CUDA sources get NCX301-NCX306 (``_cpp``).
"""

from __future__ import annotations

from .._fixpoint import fixed_point
from .._lines import Alignment, line_map_edits
from .._model import FileResult, Options
from ._checks import Collector
from ._kinds import Kind, descriptions, file_kind, kind_named

__all__ = ["descriptions", "file_kind", "kinds_checked", "scan"]


def kinds_checked() -> str:
    """Every kind of file ncclx migrate checks, for a message: made from the registry (_kinds)."""
    return "; ".join(["Python (.py, .pyw)", *descriptions()])


# Every table name contains "NCCL"; a file without it, "nccl-legacy" or "nccl2" cannot match.
def _may_match(text: str) -> bool:
    return "NCCL" in text or "nccl-legacy" in text or "nccl2" in text


def scan(path: str, text: str, options: Options, *, precheck: bool = True) -> FileResult | None:
    """Findings (and fixes, per ``options``) for one non-Python file, or None if not ours.

    ``precheck=False`` parses even files that cannot match (benchmarks/bench_files.py
    checks that it changes no finding)."""
    name = file_kind(path, text)
    if name is None:
        return None
    kind = kind_named(name)
    if kind.pipeline == "cpp":
        from ._cpp import Found, may_match, scan_cpp

        if precheck and not may_match(text):
            return FileResult(path)
        # A report computes the fixed point too: a fix can copy code with a finding of its own.
        memo: dict[str, Found] = {}
        return fixed_point(text, options, lambda t, opts, verify: scan_cpp(path, t, opts, memo))
    if kind.pipeline == "notebook":
        from ._notebook import scan_notebook

        return scan_notebook(path, text, options)
    if precheck and not _may_match(text):
        return FileResult(path)
    if not (options.apply_safe or options.apply_unsafe):
        return _scan_once(kind, path, text, options)[0]
    # A fix whose edit overlaps another's waits for a later pass of the same run (_fixpoint).
    # (A report needs none: its labels do not depend on overlaps.)
    return fixed_point(text, options, lambda t, opts, verify: _scan_once(kind, path, t, opts),
                       again=lambda result: any(options.wants_fix(f.fix) and not f.applied for f in result.findings))


def _scan_once(kind: Kind, path: str, text: str, options: Options) -> tuple[FileResult, Alignment | None]:
    sink = Collector(path, text, options, comments=kind.comments)
    fn = kind.scan_fn()
    if kind.path_arg:
        fn(path, text, sink)
    else:
        fn(text, sink)
    result = sink.result()
    if result.new_text is None:
        return result, None
    return result, line_map_edits(text, [(e.start, e.end, e.text) for e in sink.taken])
