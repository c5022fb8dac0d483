"""The project a run is over: one :class:`Project` per run, and its report object.

:class:`Project` holds what a run knows of its project beyond one file: the root (the one
definition, ``_project_files.project_root``), the oldest torch the project supports and the target
torch, and the cross-file indexes the pre-pass builds (``_shared``'s names, ``_xref``'s
helpers, the C++ bindings and returns of ``_files/_cpp/_bindings``).  A file's analysis asks
the project for these facts through :meth:`Project.asked` (and the indexes, which report
through it): while :meth:`Project.recording` is on (the cache's worker, around one file),
each fact asked is kept, and :meth:`Project.answer` says what this run's project answers it,
the key the cache keeps a result under (``_cache``).  Options (``_model``) carry the user's
choices and this one handle to the project.

``project_info`` is the ``project`` object of ``ncclx migrate --format json``: ``ncclx report`` adds up one report per repository: it needs the repository's name, where it
lives (remote, commit), the torch the findings were judged for, and its CODEOWNERS rules to
route each finding to a team.  Git's files are read directly (no ``git`` process, no network);
credentials in a remote URL are dropped, as the report may travel.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ._crossfile import SharedNames
from ._xref import Helpers, module_name

__all__ = ["Project", "project_info"]

_UNSET = object()


@dataclass(eq=False)
class Project:
    """One run's project (see the module docstring); compared and hashed by identity.

    ``Project()`` is the project of a text scanned alone: no root, no other file."""

    root: Path | None = None
    oldest: tuple[int, int] | None = None  # the oldest torch the project states (None: it states none)
    oldest_from: str | None = None  # the file that states it
    target: tuple[int, int] = (2, 15)  # judged for: --target-torch, else oldest, else _target.DEFAULT_TARGET
    # Deprecated names another file of the run also sets: their add is never safe (_shared).
    shared_names: SharedNames = field(default_factory=SharedNames)
    # The run's own helpers across its modules (what they return, which GPU they pick: _xref).
    helpers: Helpers = field(default_factory=Helpers)
    # C++ functions the run binds to Python (pybind11, TORCH_LIBRARY) in any of its files:
    # (name, "path:line" of the binding), from the pre-pass (_files/_cpp/_bindings.py).
    cpp_bound: tuple[tuple[str, str], ...] = ()
    # --use-shim: (setup.py, C++ source) pairs of the extensions whose sources the shim fix
    # rewrites, so that setup.py gets the shim's include folder (_files/_cpp/_setup.py).
    cpp_shim_builds: tuple[tuple[str, str], ...] = ()
    # What the run's C++ functions return, from every declaration and definition of the
    # project (the pre-pass, _files/_cpp/_values.py): ("pg:KEY" or "own:KEY", yes) where KEY
    # is ``f`` or ``Class::f``; "pg": declared to return a c10d::ProcessGroup, "own": every
    # definition returns an object the code built as the legacy class.
    cpp_returns: tuple[tuple[str, bool], ...] = ()
    _asked: dict[tuple[str, str], None] | None = field(init=False, default=None, repr=False)
    _answers: dict[tuple[str, str], object] = field(init=False, default_factory=dict, repr=False)

    @classmethod
    def at(cls, start: str, target: tuple[int, int] | None = None) -> Project:
        """The project of the path ``start`` (a run's first): its root and, where ``target``
        (``--target-torch``) is not given, the oldest torch its files state (``_target``)."""
        from ._project_files import project_root
        from ._target import DEFAULT_TARGET, detect_target

        root = project_root(start)
        if target is not None:
            return cls(root, target=target)
        oldest, source = detect_target(start, root)
        return cls(root, oldest if source else None, source, oldest if source else DEFAULT_TARGET)

    def __post_init__(self) -> None:
        # the indexes report each lookup to their project (a worker's copy: to that copy)
        self.shared_names.asked = self.asked
        object.__setattr__(self.helpers, "asked", self.asked)

    # --- the one interface a file's analysis asks through ---
    def asked(self, kind: str, key: str) -> None:
        """The analysis read fact ``key`` of kind ``kind`` (see :meth:`answer` for the kinds);
        off (no :meth:`recording`), one test."""
        if self._asked is not None:
            self._asked[(kind, key)] = None

    @contextmanager
    def recording(self) -> Iterator[list[tuple[str, str]]]:
        """Keep the facts asked inside the block in the list it yields (in the order asked)."""
        out: list[tuple[str, str]] = []
        was, self._asked = self._asked, {}
        try:
            yield out
        finally:
            out.extend(self._asked)
            self._asked = was

    def line_length(self, path: str) -> int:
        """The line length that governs ``path`` (its formatter's, else its linter's: _python/_layout)."""
        from ._python._layout import line_length  # only files that get a fix read config files

        self.asked("line_length", path)
        return line_length(path)

    def module_name(self, path: str) -> str:
        """The dotted module ``path`` is (the ``__init__.py`` files above it: _xref)."""
        self.asked("module", path)
        return module_name(path)

    def answer(self, kind: str, key: str) -> object:
        """What this project says to fact ``(kind, key)``: kept with a cached result, and
        asked again of each later run (a result is reused only where every answer is the same).
        Each answer is found once per run (many files ask the same)."""
        got = self._answers.get((kind, key), _UNSET)
        if got is _UNSET:
            got = self._answers[(kind, key)] = self._answer(kind, key)
        return got

    def _answer(self, kind: str, key: str) -> object:
        if kind == "helper":  # every helper of that name: what a lookup of it can find
            return [[q, list(h.returns), list(h.sets)] for q, h in sorted(self.helpers.table.items())
                    if q.rpartition(".")[2] == key]
        if kind == "setters":
            return sorted(self.helpers.names_that_pick())
        if kind == "any":
            return bool(self.helpers.table)
        if kind == "shared":
            return frozenset.__contains__(self.shared_names, key)
        if kind == "line_length":
            from ._python._layout import line_length

            return line_length(key)
        if kind in ("cpp_bound", "cpp_shim_builds"):  # the C++ pre-pass: what the project binds, builds
            return [list(pair) for pair in getattr(self, kind)]
        if kind == "cpp_returns":  # the C++ pre-pass: what one function returns (None: unknown)
            if key == "own":  # which functions of the project return its own groups (_values._calls_own)
                return sorted(k for k, v in self.cpp_returns if v and k.startswith("own:"))
            if key.startswith("type:"):  # the classes some file declares a member of that name with
                return sorted(k for k, v in self.cpp_returns if v and k.startswith(f"{key}:"))
            return dict(self.cpp_returns).get(key)
        if kind == "module":
            return module_name(key)
        return None  # a kind this version does not know: never the same as a recorded answer


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
    from urllib.parse import urlsplit, urlunsplit  # (only a report with a remote needs it)

    parts = urlsplit(url)
    if parts.scheme and "@" in parts.netloc:
        return urlunsplit(parts._replace(netloc=parts.netloc.rpartition("@")[2]))
    return url


def _remote(common: Path) -> str | None:
    """The URL of ``origin``, else of the first remote in .git/config."""
    import configparser

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
    from .. import _codeowners

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
