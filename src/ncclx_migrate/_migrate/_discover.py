"""Which files ``ncclx migrate PATH...`` looks at.

Directories are walked without following symlinks out of the given roots; ``.git``,
virtualenvs, ``node_modules``, caches and build folders are skipped, and inside a git
work tree so is everything git ignores (asked from git itself, so every ignore rule git
knows applies).  Files named explicitly on the command line are always taken.  A link is
taken only when its target is inside the root and neither ``--exclude`` nor a default skip
applies to the target.  Only regular files are taken: FIFOs, sockets and devices never are.
"""

from __future__ import annotations

import errno
import fnmatch
import os
import stat
import subprocess
from collections.abc import Iterable, Iterator
from pathlib import Path

__all__ = ["SKIP_DIRS", "discover", "excluded", "shown"]

SKIP_DIRS = frozenset({
    ".git", ".hg", ".svn", ".venv", "venv", ".tox", ".nox", "node_modules", "__pycache__",
    ".mypy_cache", ".pytest_cache", ".ruff_cache", "build", "dist", ".eggs", "site-packages",
    ".ipynb_checkpoints", ".ncclx_cache",
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
            input=b"\0".join(os.fsencode(c) for c in candidates) + b"\0",
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


def shown(path: str) -> str:
    """``path`` printable: a name that is not UTF-8 gets its raw bytes as ``\\xNN``."""
    return path.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def _utf8(path: str) -> bool:
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _why(exc: OSError) -> str:
    if exc.errno == errno.ELOOP:
        return "symlink loop; left alone"
    return f"cannot read: {exc.strerror or exc}"


# Build output by name, unless the folder is a Python package (mmengine's distributed code
# lives in ``mmengine/dist/``): build/lib/... and dist/*.whl are never packages themselves.
_OUTPUT_DIRS = frozenset({"build", "dist"})


def _skipped_dir(path: Path) -> bool:
    """A folder the walk never enters (VCS data, virtualenvs, caches, build output)."""
    name = path.name
    if name in _OUTPUT_DIRS:
        return not (path / "__init__.py").is_file()
    return name in SKIP_DIRS or name.endswith(".egg-info") or _is_venv(path)


def _link_skipped(target: Path, real_root: Path, exclude: list[str]) -> bool:
    """Do --exclude or the default skips apply to a link's target (relative to the root)?"""
    rel = target.relative_to(real_root)
    if excluded(rel.as_posix(), exclude):
        return True
    parent = real_root
    for part in rel.parts[:-1]:
        parent = parent / part
        if _skipped_dir(parent):
            return True
    return False


def _claimed_name(name: str) -> bool:
    if name.endswith((".py", ".pyw")):
        return True
    from ._files import file_kind

    return file_kind(name) is not None


def discover(roots: Iterable[str], exclude: Iterable[str] = (),
             errors: list[tuple[str, str]] | None = None) -> Iterator[str]:
    """Yield file paths under ``roots`` in a stable order (explicit files as given).

    Only regular files (or links to them) are yielded: FIFOs, sockets and devices would
    block or never end.  A path that cannot be walked (a loop, a folder without search
    permission, a name that is not UTF-8) is appended to ``errors`` as (shown path, one-line
    reason) and the walk goes on.
    """
    exclude = list(exclude)
    errs: list[tuple[str, str]] = [] if errors is None else errors
    seen: set[str] = set()
    for root_str in roots:
        root = Path(root_str)
        if not root.is_dir():
            if root_str not in seen:
                seen.add(root_str)
                if _utf8(root_str):
                    yield root_str  # explicit file: always taken (a missing one becomes an error)
                else:
                    errs.append((shown(root_str), "file name is not UTF-8; rename it to migrate it"))
            continue
        real_root = root.resolve()
        found: list[str] = []
        linked: dict[str, Path] = {}  # link (relative) -> its target, for the dedupe below

        def rel_of(p: Path, root: Path = root) -> str:
            return str(p.relative_to(root)).replace(os.sep, "/")

        def error(rel: str, why: str, root_str: str = root_str) -> None:
            errs.append((shown(os.path.join(root_str, rel) if root_str not in (".", "./") else rel), why))

        def walk_error(exc: OSError) -> None:  # os.walk could not list a folder
            where = rel_of(Path(exc.filename)) if exc.filename else "."
            error(where, f"cannot read the directory: {exc.strerror or exc}")

        for dirpath, dirnames, filenames in os.walk(root, followlinks=False, onerror=walk_error):
            d = Path(dirpath)
            keep = []
            for name in sorted(dirnames):
                sub = d / name
                try:
                    if sub.is_symlink() or _skipped_dir(sub):
                        continue  # never follow a directory link (it may leave the root)
                except OSError as exc:  # a folder without search permission
                    error(rel_of(sub), f"cannot search the directory: {exc.strerror or exc}")
                    continue
                keep.append(name)
            dirnames[:] = keep
            for name in sorted(filenames):
                f = d / name
                rel = rel_of(f)
                try:
                    st = os.lstat(f)
                    if stat.S_ISLNK(st.st_mode):
                        target = Path(os.path.realpath(f))
                        st = os.stat(f)  # ELOOP for a loop
                        try:
                            if _link_skipped(target, real_root, exclude):
                                continue
                        except ValueError:
                            continue  # link out of the root
                        linked[rel] = target
                except FileNotFoundError:  # a dangling link: an error where a scanner claims its name
                    if not _claimed_name(name):
                        continue  # (fairseq's kaldi `steps -> ../../wsj/s5/steps`: a folder elsewhere)
                except OSError as exc:
                    error(rel, _why(exc))
                    continue
                else:
                    if not stat.S_ISREG(st.st_mode):
                        continue  # FIFO, socket, device: opening one may block forever
                if not _utf8(rel):
                    if _claimed_name(name) and not excluded(shown(rel), exclude):
                        error(rel, "file name is not UTF-8; rename it to migrate it")
                    continue
                found.append(rel)
        found = [r for r in found if not excluded(r, exclude)]
        # A root the user named explicitly is scanned even if git ignores it (a venv, a
        # vendored tree): ignore rules then apply only below it, as seen from git.
        root_ignored = bool(_git_ignored(real_root.parent, [real_root.name]))
        targets = {r: t.relative_to(real_root).as_posix() for r, t in linked.items()}
        ignored = set() if root_ignored else _git_ignored(root, found + sorted(set(targets.values())))
        # A link to a file the walk also takes is that file: scan (and report) it once;
        # a link to a file git ignores is skipped like that file.
        reached = {real_root / r for r in found if r not in linked and r not in ignored}
        ignored |= {r for r in linked if linked[r] in reached or targets[r] in ignored}
        for rel in found:
            if rel in ignored:
                continue
            p = os.path.join(root_str, rel) if root_str not in (".", "./") else rel
            if p not in seen:
                seen.add(p)
                yield p
