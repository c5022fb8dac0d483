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

__all__ = ["PROJECT_FILES", "Folders", "context_files", "is_project_root", "project_root"]

# Files that make a folder a project root (besides `.git` and any `requirements*.txt`).
PROJECT_FILES = ("pyproject.toml", "setup.py", "setup.cfg", "environment.yml", "environment.yaml")


def is_project_root(d: Path) -> bool:
    """Does folder ``d`` hold a project file (:data:`PROJECT_FILES`, a ``requirements*.txt``) or
    ``.git``?  One listing of the folder (the files as its entries say, links followed)."""
    try:
        with os.scandir(d) as entries:
            for e in entries:
                n = e.name
                if n in PROJECT_FILES or (n.startswith("requirements") and n.endswith(".txt")):
                    if e.is_file():
                        return True
                elif n == ".git" and (not e.is_symlink() or os.path.exists(e.path)):
                    return True
        return False
    except OSError:  # (a folder that can be searched but not listed: each name tested)
        pass
    try:
        return (any((d / n).is_file() for n in PROJECT_FILES) or (d / ".git").exists()
                or any(p.is_file() for p in d.glob("requirements*.txt")))
    except OSError:
        return False


class Folders:
    """One run's answers about folders, each found once (a run's files share their folders
    and parents): each folder's real path (its parent's, plus one lstat of its own name) and
    whether it is a project root."""

    def __init__(self) -> None:
        self.real: dict[str, Path] = {}
        self.roots: dict[Path, bool] = {}

    def resolve(self, folder: str) -> Path:
        """``Path(folder).resolve()``, from the parent's answer where the folder is no link."""
        folder = os.path.abspath(folder)
        got = self.real.get(folder)
        if got is None:
            parent, name = os.path.split(folder)
            if not name or parent == folder:
                got = Path(folder).resolve()
            elif os.path.islink(folder):
                got = Path(folder).resolve()
            else:
                got = self.resolve(parent) / name
                if name in (os.curdir, os.pardir):
                    got = Path(folder).resolve()
            self.real[folder] = got
        return got

    def root(self, start: str) -> Path | None:
        """:func:`project_root` of the folder ``start``, with this run's answers."""
        here = self.resolve(start)
        for d in (here, *here.parents):
            root = self.roots.get(d)
            if root is None:
                root = self.roots[d] = is_project_root(d)
            if root:
                return d
        return None


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
    folders = Folders()
    # A walked folder that is a project root holds the root of every file under it (at or
    # below it, so covered): no folder under it is tested.
    rooted = [w for w in covered if is_project_root(w)]
    for f in files:
        folder = os.path.dirname(os.path.abspath(f))
        if folder not in roots:
            here = folders.resolve(folder)
            inside = any(here == w or w in here.parents for w in rooted)
            roots[folder] = None if inside else folders.root(folder)
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
