"""Per-file results of ``ncclx migrate`` kept between runs, so that a warm run costs what changed.

Where: ``--cache-dir DIR``, else ``$NCCLX_CACHE_DIR``, else ``.ncclx_cache/`` in the project
root of the first path (``_project_files.project_root``: the nearest folder up from it that holds
``.git``, pyproject.toml, setup.py, setup.cfg, an environment.yml or a requirements*.txt;
none found: no cache; ``--cache-dir`` gives one).  The folder holds its own ``.gitignore``.

What: for each tool version and effective options, 256 shard files
(``v1/<tool>/<options>/<xx>.json``, by a hash of the path: an edit rewrites one), mapping
each path to its content's digest, the cross-file facts its analysis consumed with their
answers (``_crossfile``), and its outcome (findings, fixed text and diff, warnings).  A run
reuses an outcome only where the path, the digest, and every recorded answer (asked again of
this run's pre-pass) are the same; everything else is scanned as without a cache.

Faults never fail a run nor change a result: a missing folder is created, a corrupt or foreign
file is read as empty (and replaced), one written meanwhile by another run is merged with
(writes are atomic renames), and a folder that cannot be read or written costs the cache only,
with one warning line (:attr:`Cache.problem`).
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import os
import shutil
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from .. import __version__
from ._atomic import replace_with
from ._crossfile import SharedNames, recording
from ._model import CellPosition, FileResult, Finding, FixKind, Options
from ._runner import Mode, Outcome, _read, process_file
from ._shared import sets_in, shared_of
from ._xref import Indexer, imports_of, module_name

__all__ = ["DIR_NAME", "Cache", "default_dir"]

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


def _digest(data: bytes) -> str:
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


def _options_key(options: Options, mode: Mode) -> str:
    """The effective options a file's result depends on (not the cross-file facts: recorded)."""
    key = [list(options.target_torch), options.apply_safe, options.apply_unsafe, options.positions_as_given,
           options.use_shim, list(options.select), list(options.ignore), options.line_length,
           mode.write, mode.diff, mode.max_bytes, mode.max_parse_bytes]
    return hashlib.blake2b(json.dumps(key).encode(), digest_size=8).hexdigest()


def answer(kind: str, key: str, options: Options) -> object:
    """What this run's pre-pass says to fact ``(kind, key)`` (the kinds ``_crossfile`` records)."""
    if kind == "helper":  # every helper of that name: what a lookup of it can find
        return [[q, list(h.returns), list(h.sets)] for q, h in sorted(options.helpers.table.items())
                if q.rpartition(".")[2] == key]
    if kind == "setters":
        return sorted(options.helpers.setters)
    if kind == "any":
        return bool(options.helpers.table)
    if kind == "shared":
        return key in options.shared_names
    if kind == "line_length":
        from ._python._layout import line_length

        return line_length(key)
    if kind in ("cpp_bound", "cpp_shim_builds"):  # the C++ pre-pass: what the project binds, builds
        return [list(pair) for pair in getattr(options, kind)]
    if kind == "cpp_returns":  # the C++ pre-pass: what one function returns (None: unknown)
        if key == "own":  # which functions of the project return its own groups (_values._calls_own)
            return sorted(k for k, v in options.cpp_returns if v and k.startswith("own:"))
        if key.startswith("type:"):  # the classes some file declares a member of that name with
            return sorted(k for k, v in options.cpp_returns if v and k.startswith(f"{key}:"))
        return dict(options.cpp_returns).get(key)
    if kind == "module":
        return module_name(key)
    return None  # a kind this version does not know: never the same as a recorded answer


@dataclass
class Recorded(Outcome):
    """An outcome with what the cache needs to keep it (made in the worker)."""

    facts: list[tuple[str, str]] = field(default_factory=list)
    digest: str | None = None  # of the file after the scan (a file edited meanwhile is not kept)


def _recorded(path: str, options: Options, mode: Mode) -> Outcome:
    with recording() as facts:
        out = process_file(path, options, mode)
    raw = _read(path, mode)
    return Recorded(**{f.name: getattr(out, f.name) for f in dataclasses.fields(Outcome)},
                    facts=facts, digest=_digest(raw) if raw is not None else None)


def _finding_json(f: Finding) -> dict[str, object]:
    return {"p": f.path, "l": f.line, "c": f.column, "k": f.code, "m": f.message, "f": f.fix.value,
            "a": f.applied, "d": f.detail, "n": None if f.cell is None else [f.cell.number, f.cell.line, f.cell.column]}


def _finding(d: dict[str, object]) -> Finding:
    cell = d["n"]
    return Finding(str(d["p"]), int(d["l"]), int(d["c"]), str(d["k"]), str(d["m"]),  # type: ignore[call-overload]
                   FixKind(d["f"]), bool(d["a"]), str(d["d"]),
                   CellPosition(*cell) if isinstance(cell, list) else None)


def _outcome_json(o: Outcome) -> dict[str, object]:
    r = o.result
    return {"findings": [_finding_json(f) for f in r.findings], "new_text": r.new_text, "diff": o.diff,
            "scanned": o.scanned, "skipped": o.skipped, "warnings": o.warnings, "config": o.config}


def _outcome(path: str, d: dict[str, object]) -> Outcome:
    findings = d["findings"]
    assert isinstance(findings, list)
    result = FileResult(path, [_finding(f) for f in findings], d["new_text"])  # type: ignore[arg-type]
    return Outcome(result, d["diff"], bool(d["scanned"]), d["skipped"],  # type: ignore[arg-type]
                   list(d["warnings"]), list(d["config"]))  # type: ignore[call-overload]


def _valid_pre(pre: dict[str, object]) -> bool:
    """A kept pre-pass record of the shape :meth:`Cache._prepass_one` writes (else the file is read)."""
    sets, imports = pre.get("sets"), pre.get("imports")
    return (isinstance(sets, list) and all(isinstance(n, str) for n in sets) and isinstance(imports, list)
            and all(isinstance(i, list) and len(i) == 3 and all(isinstance(x, str) for x in i) for i in imports))


class Cache:
    """One run's view of the cache folder (see the module docstring)."""

    def __init__(self, folder: str) -> None:
        self.folder = folder
        self._cwd = os.getcwd()
        self._inside = os.path.join(self._abs(folder), "")
        self.problem: str | None = None  # the first fault met: one warning line
        self.digests: dict[str, str] = {}  # path -> digest of its bytes in this run
        self.pre: dict[str, dict[str, object]] = {}  # path -> its pre-pass facts and trusted status
        self._dir: str | None = None  # v1/<tool>/<options>/: one shard file per 1/256 of the paths
        self._shards: dict[str, dict[str, dict[str, object]]] = {}
        # A file last changed this long before the run began cannot change unseen with its
        # status unchanged (git's "racy" rule): its status alone then says it is unchanged.
        self._settled = time.time_ns() - 2_000_000_000

    def _open(self, options: Options, mode: Mode) -> None:
        if self._dir is None:
            self._dir = os.path.join(self.folder, _LAYOUT, _tool_key(), _options_key(options, mode))

    def _kept(self, path: str) -> object:
        """The entry kept for ``path`` (its shard is read on first use: a run over a few files
        reads a few shards, and an edit rewrites one)."""
        shard = _shard(path)
        if shard not in self._shards:
            assert self._dir is not None
            self._shards[shard] = self._load(os.path.join(self._dir, shard + ".json"))
        return self._shards[shard].get(path)

    def prepass(self, paths: list[str], options: Options, mode: Mode, index: Indexer) -> SharedNames:
        """The runner's pre-pass (``_shared``, ``_xref``) over ``paths``: a file whose status is
        what the cache kept is not read again (its digest and pre-pass facts are kept)."""
        self._open(options, mode)
        per_file = []
        for path in paths:
            pre = self._prepass_one(path, self._kept(path), mode)
            if pre is not None:
                index.note(path, [tuple(i) for i in pre["imports"]])  # type: ignore[attr-defined]
                per_file.append(list(pre["sets"]))  # type: ignore[call-overload]
        return shared_of(per_file)

    def _prepass_one(self, path: str, entry: object, mode: Mode) -> dict[str, object] | None:
        try:
            st = os.stat(path)
        except OSError:
            st = None
        status = None if st is None else [st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns]
        if (status is not None and isinstance(entry, dict) and entry.get("stat") == status
                and entry.get("abspath") == self._abs(path) and isinstance(entry.get("pre"), dict)):
            pre = entry["pre"]
            if _valid_pre(pre) and (not pre["imports"] or pre.get("module") == module_name(path)):
                self.digests[path] = str(entry["digest"])
                self.pre[path] = {"stat": status, "pre": pre}
                return pre  # type: ignore[no-any-return]
        raw = _read(path, mode)
        if raw is None:
            return None
        self.digests[path] = _digest(raw)
        imports = imports_of(path, raw)
        pre = {"sets": sets_in(raw), "imports": imports, "module": module_name(path) if imports else None}
        settled = st is not None and max(st.st_mtime_ns, st.st_ctime_ns) < self._settled
        self.pre[path] = {"stat": status if settled else None, "pre": pre}
        return pre

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

    def _hit(self, path: str, entry: object, options: Options, mode: Mode) -> Outcome | None:
        digest = self.digests.get(path)
        if digest is None:  # not read by the pre-pass (a single file, a kind no scanner claims)
            raw = _read(path, mode)
            if raw is None:
                return None
            digest = self.digests[path] = _digest(raw)
        if not isinstance(entry, dict) or entry.get("abspath") != self._abs(path):
            return None
        if entry.get("digest") != digest:
            return None
        try:
            for kind, key, value in entry["facts"]:
                if answer(kind, key, options) != value:
                    return None
            return _outcome(path, entry["outcome"])
        except (KeyError, TypeError, ValueError, AssertionError):
            return None  # an entry of another shape: scanned again

    def run(self, files: list[str], options: Options, mode: Mode,
            process: Callable[[list[str], Callable[[str], Outcome]], list[Outcome]]) -> list[Outcome]:
        """The outcomes of ``files``: kept ones where valid, the others from ``process`` (the
        runner's pool, given the worker that records facts), then kept for the next run."""
        self._open(options, mode)
        out: dict[str, Outcome] = {}
        fresh: dict[str, dict[str, object]] = {}
        for path in dict.fromkeys(files):
            entry = self._kept(path)
            hit = self._hit(path, entry, options, mode)
            if hit is not None:
                out[path] = hit
                seen = self.pre.get(path)
                if isinstance(entry, dict) and seen is not None and seen["stat"] != entry.get("stat"):
                    fresh[path] = {**entry, **seen}  # read again (touched, or settled since): keep its status
        todo = [f for f in files if f not in out]
        worker = functools.partial(_recorded, options=options, mode=mode)
        for path, o in zip(todo, process(todo, worker), strict=True):
            if isinstance(o, Recorded):
                kept = self._entry(path, o, options, mode)
                if kept is not None:
                    fresh[path] = kept
                o = Outcome(**{f.name: getattr(o, f.name) for f in dataclasses.fields(Outcome)})
            out[path] = o
        if fresh:
            self._save(fresh, set(files))
        return [out[f] for f in files]

    def _entry(self, path: str, o: Recorded, options: Options, mode: Mode) -> dict[str, object] | None:
        """What to keep of a fresh outcome; None for one another run may not get the same way."""
        if o.digest is None or o.digest != self.digests.get(path) or o.result.error is not None:
            return None  # edited during the run, or an error (a crash, a read fault) worth another try
        if mode.write and o.result.new_text is not None:
            return None  # written: the file now holds other text
        facts = [[kind, key, answer(kind, key, options)] for kind, key in o.facts]
        return {"abspath": self._abs(path), "digest": o.digest, "facts": facts, "outcome": _outcome_json(o),
                **self.pre.get(path, {})}

    def _save(self, fresh: dict[str, dict[str, object]], ran: set[str]) -> None:
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
