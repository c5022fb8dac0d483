"""The ``project`` object of ``ncclx migrate --format json``: which repository a report is of.

``ncclx report`` adds up one report per repository: it needs the repository's name, where it
lives (remote, commit), the torch the findings were judged for, and its CODEOWNERS rules to
route each finding to a team.  Git's files are read directly (no ``git`` process, no network);
credentials in a remote URL are dropped, as the report may travel.
"""

from __future__ import annotations

import configparser
import os
import re
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from .. import _codeowners

__all__ = ["project_info"]

_SHA = re.compile(r"[0-9a-f]{40}(?:[0-9a-f]{24})?")


def _find_root(start: Path) -> tuple[Path, bool]:
    """(the repository root, whether it is a git work tree): the nearest folder holding .git
    (a report is of the repository, whatever subproject it holds), else the project root
    (``_project_files.project_root``, the one definition), else ``start``."""
    from ._project_files import project_root

    here = start if start.is_dir() else start.parent
    for d in (here, *here.parents):
        if (d / ".git").exists():
            return d, True
    root = project_root(here)
    return (root, False) if root is not None else (here, False)


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None


def _git_dirs(root: Path) -> tuple[Path, Path] | None:
    """(git dir, common dir): a worktree's or submodule's .git is a file naming its git dir."""
    dot = root / ".git"
    if dot.is_file():
        text = _read(dot) or ""
        if not text.startswith("gitdir:"):
            return None
        gitdir = (root / text[len("gitdir:"):].strip()).resolve()
    else:
        gitdir = dot
    common = _read(gitdir / "commondir")
    return gitdir, ((gitdir / common.strip()).resolve() if common else gitdir)


def _commit(gitdir: Path, common: Path) -> str | None:
    head = (_read(gitdir / "HEAD") or "").strip()
    if _SHA.fullmatch(head):
        return head  # detached
    if not head.startswith("ref:"):
        return None
    ref = head[4:].strip()
    for base in (gitdir, common):
        value = (_read(base / ref) or "").strip()
        if _SHA.fullmatch(value):
            return value
    for line in (_read(common / "packed-refs") or "").splitlines():
        sha, _, name = line.partition(" ")
        if name.strip() == ref and _SHA.fullmatch(sha):
            return sha
    return None  # a branch with no commit yet


def _without_credentials(url: str) -> str:
    parts = urlsplit(url)
    if parts.scheme and "@" in parts.netloc:
        return urlunsplit(parts._replace(netloc=parts.netloc.rpartition("@")[2]))
    return url


def _remote(common: Path) -> str | None:
    """The URL of ``origin``, else of the first remote in .git/config."""
    parser = configparser.ConfigParser(strict=False, interpolation=None)
    text = _read(common / "config")
    if not text:
        return None
    try:
        parser.read_string(text)
    except configparser.Error:
        return None
    urls = {}
    for section in parser.sections():
        m = re.fullmatch(r'remote\s+"(.+)"', section.strip())
        if m and parser.has_option(section, "url"):
            urls[m.group(1)] = parser.get(section, "url").strip().strip('"')
    url = urls.get("origin") or next(iter(urls.values()), None)
    return _without_credentials(url) if url else None


def project_info(start: str, target: tuple[int, int]) -> dict[str, Any]:
    """The ``project`` object for a run over ``start`` (its first path)."""
    root, is_git = _find_root(Path(start).resolve())
    remote = commit = None
    if is_git:
        dirs = _git_dirs(root)
        if dirs is not None:
            commit = _commit(*dirs)
            remote = _remote(dirs[1])
    owners = _codeowners.find(root)
    return {
        "name": root.name,
        "directory": str(root),
        # Findings' relative paths are relative to the working directory: this is it, in the root.
        "base": Path(os.path.relpath(Path.cwd(), root)).as_posix(),
        "remote": remote,
        "commit": commit,
        "target_torch": f"{target[0]}.{target[1]}",
        "codeowners": None if owners is None else {
            "path": owners[0], "rules": [[p, o] for p, o in _codeowners.parse(owners[1])]},
    }
