"""Scanners for the files around the Python code: shell and sbatch scripts, Dockerfiles,
YAML (Kubernetes, compose, Helm values), ``.env`` files and Jupyter notebooks.

The runner calls :func:`scan` for every file that is not ``.py``; it returns None for
kinds handled elsewhere (or not at all).  Rules: NCX201 (``TORCH_DIST_USE_NCCL2``),
NCX202 (``nccl-legacy`` as a backend value), NCX203 (deprecated or nccl2-ignored
env names, from ``ncclx_migrate._envvars``), NCX204 (an explicit ``nccl2`` backend);
notebooks also get the Python rules.  C++ and CUDA sources get NCX301-NCX306 (``_cpp``).
"""

from __future__ import annotations

import os
import re

from .._fixpoint import fixed_point
from .._lines import Alignment, line_map_edits
from .._model import FileResult, Options
from ._checks import Collector

__all__ = ["KINDS", "file_kind", "kinds_checked", "scan"]

_SHEBANG = re.compile(r"^\ufeff?#!\s*\S*?(?:/|\benv\s+(?:-\S+\s+)*)(?:ba|da|k|z)?sh\b")
_SHELL_EXT = (".sh", ".bash", ".sbatch", ".slurm")
_CPP_EXT = (".cpp", ".cc", ".cxx", ".cu", ".cuh", ".h", ".hpp", ".hh")

# Every kind of file ncclx migrate checks ("python" is the runner's; the others are what
# file_kind returns), as a user reads it: the messages that list the kinds are made from it.
KINDS: dict[str, str] = {
    "python": "Python (.py, .pyw)",
    "shell": f"shell scripts ({', '.join(_SHELL_EXT)}, .envrc, or a shebang)",
    "dockerfile": "Dockerfiles",
    "yaml": "YAML",
    "dotenv": ".env",
    "notebook": "notebooks",
    "cpp": f"C++/CUDA ({', '.join(_CPP_EXT)})",
}


def kinds_checked() -> str:
    """The kinds of :data:`KINDS`, for a message: "Python (...), shell scripts (...), ..."."""
    return ", ".join(KINDS.values())


def file_kind(path: str, text: str | None = None) -> str | None:
    """A key of :data:`KINDS` other than "python" ("shell", "dockerfile", ...), or None."""
    base = os.path.basename(path)
    lower = base.lower()
    if lower.endswith(_CPP_EXT):
        return "cpp"
    if lower.endswith(_SHELL_EXT) or lower == ".envrc":
        return "shell"
    if lower.endswith((".yaml", ".yml")):
        return "yaml"
    if lower.endswith(".ipynb"):
        return "notebook"
    if lower == ".env" or lower.endswith(".env"):
        return "dotenv"
    if (lower in ("dockerfile", "containerfile") or lower.endswith(".dockerfile")
            or lower.startswith(("dockerfile.", "containerfile."))):
        return "dockerfile"
    if text is not None and "." not in base and _SHEBANG.match(text):
        return "shell"
    return None


# Every table name contains "NCCL"; a file without it, "nccl-legacy" or "nccl2" cannot match.
def _may_match(text: str) -> bool:
    return "NCCL" in text or "nccl-legacy" in text or "nccl2" in text


def scan(path: str, text: str, options: Options, *, precheck: bool = True) -> FileResult | None:
    """Findings (and fixes, per ``options``) for one non-Python file, or None if not ours.

    ``precheck=False`` parses even files that cannot match (benchmarks/bench_files.py
    checks that it changes no finding)."""
    kind = file_kind(path, text)
    if kind is None:
        return None
    if kind == "cpp":
        from ._cpp import Found, may_match, scan_cpp

        if precheck and not may_match(text):
            return FileResult(path)
        # A report computes the fixed point too: a fix can copy code with a finding of its own.
        memo: dict[str, Found] = {}
        return fixed_point(text, options, lambda t, opts, verify: scan_cpp(path, t, opts, memo))
    if kind == "notebook":
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


def _scan_once(kind: str, path: str, text: str, options: Options) -> tuple[FileResult, Alignment | None]:
    sink = Collector(path, text, options)
    if kind == "shell":
        from ._shell import scan_shell

        scan_shell(path, text, sink)
    elif kind == "dotenv":
        from ._dotenv import scan_dotenv

        scan_dotenv(text, sink)
    elif kind == "dockerfile":
        from ._dockerfile import scan_dockerfile

        scan_dockerfile(text, sink)
    else:
        from ._yaml import scan_yaml

        scan_yaml(text, sink)
    result = sink.result()
    if result.new_text is None:
        return result, None
    return result, line_map_edits(text, [(e.start, e.end, e.text) for e in sink.taken])
