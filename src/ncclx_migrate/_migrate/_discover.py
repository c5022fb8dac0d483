"""Which files ``ncclx migrate PATH...`` looks at.

Directories are walked without following symlinks out of the given roots; ``.git``,
virtualenvs, ``node_modules``, caches and build folders are skipped, and inside a git
work tree so is everything git ignores (asked from git itself, so every ignore rule git
knows applies).  Files named explicitly on the command line are always taken.
"""

from __future__ import annotations

import fnmatch
import os
import subprocess
from collections.abc import Iterable, Iterator
from pathlib import Path

__all__ = ["SKIP_DIRS", "discover", "excluded"]

SKIP_DIRS = frozenset({
    ".git", ".hg", ".svn", ".venv", "venv", ".tox", ".nox", "node_modules", "__pycache__",
    ".mypy_cache", ".pytest_cache", ".ruff_cache", "build", "dist", ".eggs", "site-packages",
    ".ipynb_checkpoints",
})


def excluded(rel: str, patterns: Iterable[str]) -> bool:
    """``--exclude`` globs match the relative path or any of its components."""
    parts = rel.split("/")
    for pat in patterns:
        pat = pat.rstrip("/")
        if fnmatch.fnmatch(rel, pat) or any(fnmatch.fnmatch(p, pat) for p in parts):
            return True
        if any(fnmatch.fnmatch("/".join(parts[:i]), pat) for i in range(1, len(parts))):
            return True
    return False


def _git_ignored(root: Path, candidates: list[str]) -> set[str]:
    """The subset of ``candidates`` (paths relative to ``root``) that git ignores (tracked
    files never are, as in git itself)."""
    if not candidates:
        return set()
    try:
        proc = subprocess.run(
            ["git", "-C", str(root), "check-ignore", "-z", "--stdin"],
            input="\0".join(candidates).encode() + b"\0",
            capture_output=True,
            timeout=60,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return set()
    if proc.returncode not in (0, 1):  # 128: not a git work tree
        return set()
    return {p.decode("utf-8", "surrogateescape") for p in proc.stdout.split(b"\0") if p}


def _is_venv(path: Path) -> bool:
    return (path / "pyvenv.cfg").is_file()


def discover(roots: Iterable[str], exclude: Iterable[str] = ()) -> Iterator[str]:
    """Yield file paths under ``roots`` in a stable order (explicit files as given)."""
    exclude = list(exclude)
    seen: set[str] = set()
    for root_str in roots:
        root = Path(root_str)
        if not root.is_dir():
            if root_str not in seen:
                seen.add(root_str)
                yield root_str  # explicit file: always taken (a missing one becomes an error)
            continue
        real_root = root.resolve()
        found: list[str] = []
        linked: dict[str, Path] = {}  # link (relative) -> its target, for the dedupe below
        for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
            d = Path(dirpath)
            keep = []
            for name in sorted(dirnames):
                sub = d / name
                if name in SKIP_DIRS or name.endswith(".egg-info") or _is_venv(sub):
                    continue
                if sub.is_symlink():
                    continue  # never follow a directory link (it may leave the root)
                keep.append(name)
            dirnames[:] = keep
            for name in sorted(filenames):
                f = d / name
                if f.is_symlink():
                    try:
                        target = f.resolve()
                        target.relative_to(real_root)
                    except (ValueError, OSError):
                        continue  # link out of the root
                    linked[str(f.relative_to(root)).replace(os.sep, "/")] = target
                found.append(str(f.relative_to(root)).replace(os.sep, "/"))
        found = [r for r in found if not excluded(r, exclude)]
        # A root the user named explicitly is scanned even if git ignores it (a venv, a
        # vendored tree): ignore rules then apply only below it, as seen from git.
        root_ignored = bool(_git_ignored(real_root.parent, [real_root.name]))
        ignored = set() if root_ignored else _git_ignored(root, found)
        # A link to a file the walk also takes is that file: scan (and report) it once.
        reached = {real_root / r for r in found if r not in linked and r not in ignored}
        ignored |= {r for r in linked if linked[r] in reached}
        for rel in found:
            if rel in ignored:
                continue
            p = os.path.join(root_str, rel) if root_str not in (".", "./") else rel
            if p not in seen:
                seen.add(p)
                yield p
