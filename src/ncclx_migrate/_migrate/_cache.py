"""Per-file results of ``ncclx migrate`` kept between runs, so that a warm run costs what changed.

A passive store, as ruff's cache is: it knows nothing of scanning.  The runner asks it for a
kept result (:meth:`Cache.get`, by the file's content, the run's options and the facts the
result asked of the project) and hands it the fresh ones (:meth:`Cache.put`); the project's
own facts of each file (what the pre-pass reads of it: names it sets, imports, helper
summaries, C++ answers) are kept with the file too (:meth:`Cache.known`, :meth:`Cache.read`,
:meth:`Cache.remember`), so that an unchanged file is not read nor parsed again.

Where: ``--cache-dir DIR``, else ``$NCCLX_CACHE_DIR``, else ``.ncclx_cache/`` in the project
root of the first path (``_project_files.project_root``: the nearest folder up from it that holds
``.git``, pyproject.toml, setup.py, setup.cfg, an environment.yml or a requirements*.txt;
none found: no cache, and the run says so in one line; ``--cache-dir`` gives one).  The folder
holds its own ``.gitignore``.

What: for each tool version and effective options, 256 shard files
(``v1/<tool>/<options>/<xx>.json``, by a hash of the path: an edit rewrites one), mapping
each path to its content's digest, its status (a file whose status is unchanged is not read
again), the project's facts of it (``pre``), the facts of other files its analysis asked with
the project's answers (``facts``), and its outcome.  A kept outcome is reused only where the
path, the digest, and every recorded answer (asked again of this run's project) are the same.

Faults never fail a run nor change a result: a missing folder is created, a corrupt or foreign
file is read as empty (and replaced), one written meanwhile by another run is merged with
(writes are atomic renames), and a folder that cannot be read or written costs the cache only,
with one warning line (:attr:`Cache.problem`).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
import time
from collections.abc import Callable
from pathlib import Path

from .. import __version__

__all__ = ["DIR_NAME", "Cache", "default_dir", "digest"]

DIR_NAME = ".ncclx_cache"
_LAYOUT = "v1"
_GITIGNORE = "# ncclx migrate's cache (see docs/migrate.md): never committed.\n*\n"


def default_dir(start: str) -> str | None:
    """``.ncclx_cache`` in the project root of ``start`` (``_project_files.project_root``, the one
    definition the scope and the target torch use too); None outside any project."""
    from ._project_files import project_root

    root = project_root(start)
    return str(root / DIR_NAME) if root is not None else None


def _shard(path: str) -> str:
    return hashlib.blake2b(path.encode("utf-8", "surrogateescape"), digest_size=1).hexdigest()


def digest(data: bytes) -> str:
    """The content key of a file's bytes."""
    return hashlib.blake2b(data, digest_size=16).hexdigest()


def _tool_key() -> str:
    """The version, and the package's own files as installed (an edited checkout is another tool)."""
    h = hashlib.blake2b(digest_size=8)
    h.update(f"{__version__}\0{sys.version_info[:2]}".encode())
    root = Path(__file__).resolve().parent.parent
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
        for name in sorted(filenames):
            if name.endswith((".py", ".md")):
                st = os.stat(os.path.join(dirpath, name))
                h.update(f"{os.path.relpath(os.path.join(dirpath, name), root)}\0{st.st_size}\0{st.st_mtime_ns}\0".encode())
    return h.hexdigest()


Status = list[int]


class Cache:
    """One run's view of the cache folder (see the module docstring)."""

    def __init__(self, folder: str) -> None:
        self.folder = folder
        self._cwd = os.getcwd()
        self._inside = os.path.join(self._abs(folder), "")
        self.problem: str | None = None  # the first fault met: one warning line
        self.digests: dict[str, str] = {}  # path -> digest of its bytes in this run
        self._pre: dict[str, dict[str, object]] = {}  # path -> its status and project facts in this run
        self._status: dict[str, Status | None] = {}
        self._touched: set[str] = set()  # files this run read, or kept a new fact of
        self._fresh: dict[str, dict[str, object]] = {}
        self._dir: str | None = None  # v1/<tool>/<options>/: one shard file per 1/256 of the paths
        self._shards: dict[str, dict[str, dict[str, object]]] = {}
        # A file last changed this long before the run began cannot change unseen with its
        # status unchanged (git's "racy" rule): its status alone then says it is unchanged.
        self._settled = time.time_ns() - 2_000_000_000

    def open(self, options_key: str) -> None:
        """Use the results kept for these effective options (the caller's key of them)."""
        if self._dir is None:
            self._dir = os.path.join(self.folder, _LAYOUT, _tool_key(), options_key)

    def _kept(self, path: str) -> dict[str, object] | None:
        """The entry kept for ``path`` (its shard is read on first use: a run over a few files
        reads a few shards, and an edit rewrites one)."""
        shard = _shard(path)
        if shard not in self._shards:
            assert self._dir is not None, "Cache.open first"
            self._shards[shard] = self._load(os.path.join(self._dir, shard + ".json"))
        entry = self._shards[shard].get(path)
        return entry if isinstance(entry, dict) and entry.get("abspath") == self._abs(path) else None

    # --- the project's facts of each file ---
    def known(self, path: str) -> dict[str, object] | None:
        """The project's facts kept of ``path`` when its status is the one kept (it is not
        read again: its digest is the kept one), else None (read it, then :meth:`read`)."""
        try:
            st = os.stat(path)
            status: Status | None = [st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns]
            settled = max(st.st_mtime_ns, st.st_ctime_ns) < self._settled
        except OSError:
            status, settled = None, False
        self._status[path] = status if settled else None
        entry = self._kept(path)
        pre = entry.get("pre") if entry is not None else None
        if status is None or entry is None or entry.get("stat") != status or not isinstance(pre, dict):
            return None
        self.digests[path] = str(entry["digest"])
        self._pre[path] = {"stat": status, "pre": pre}
        return pre

    def read(self, path: str, content: str, pre: dict[str, object]) -> None:
        """This run read ``path``: its digest and the project's facts of it (kept with it)."""
        self.digests[path] = content
        self._pre[path] = {"stat": self._status.get(path), "pre": pre}
        self._touched.add(path)

    def remember(self, path: str, key: str, value: object) -> None:
        """One more fact of ``path`` the project computed (a helper summary, C++ answers):
        kept with the file's facts until its content changes."""
        seen = self._pre.get(path)
        if seen is not None:
            seen["pre"][key] = value  # type: ignore[index]
            self._touched.add(path)

    # --- results ---
    def get(self, path: str, content: str, answer: Callable[[str, str], object]) -> object | None:
        """The outcome kept for ``path`` with this content, if every fact it asked is still
        answered the same (``answer``: this run's project)."""
        entry = self._kept(path)
        if entry is None or entry.get("digest") != content:
            return None
        try:
            for kind, key, value in entry["facts"]:  # type: ignore[attr-defined]
                if answer(kind, key) != value:
                    return None
            outcome = entry["outcome"]
        except (KeyError, TypeError, ValueError):
            return None  # an entry of another shape: scanned again
        seen = self._pre.get(path)
        if seen is not None and (path in self._touched or seen["stat"] != entry.get("stat")):
            self._fresh[path] = {**entry, **seen}  # read again (touched, or settled since): keep its status
        return outcome

    def put(self, path: str, content: str, facts: list[list[object]], outcome: object) -> None:
        """Keep a fresh outcome of ``path`` (its content, and the facts it asked with their answers)."""
        self._fresh[path] = {"abspath": self._abs(path), "digest": content, "facts": facts, "outcome": outcome,
                             **self._pre.get(path, {})}

    def facts(self, path: str) -> dict[str, object] | None:
        """The project's facts of ``path`` in this run (:meth:`known` or :meth:`read`)."""
        seen = self._pre.get(path)
        return seen["pre"] if seen is not None else None  # type: ignore[return-value]

    def save(self, ran: set[str]) -> None:
        """Write what this run kept (``ran``: the files it was over; entries of others that
        are gone are dropped).  A file the run only read for its project (a context file, one
        whose result is kept) keeps its facts, without a result where its content changed."""
        for path in self._touched - self._fresh.keys():
            kept = self._kept(path) or {}
            if kept.get("digest") != self.digests.get(path):
                kept = {}
            self._fresh[path] = {**kept, "abspath": self._abs(path), "digest": self.digests[path], **self._pre[path]}
        if self._fresh:
            self._save(self._fresh, ran)
            self._fresh = {}

    def _abs(self, path: str) -> str:
        """os.path.abspath without a getcwd() per call (a run never changes directory)."""
        return os.path.normpath(os.path.join(self._cwd, path))

    def holds(self, path: str) -> bool:
        """Is ``path`` inside the cache folder?"""
        return self._abs(path).startswith(self._inside)

    def _fault(self, what: str, exc: OSError) -> None:
        if self.problem is None:
            self.problem = (f"cache not {what} ({self.folder}: {exc.strerror or exc}); results are the same "
                            "without it (--no-cache turns it off, --cache-dir moves it)")

    def _load(self, pack: str) -> dict[str, dict[str, object]]:
        try:
            with open(pack, encoding="utf-8") as fh:
                doc = json.load(fh)
        except FileNotFoundError:
            return {}
        except OSError as exc:
            self._fault("read", exc)
            return {}
        except ValueError:  # corrupt (a disk fault, a foreign file): rebuilt
            return {}
        entries = doc.get("entries") if isinstance(doc, dict) else None
        return entries if isinstance(entries, dict) else {}

    def _save(self, fresh: dict[str, dict[str, object]], ran: set[str]) -> None:
        # (it imports tempfile: a run that keeps nothing new never does)
        from ._atomic import replace_with

        assert self._dir is not None
        folder = self._dir
        try:
            if not os.path.isdir(self.folder):
                os.makedirs(self.folder, exist_ok=True)
            ignore = os.path.join(self.folder, ".gitignore")
            if not os.path.exists(ignore):
                with open(ignore, "w", encoding="utf-8") as fh:
                    fh.write(_GITIGNORE)
            os.makedirs(folder, exist_ok=True)
            tools = os.path.dirname(os.path.dirname(folder))
            mine = os.path.basename(os.path.dirname(folder))
            for old in os.listdir(tools):  # other versions' results: never read again
                if old != mine:
                    shutil.rmtree(os.path.join(tools, old), ignore_errors=True)
            by_shard: dict[str, dict[str, dict[str, object]]] = {}
            for path, entry in fresh.items():
                by_shard.setdefault(_shard(path), {})[path] = entry
            mask = os.umask(0)
            os.umask(mask)
            for shard, mine_now in sorted(by_shard.items()):
                pack = os.path.join(folder, shard + ".json")
                # Merged with what is there now (another run may have written meanwhile), less
                # the entries of files that are gone.
                entries = {p: e for p, e in self._load(pack).items()
                           if p in ran or (isinstance(e, dict) and os.path.exists(str(e.get("abspath"))))}
                entries.update(mine_now)
                # as any file the user makes, whatever mode the shard had
                replace_with(pack, json.dumps({"entries": entries}, separators=(",", ":")), ".pack-", 0o666 & ~mask)
        except OSError as exc:
            self._fault("written", exc)
