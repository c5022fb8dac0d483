"""Run the scanners over files: read safely, fix, write atomically, in a process pool."""

from __future__ import annotations

import difflib
import functools
import os
import sys
import tempfile
from collections.abc import Callable, Iterable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from types import ModuleType

from ._model import FileResult, Options
from ._python import transform_source

__all__ = ["Mode", "Outcome", "RunReport", "decode", "process_text", "run"]

_BOM = "\ufeff"
_MAX_BYTES = 20 * 1024 * 1024


@dataclass(frozen=True)
class Mode:
    write: bool = False
    diff: bool = False


@dataclass
class Outcome:
    result: FileResult
    diff: str | None = None
    scanned: bool = True  # False: not a kind of file any scanner handles
    warnings: list[str] = field(default_factory=list)  # "line: text", shown on stderr


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


def decode(raw: bytes) -> tuple[str, bool]:
    """(text, had_bom); raises ValueError with a one-line reason for binary / non-UTF-8."""
    if b"\0" in raw[:8192]:
        raise ValueError("binary file (contains NUL bytes); left alone")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"not UTF-8 (byte {exc.start}); re-encode it as UTF-8 to migrate it") from None
    if text.startswith(_BOM):
        return text[1:], True
    return text, False


def process_text(path: str, text: str, options: Options) -> FileResult | None:
    """The scanner for ``path``'s kind; None when no scanner handles it."""
    if path.endswith((".py", ".pyw")) or path == "-":
        return transform_source(text, path, options)
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


def _write_atomic(path: str, data: bytes) -> None:
    path = os.path.realpath(path)  # through a symlink: replacing the link would break it
    st = os.stat(path)
    d = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".ncclx-", suffix=".tmp", dir=d)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.chmod(tmp, st.st_mode & 0o7777)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def _unified(path: str, old: str, new: str) -> str:
    return "".join(difflib.unified_diff(
        old.splitlines(keepends=True), new.splitlines(keepends=True), f"a/{path}", f"b/{path}"
    ))


def process_file(path: str, options: Options, mode: Mode) -> Outcome:
    """Read, scan, and (in write mode) rewrite one file.  Never raises."""
    try:
        size = os.path.getsize(path)
        if size > _MAX_BYTES and not path.endswith(".py"):
            return Outcome(FileResult(path), scanned=False)
        with open(path, "rb") as fh:
            raw = fh.read()
    except OSError as exc:
        if not _claims(path) and os.path.exists(path):
            return Outcome(FileResult(path), scanned=False)
        return Outcome(FileResult(path, error=f"cannot read: {exc.strerror or exc}"))
    try:
        text, bom = decode(raw)
    except ValueError as exc:
        if _claims(path):
            return Outcome(FileResult(path, error=str(exc)))
        return Outcome(FileResult(path), scanned=False)
    try:
        result = process_text(path, text, options)
    except Exception as exc:  # a scanner bug must not stop the run
        return Outcome(FileResult(path, error=f"internal error: {type(exc).__name__}: {exc}"))
    if result is None:
        return Outcome(FileResult(path), scanned=False)
    out = Outcome(result, warnings=suppression_warnings(text))
    if result.new_text is not None and result.error is None:
        if mode.diff:
            out.diff = _unified(path, text, result.new_text)
        if mode.write:
            try:
                _write_atomic(path, ((_BOM if bom else "") + result.new_text).encode("utf-8"))
            except OSError as exc:
                result.error = f"cannot write: {exc.strerror or exc}"
                for f in result.findings:
                    f.applied = False
    return out


def suppression_warnings(text: str) -> list[str]:
    """One line per ignore comment code that matches no rule (it silences nothing)."""
    from ._suppress import unknown_codes

    return [f"{line}: unknown rule code {code} in '# ncclx: ignore[...]' (it silences nothing; "
            "`ncclx rules` lists the codes)" for line, code in unknown_codes(text)]


def run(
    paths: Iterable[str],
    options: Options,
    mode: Mode,
    jobs: int | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> RunReport:
    files = list(paths)
    jobs = max(1, jobs or os.cpu_count() or 1)
    report = RunReport()
    worker = functools.partial(process_file, options=options, mode=mode)
    if jobs == 1 or len(files) < 16:
        it: Iterable[Outcome] = map(worker, files)
        for i, outcome in enumerate(it, 1):
            report.outcomes.append(outcome)
            if progress:
                progress(i, len(files))
        return report
    # Largest files first, in small chunks, so that no worker is left with the big ones at
    # the end; outcomes are put back in discovery order.
    order = sorted(range(len(files)), key=lambda i: -_size(files[i]))
    chunk = max(1, min(8, len(files) // (jobs * 16) or 1))
    outcomes: list[Outcome | None] = [None] * len(files)
    with ProcessPoolExecutor(max_workers=jobs) as pool:
        results = pool.map(worker, [files[i] for i in order], chunksize=chunk)
        for done, (i, outcome) in enumerate(zip(order, results, strict=True), 1):
            outcomes[i] = outcome
            if progress:
                progress(done, len(files))
    report.outcomes = [o for o in outcomes if o is not None]
    return report


def _size(path: str) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return 0


def _stderr_progress(done: int, total: int) -> None:
    if done == total or done % 50 == 0:
        sys.stderr.write(f"\rncclx migrate: {done}/{total} files")
        if done == total:
            sys.stderr.write("\r" + " " * 40 + "\r")
        sys.stderr.flush()


stderr_progress = _stderr_progress
