"""Run the scanners over files: read safely, fix, write atomically, in a process pool.

Only regular files are opened (and never in a way that blocks).  Each write goes to a
temporary file first; a hard-linked file is then rewritten in place so that every name
keeps the new text.  Pool workers die with the parent (PR_SET_PDEATHSIG, or a watcher
thread), but never in the middle of a write; a worker that dies (a parser crash, the OOM
killer) costs only the file it held, which is reported as an error.
"""

from __future__ import annotations

import codecs
import dataclasses
import functools
import hashlib
import io
import json
import os
import signal
import stat
import sys
import tokenize
from collections import deque
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass, field
from types import ModuleType
from typing import TYPE_CHECKING

from . import _config
from ._cache import Cache, digest
from ._model import CellPosition, FileResult, Finding, FixKind, Options
from ._progress import Terminal, in_file
from ._project_files import context_files

if TYPE_CHECKING:
    from concurrent.futures import Future

    from ._files._cpp._bindings import Project as CppProject

__all__ = ["DEFAULT_MAX_MB", "DEFAULT_MAX_PYTHON_MB", "Mode", "Outcome", "RunReport", "decode", "process_text", "run",
           "with_project"]

# Files larger than this are not read.
DEFAULT_MAX_MB = 8.0
# libcst's tree of a Python file takes ~900x its size, a run that fixes it ~1,300x (measured:
# benchmarks/bench_limits.py, docs/performance.md); so by default a Python file is parsed only
# up to what stays within ~1 GB and a minute.  A larger one that no rule's text test matches
# needs no parse and is still checked.
DEFAULT_MAX_PYTHON_MB = 0.75
_PARSE_RATIO = "1,300"


@dataclass(frozen=True)
class Mode:
    write: bool = False
    diff: bool = False
    max_bytes: int = int(DEFAULT_MAX_MB * 2**20)  # --max-file-size
    max_parse_bytes: int = int(DEFAULT_MAX_PYTHON_MB * 2**20)  # Python to parse; --max-file-size too


@dataclass
class Outcome:
    result: FileResult
    diff: str | None = None
    scanned: bool = True  # False: not a kind of file any scanner handles
    skipped: str | None = None  # why a file of a kind we scan was left unread (said on stderr)
    warnings: list[str] = field(default_factory=list)  # "line: text", shown on stderr
    config: list[str] = field(default_factory=list)  # config files that could not be read (_config)


@dataclass
class Recorded(Outcome):
    """An outcome with what the cache keeps with it (made in the worker)."""

    facts: list[tuple[str, str]] = field(default_factory=list)  # what it asked of the project
    digest: str | None = None  # of the file after the scan (a file edited meanwhile is not kept)


def _finding_json(f: Finding) -> dict[str, object]:
    return {"p": f.path, "l": f.line, "c": f.column, "k": f.code, "m": f.message, "f": f.fix.value,
            "a": f.applied, "d": f.detail, "n": None if f.cell is None else [f.cell.number, f.cell.line, f.cell.column]}


def _finding(d: dict[str, object]) -> Finding:
    cell = d["n"]
    return Finding(str(d["p"]), int(d["l"]), int(d["c"]), str(d["k"]), str(d["m"]),  # type: ignore[call-overload]
                   FixKind(d["f"]), bool(d["a"]), str(d["d"]),
                   CellPosition(*cell) if isinstance(cell, list) else None)


def outcome_json(o: Outcome) -> dict[str, object]:
    """An outcome as the cache keeps it."""
    r = o.result
    return {"findings": [_finding_json(f) for f in r.findings], "new_text": r.new_text, "diff": o.diff,
            "scanned": o.scanned, "skipped": o.skipped, "warnings": o.warnings, "config": o.config}


def outcome_of(path: str, d: object) -> Outcome | None:
    """The outcome :func:`outcome_json` kept; None for a value of another shape."""
    try:
        assert isinstance(d, dict)
        findings = d["findings"]
        assert isinstance(findings, list)
        result = FileResult(path, [_finding(f) for f in findings], d["new_text"])
        return Outcome(result, d["diff"], bool(d["scanned"]), d["skipped"], list(d["warnings"]), list(d["config"]))
    except (KeyError, TypeError, ValueError, AssertionError):
        return None


@dataclass
class RunReport:
    outcomes: list[Outcome] = field(default_factory=list)

    @property
    def files_scanned(self) -> int:
        return sum(1 for o in self.outcomes if o.scanned)

    @property
    def results(self) -> list[FileResult]:
        return [o.result for o in self.outcomes if o.scanned]


def _files_module() -> ModuleType | None:
    try:
        from . import _files
    except ImportError:
        return None
    return _files if hasattr(_files, "scan") else None


def decode(raw: bytes, python: bool = False) -> tuple[str, str]:
    """(text, the encoding to write it back in); raises ValueError with a one-line reason.

    Python source is read as Python reads it: any NUL is an error (the interpreter refuses
    such a file), and a PEP 263 coding declaration names the encoding.  Other files are
    UTF-8, binary when a NUL shows in their first 8 KB."""
    if python:
        nul = raw.find(b"\0")
        if nul >= 0:
            raise ValueError(f"contains a NUL byte (offset {nul}), which Python refuses to compile; left alone")
        try:
            encoding, _ = tokenize.detect_encoding(io.BytesIO(raw).readline)
        except SyntaxError as exc:  # an unknown codec, a declaration against a BOM, or not UTF-8
            if "missing" not in exc.msg:
                raise ValueError(f"bad coding declaration: {exc.msg}; left alone") from None
            encoding = "utf-8"  # no declaration: the decode below names the byte
    elif b"\0" in raw[:8192]:
        raise ValueError("binary file (contains NUL bytes); left alone")
    else:
        encoding = "utf-8-sig" if raw.startswith(codecs.BOM_UTF8) else "utf-8"
    try:
        return raw.decode(encoding), encoding
    except UnicodeDecodeError as exc:
        if encoding.startswith("utf-8"):
            raise ValueError(f"not UTF-8 (byte {exc.start}); re-encode it as UTF-8 to migrate it") from None
        raise ValueError(f"not {encoding} as its coding declaration says (byte {exc.start}); left alone") from None


def _is_python(path: str) -> bool:
    return path.endswith((".py", ".pyw"))


def _needs_parse(text: str, options: Options) -> bool:
    """Does some selected rule's text test match (so that the codemod parses ``text``)?"""
    from ._python._engine import active_codes

    return bool(active_codes(text, options))


def process_text(path: str, text: str, options: Options) -> FileResult | None:
    """The scanner for ``path``'s kind; None when no scanner handles it."""
    return _scan(path, text, options)


def _scan(path: str, text: str, options: Options) -> FileResult | None:
    if path.endswith((".py", ".pyw")) or path == "-":
        # libcst comes with it: a run that reuses every result (_cache) never imports it.
        from ._python import transform_source

        py = transform_source(text, path, options)
        if options.cpp_shim_builds and os.path.basename(path) == "setup.py":
            from ._files._cpp._setup import setup_result

            py = setup_result(path, text, py, options)
        return py
    files = _files_module()
    if files is None:
        return None
    result: FileResult | None = files.scan(path, text, options)
    return result


def _claims(path: str) -> bool:
    """Is ``path`` a kind some scanner handles (so that a read failure is an error)?"""
    if path.endswith((".py", ".pyw")):
        return True
    files = _files_module()
    kind: Callable[[str], str | None] | None = getattr(files, "file_kind", None) if files else None
    return bool(kind and kind(path))


# Set in pool workers: a SIGTERM (the parent died) waits for a write in progress.
_writing = False
_dying = False


class Changed(OSError):
    """The file is no longer what was read: someone edited it while the run was going."""


def _unchanged(path: str, read: _Read) -> os.stat_result:
    """The file's status now; raises :class:`Changed` unless its size, mtime and bytes are
    still those that were read (an edit made meanwhile would be lost by the rewrite)."""
    st = os.stat(path)
    was = read.stat
    if (st.st_ino, st.st_dev, st.st_size, st.st_mtime_ns) != (was.st_ino, was.st_dev, was.st_size, was.st_mtime_ns):
        raise Changed(_CHANGED)
    with open(path, "rb") as fh:
        if hashlib.sha256(fh.read()).digest() != read.digest:
            raise Changed(_CHANGED)
    return st


_CHANGED = "changed on disk after ncclx read it (an edit meanwhile?); left alone, run again"


def _write_atomic(path: str, data: bytes, read: _Read | None = None) -> None:
    """Write ``data`` to a temporary file beside ``path``, then put it in place: by rename,
    or, for a file with several hard links or whose owner a rename would not keep, by
    copying the verified text into the file itself so that every name sees it.  Owner,
    group and mode are kept (as ``cp -p`` does).  With ``read``, a file that changed since
    it was read is left alone (:class:`Changed`)."""
    global _writing
    path = os.path.realpath(path)  # through a symlink: replacing the link would break it
    st = os.stat(path)
    d = os.path.dirname(os.path.abspath(path))
    _writing = True
    try:
        import tempfile  # (a run that writes nothing never imports it)

        fd, tmp = tempfile.mkstemp(prefix=".ncclx-", suffix=".tmp", dir=d)
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
                fh.flush()
                in_place = st.st_nlink > 1
                if (st.st_uid, st.st_gid) != (os.geteuid(), os.getegid()):
                    try:
                        os.fchown(fh.fileno(), st.st_uid, st.st_gid)
                    except PermissionError:  # not root: only a rewrite of the file keeps its owner
                        in_place = True
                os.fchmod(fh.fileno(), st.st_mode & 0o7777)  # after chown, which drops set-id bits
            if read is not None:
                st = _unchanged(path, read)
            if in_place:
                with open(tmp, "rb") as fh:
                    if fh.read() != data:
                        raise OSError(f"the temporary copy {tmp} does not read back; nothing written")
                with open(path, "r+b") as fh:
                    fh.write(data)
                    fh.truncate()
                os.unlink(tmp)
            else:
                os.replace(tmp, path)
        except BaseException:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise
    finally:
        _writing = False
        if _dying:
            os._exit(128 + signal.SIGTERM)


def _unified(path: str, old: str, new: str) -> str:
    import difflib

    return "".join(difflib.unified_diff(
        old.splitlines(keepends=True), new.splitlines(keepends=True), f"a/{path}", f"b/{path}"
    ))


_KINDS = {stat.S_IFIFO: "a FIFO", stat.S_IFSOCK: "a socket", stat.S_IFCHR: "a device",
          stat.S_IFBLK: "a device", stat.S_IFDIR: "a directory"}


@dataclass(frozen=True)
class _Read:
    """What was read: the bytes' digest and the file's status then (see :func:`_unchanged`)."""

    stat: os.stat_result
    digest: bytes  # only a writing run compares it; empty otherwise (no hash of every file read)


def _read_file(path: str, mode: Mode) -> tuple[bytes, _Read] | Outcome:
    """The file's bytes, or the Outcome that says why it was not read.  Opened without
    blocking and checked after opening, so a FIFO (even one swapped in) never hangs us."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0))
    except OSError as exc:
        if not _claims(path) and os.path.exists(path):
            return Outcome(FileResult(path), scanned=False)
        return Outcome(FileResult(path, error=f"cannot read: {exc.strerror or exc}"))
    with os.fdopen(fd, "rb") as fh:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            kind = _KINDS.get(stat.S_IFMT(st.st_mode), "a special file")
            return Outcome(FileResult(path, error=f"not a regular file ({kind}); only regular files are read"))
        if st.st_size > mode.max_bytes:
            if not _claims(path):
                return Outcome(FileResult(path), scanned=False)
            why = (f"{st.st_size / 2**20:.1f} MB is over the size limit of {mode.max_bytes / 2**20:g} MB; "
                   "raise it with --max-file-size MB")
            if _is_python(path):
                return Outcome(FileResult(path, error=f"not parsed: {why} (parsing needs ~{_PARSE_RATIO}x the size in memory)"))
            return Outcome(FileResult(path), scanned=False, skipped=why)
        try:
            raw = fh.read()
        except OSError as exc:
            return Outcome(FileResult(path, error=f"cannot read: {exc.strerror or exc}"))
        return raw, _Read(st, hashlib.sha256(raw).digest() if mode.write else b"")


def _read(path: str, mode: Mode) -> bytes | None:
    got = _read_file(path, mode)
    return None if isinstance(got, Outcome) else got[0]


def process_file(path: str, options: Options, mode: Mode) -> Outcome:
    """Read, scan, and (in write mode) rewrite one file.  Never raises."""
    got = _read_file(path, mode)
    if isinstance(got, Outcome):
        return got
    raw, read = got
    del got  # the text is what stays in memory from here on, not the bytes too
    try:
        text, encoding = decode(raw, _is_python(path))
    except ValueError as exc:
        if _claims(path):
            return Outcome(FileResult(path, error=str(exc)))
        return Outcome(FileResult(path), scanned=False)
    if _is_python(path) and len(raw) > mode.max_parse_bytes and _needs_parse(text, options):
        return Outcome(FileResult(path, error=(
            f"not parsed: {len(raw) / 2**20:.1f} MB of Python is over the parse limit of "
            f"{mode.max_parse_bytes / 2**20:g} MB (parsing needs ~{_PARSE_RATIO}x the size in memory); "
            "raise it with --max-file-size MB")))
    del raw
    try:
        result = process_text(path, text, options)
    except Exception as exc:  # a scanner bug must not stop the run
        return Outcome(FileResult(path, error=f"internal error: {type(exc).__name__}: {exc}"))
    if result is None:
        return Outcome(FileResult(path), scanned=False)
    out = Outcome(result, warnings=[*notes_of(result), *suppression_warnings(text, path), *result.warnings],
                  config=_config.drain())
    if result.new_text is not None and result.error is None:
        if mode.diff:
            out.diff = _unified(path, text, result.new_text)
        if mode.write:
            try:
                _write_atomic(path, result.new_text.encode(encoding), read)
            except UnicodeEncodeError as exc:
                out.result = _unwritten(path, text, options, result, f"the fixed text has {exc.object[exc.start]!r}, "
                                        f"which {encoding} (its coding declaration) cannot hold; left alone")
            except OSError as exc:
                out.result = _unwritten(path, text, options, result,
                                        str(exc) if isinstance(exc, Changed) else f"cannot write: {exc.strerror or exc}")
    return out


def _unwritten(path: str, text: str, options: Options, result: FileResult, why: str) -> FileResult:
    """The result of a write that failed or was refused: nothing applied, and every finding
    at its place in the file as it is on disk (``result``'s findings left point into the fixed
    text that was never written), so the scan is made again with positions as given."""
    try:
        again = _scan(path, text, dataclasses.replace(options, positions_as_given=True))
    except Exception:  # (it ran once already; keep what it gave then)
        again = None
    if again is not None and again.error is None:
        result = again
    result.error, result.new_text = why, None
    for f in result.findings:
        f.applied = False
    return result


def notes_of(result: FileResult) -> list[str]:
    """Take the result's "could not judge" notes out of its findings, as warning lines."""
    notes = [f for f in result.findings if f.note]
    if notes:
        result.findings = [f for f in result.findings if not f.note]
    return [f"{f.line}: {f.code} could not judge: {f.message}" for f in notes]


def suppression_warnings(text: str, path: str = "") -> list[str]:
    """One line per ignore comment code that matches no rule (it silences nothing); ``path``
    says which comments a file has (C++ and CUDA: ``// ncclx: ignore[...]``)."""
    from ._files import file_kind
    from ._suppress import HASH, SLASHES, unknown_codes

    cpp = file_kind(path) == "cpp"
    spelt = "// ncclx: ignore[...]" if cpp else "# ncclx: ignore[...]"
    return [f"{line}: unknown rule code {code} in '{spelt}' (it silences nothing; "
            "`ncclx rules` lists the codes)" for line, code in unknown_codes(text, SLASHES if cpp else HASH)]


def with_project(options: Options, mode: Mode, files: Iterable[str],
                 given: tuple[str, bytes] | None = None, cache: Cache | None = None,
                 scanned: Collection[str] | None = None) -> Options:
    """``options`` with the run's :class:`Project`: the cross-file facts of ``files`` (and of
    ``given``: a path and the bytes it holds, from stdin): the names several files set
    (_shared), the project's own helpers (_xref) and the functions its C++ files bind to
    Python (_cpp/_bindings).  One read of each file, only what a scanner may read: a kind
    known by name, or no suffix (a script with a #!), read as the scan reads it (regular
    files, within the size limit).  With ``cache``, what a file unchanged since it was kept
    says is not read nor parsed again (a C++ file is read again, not parsed: the pre-pass
    decides from its text what to ask).  ``scanned``: the files the run scans (None: all of them)."""
    from ._shared import shared_names, shared_of
    from ._xref import Indexer

    index = Indexer()
    paths = [*files, *([given[0]] if given is not None else [])]
    cpp = _cpp_project(paths)

    def read(f: str) -> bytes | None:
        return given[1] if given is not None and f == given[0] else _read(f, mode)

    def read_and_index(f: str) -> bytes | None:
        raw = read(f)
        if raw is not None:
            index.add(f, raw)
            if cpp is not None:
                cpp.add(f, raw, scanned is None or f in scanned)
        return raw

    candidates = [f for f in paths if _claims(f) or "." not in os.path.basename(f)]
    if cache is not None and given is None:
        if cpp is not None:  # what each C++ file's content says, kept: an unchanged file is not parsed again
            cpp.known, cpp.remember = cache.facts, cache.remember
        per_file = []
        for f in candidates:
            pre = _facts_of(f, cache, mode)
            if pre is not None:
                index.note(f, [tuple(i) for i in pre["imports"]])  # type: ignore[attr-defined]
                per_file.append(list(pre["sets"]))  # type: ignore[call-overload]
        names = shared_of(per_file)
        for f in candidates if cpp is not None else []:
            raw = read(f) if _is_cpp(f) else None
            if raw is not None and cpp is not None:
                cpp.add(f, raw, scanned is None or f in scanned)
    else:
        names = shared_names(candidates, read_and_index)
    helpers = index.build(read, cache.facts, cache.remember) if cache is not None and given is None else index.build(read)
    project = dataclasses.replace(options.project, shared_names=names, helpers=helpers,
                                  cpp_bound=cpp.bound() if cpp is not None else (),
                                  cpp_returns=cpp.returns() if cpp is not None else ())
    return dataclasses.replace(options, project=project)


def _valid_pre(pre: dict[str, object]) -> bool:
    """A kept record of the shape :func:`_facts_of` writes (else the file is read)."""
    sets, imports = pre.get("sets"), pre.get("imports")
    return (isinstance(sets, list) and all(isinstance(n, str) for n in sets) and isinstance(imports, list)
            and all(isinstance(i, list) and len(i) == 3 and all(isinstance(x, str) for x in i) for i in imports))


def _facts_of(path: str, cache: Cache, mode: Mode) -> dict[str, object] | None:
    """The project's facts of one file (_shared's names, _xref's imports): kept by the cache
    while its status holds, else read (None: a file the scan will not read)."""
    from ._shared import sets_in
    from ._xref import imports_of, module_name

    pre = cache.known(path)
    if pre is not None and _valid_pre(pre) and (not pre["imports"] or pre.get("module") == module_name(path)):
        return pre
    raw = _read(path, mode)
    if raw is None:
        return None
    imports = imports_of(path, raw)
    pre = {"sets": sets_in(raw), "imports": imports, "module": module_name(path) if imports else None}
    cache.read(path, digest(raw), pre)
    return pre


def _options_key(options: Options, mode: Mode) -> str:
    """The effective options a file's result depends on (not the project's facts: recorded)."""
    key = [list(options.target_torch), options.apply_safe, options.apply_unsafe, options.positions_as_given,
           options.use_shim, list(options.select), list(options.ignore), options.line_length,
           mode.write, mode.diff, mode.max_bytes, mode.max_parse_bytes]
    return hashlib.blake2b(json.dumps(key).encode(), digest_size=8).hexdigest()


def _recorded(path: str, options: Options, mode: Mode) -> Outcome:
    """The cache's worker: one file's outcome, with the facts it asked of the project."""
    with options.project.recording() as facts:
        out = process_file(path, options, mode)
    raw = _read(path, mode)
    return Recorded(**{f.name: getattr(out, f.name) for f in dataclasses.fields(Outcome)},
                    facts=facts, digest=digest(raw) if raw is not None else None)


def _cached(cache: Cache, files: list[str], options: Options, mode: Mode,
            process: Callable[[list[str], Callable[[str], Outcome]], list[Outcome]]) -> list[Outcome]:
    """The outcomes of ``files``: kept ones where valid, the others from ``process`` (the
    pool, given the worker that records facts), then kept for the next run."""
    project = options.project
    out: dict[str, Outcome] = {}
    for path in dict.fromkeys(files):
        content = cache.digests.get(path)
        if content is None:  # not read by the pre-pass (a single file, a kind no scanner claims)
            raw = _read(path, mode)
            if raw is None:
                continue
            content = cache.digests[path] = digest(raw)
        kept = cache.get(path, content, project.answer)
        hit = outcome_of(path, kept) if kept is not None else None
        if hit is not None:
            out[path] = hit
    todo = [f for f in files if f not in out]
    worker = functools.partial(_recorded, options=options, mode=mode)
    for path, o in zip(todo, process(todo, worker), strict=True):
        if isinstance(o, Recorded):
            # kept unless edited during the run, an error worth another try (a crash, a read
            # fault), or written (the file now holds other text)
            if (o.digest is not None and o.digest == cache.digests.get(path) and o.result.error is None
                    and not (mode.write and o.result.new_text is not None)):
                cache.put(path, o.digest, [[kind, key, project.answer(kind, key)] for kind, key in o.facts],
                          outcome_json(o))
            o = Outcome(**{f.name: getattr(o, f.name) for f in dataclasses.fields(Outcome)})
        out[path] = o
    cache.save(set(files))
    return [out[f] for f in files]


def run(
    paths: Iterable[str],
    options: Options,
    mode: Mode,
    jobs: int | None = None,
    progress: Callable[[int, int], None] | None = None,
    walked: Iterable[str] = (),
    exclude: Iterable[str] = (),
    cache: Cache | None = None,
) -> RunReport:
    """Scan ``paths``; ``walked`` and ``exclude``: the folders and patterns they were found
    with, for the rest of their projects (read by the cross-file pre-pass, not scanned); with
    ``cache``, only the files whose kept result no longer holds are scanned (_cache)."""
    files = list(paths)
    jobs = worker_count(jobs, len(files))
    if cache is not None:
        cache.open(_options_key(options, mode))
    # The rest of each file's project: read by the pre-pass, not scanned (labels do not depend
    # on how many files were passed, _project_files.py).
    context = context_files(files, walked, exclude)
    if len(files) > 1 or context:  # (one file alone: its own helpers are read with it, _python/_xcall.py)
        options = with_project(options, mode, [*files, *context], cache=cache, scanned=set(files))
        if options.use_shim and options.apply_unsafe and _cpp_project(files) is not None:
            options = dataclasses.replace(options, project=dataclasses.replace(
                options.project, cpp_shim_builds=_cpp_shim_builds(files, options, mode)))
    report = RunReport()

    def process(todo: list[str], worker: Callable[[str], Outcome]) -> list[Outcome]:
        if jobs == 1 or len(todo) < 16:
            out = []
            for i, path in enumerate(todo, 1):
                with in_file(progress, path, i - 1, len(todo)):
                    out.append(worker(path))
                if progress:
                    progress(i, len(todo))
            return out
        from ._python import _engine  # noqa: F401  (the workers fork with libcst imported, not each on its own)

        return _run_pool(todo, worker, jobs, progress)

    if cache is not None:
        report.outcomes = _cached(cache, files, options, mode, process)
    else:
        report.outcomes = process(files, functools.partial(process_file, options=options, mode=mode))
    return report


def _is_cpp(path: str) -> bool:
    if path.endswith((".py", ".pyw")):
        return False  # (not a reason to import the other files' scanners)
    files_module = _files_module()
    return files_module is not None and files_module.file_kind(path) == "cpp"


def _cpp_project(files: list[str]) -> CppProject | None:
    """The C++ pre-pass (:class:`._files._cpp._bindings.Project`) when the run has C++ files."""
    if not any(_is_cpp(f) for f in files):
        return None
    from ._files._cpp import read_trees
    from ._files._cpp._bindings import Project as CppProject

    return CppProject.new(read_trees)


def _cpp_shim_builds(files: list[str], options: Options, mode: Mode) -> tuple[tuple[str, str], ...]:
    """--use-shim: the setup.py files whose C++ sources the shim fix rewrites (_cpp/_setup.py)."""
    from ._files._cpp import scan_cpp
    from ._files._cpp._setup import shim_builds

    def text(f: str) -> str | None:
        raw = _read(f, mode)
        try:
            return decode(raw)[0] if raw is not None else None
        except ValueError:
            return None

    def shimmed(path: str, body: str) -> bool:
        new = scan_cpp(path, body, options)[0].new_text  # one pass decides: a later one adds no shim
        return new is not None and "<ncclx/compat.h>" in new and "<ncclx/compat.h>" not in body

    return shim_builds(files, text, shimmed)


# More workers than this only contend for the CPUs (and each holds a parse in memory).
_JOBS_PER_CPU = 2


def worker_count(asked: int | None, n_files: int) -> int:
    """``--jobs``, capped by the files there are and a small multiple of the CPUs."""
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return max(1, min(asked or cpus, _JOBS_PER_CPU * cpus, n_files))


_DIED = ("the worker process scanning it died (a crash in the parser, or killed, e.g. for memory); "
         "the file is unchanged or fully rewritten, never half-written")


def _run_pool(files: list[str], worker: Callable[[str], Outcome], jobs: int,
              progress: Callable[[int, int], None] | None) -> list[Outcome]:
    # (imported here: a warm run starts no pool)
    from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
    from concurrent.futures.process import BrokenProcessPool

    # Largest files first, in small chunks, so that no worker is left with the big ones at
    # the end; at most 2 chunks per worker in flight, so that a worker that dies takes few
    # files with it: those are re-run one by one, each in a pool of its own.
    order = sorted(range(len(files)), key=lambda i: -_size(files[i]))
    size = max(1, min(8, len(files) // (jobs * 16) or 1))
    todo = deque(order[k:k + size] for k in range(0, len(order), size))
    outcomes: list[Outcome | None] = [None] * len(files)
    done = 0

    def finish(i: int, outcome: Outcome) -> None:
        nonlocal done
        outcomes[i] = outcome
        done += 1
        if progress:
            progress(done, len(files))

    while todo:
        suspects: list[int] = []
        pool = ProcessPoolExecutor(max_workers=jobs, initializer=_init_worker, initargs=(os.getpid(),))
        try:
            running: dict[Future[list[Outcome]], list[int]] = {}
            broken = False
            while (todo or running) and not broken:
                try:
                    while todo and len(running) < 2 * jobs:
                        running[pool.submit(_process_many, worker, [files[i] for i in todo[0]])] = todo[0]
                        todo.popleft()
                except BrokenProcessPool:  # a worker died before this chunk was handed out
                    broken = True
                    break
                finished, _ = wait(running, return_when=FIRST_COMPLETED)
                for fut in finished:
                    chunk = running.pop(fut)
                    try:
                        for i, outcome in zip(chunk, fut.result(), strict=True):
                            finish(i, outcome)
                    except BrokenProcessPool:
                        suspects += chunk
                        broken = True
            # The pool is broken: what did not finish is re-run alone, the rest in a new pool.
            for fut, chunk in running.items():
                if fut.done() and fut.exception() is None:
                    for i, outcome in zip(chunk, fut.result(), strict=True):
                        finish(i, outcome)
                else:
                    suspects += chunk
        finally:
            pool.shutdown(wait=True, cancel_futures=True)
        for i in sorted(suspects, key=lambda i: -_size(files[i])):
            finish(i, _isolated(worker, files[i]))
    return [o for o in outcomes if o is not None]


def _process_many(worker: Callable[[str], Outcome], paths: list[str]) -> list[Outcome]:
    return [worker(p) for p in paths]


def _isolated(worker: Callable[[str], Outcome], path: str) -> Outcome:
    from concurrent.futures import ProcessPoolExecutor
    from concurrent.futures.process import BrokenProcessPool

    with ProcessPoolExecutor(max_workers=1, initializer=_init_worker, initargs=(os.getpid(),)) as pool:
        try:
            return pool.submit(worker, path).result()
        except BrokenProcessPool:
            return Outcome(FileResult(path, error=_DIED))


def _on_parent_death(signum: int, frame: object) -> None:
    global _dying
    if _writing:
        _dying = True  # _write_atomic exits once the file is whole
    else:
        os._exit(128 + signum)


def _init_worker(parent: int) -> None:
    """Pool workers must not outlive ``ncclx migrate`` (kill -9 of it leaves them orphaned)."""
    import ctypes
    import threading

    signal.signal(signal.SIGTERM, _on_parent_death)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's: it stops handing out files
    if sys.platform.startswith("linux"):
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(1, signal.SIGTERM, 0, 0, 0)  # PR_SET_PDEATHSIG
        except (OSError, AttributeError):
            pass
    if os.getppid() != parent:  # it died before prctl took effect
        os._exit(1)

    def watch() -> None:  # elsewhere (and as a second guard): poll for a new parent
        while os.getppid() == parent:
            threading.Event().wait(1.0)
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=watch, name="ncclx-parent-watch", daemon=True).start()


def _size(path: str) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return 0


# The files done, and how far a long file is (_progress.step), on stderr.
stderr_progress = Terminal()
