"""The project a run's files belong to, and the files of it that the run was not given.

Two kinds of label rest on other files: a deprecated name that another file also sets makes
its add unsafe (``_shared``), and the project's own helpers say which GPU a call picks and
which backend an init gets (``_xref``).  A run over fewer files (a pre-commit hook passes only
the changed ones) must not label a fix less conservatively than the run over the whole tree,
so the cross-file pre-pass reads every file of each file's project, not only those passed;
only the files passed are scanned.  The project root is found as the target torch is: the
nearest folder up from the file that holds a project file or ``.git``.  A file under no such
folder is its own scope (only the files passed are read).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

__all__ = ["PROJECT_FILES", "context_files", "is_project_root", "project_root"]

# Files that make a folder a project root (besides `.git` and any `requirements*.txt`).
PROJECT_FILES = ("pyproject.toml", "setup.py", "setup.cfg", "environment.yml", "environment.yaml")


def is_project_root(d: Path) -> bool:
    try:
        return (any((d / n).is_file() for n in PROJECT_FILES) or (d / ".git").exists()
                or any(p.is_file() for p in d.glob("requirements*.txt")))
    except OSError:
        return False


def project_root(start: str | Path, seen: dict[Path, bool] | None = None) -> Path | None:
    """The nearest folder at or above ``start`` (a file: its folder) that is a project root;
    ``seen``: the folders already tested (one run's many folders share their parents)."""
    here = Path(start).resolve()
    if not here.is_dir():
        here = here.parent
    for d in (here, *here.parents):
        root = seen.get(d) if seen is not None else None
        if root is None:
            root = is_project_root(d)
            if seen is not None:
                seen[d] = root
        if root:
            return d
    return None


def context_files(files: Iterable[str], walked: Iterable[str] = (), exclude: Iterable[str] = ()) -> list[str]:
    """The files of the projects of ``files`` that are not among them (the same walk and
    ``exclude`` as the run's own).  ``walked``: the folders the run walked; a project at or
    below one of them is whole in ``files`` already and is not walked again."""
    from ._discover import discover

    files = list(files)
    covered = [Path(p).resolve() for p in walked if os.path.isdir(p)]
    roots: dict[str, Path | None] = {}
    seen: dict[Path, bool] = {}
    for f in files:
        folder = os.path.dirname(os.path.abspath(f))
        if folder not in roots:
            roots[folder] = project_root(folder, seen)
    out: list[str] = []
    given: set[str] | None = None
    real_folders: dict[str, str] = {}

    def real(p: str) -> str:  # os.path.realpath(p), resolving each folder once
        folder, name = os.path.split(p)
        folder = folder or "."
        if os.path.islink(p):
            return os.path.realpath(p)
        if folder not in real_folders:
            real_folders[folder] = os.path.realpath(folder)
        return os.path.join(real_folders[folder], name)

    for root in sorted({r for r in roots.values() if r is not None}):
        if any(root == w or w in root.parents for w in covered):
            continue
        if given is None:
            given = {real(f) for f in files}
        out.extend(p for p in discover([str(root)], exclude, []) if real(p) not in given)
    return out
