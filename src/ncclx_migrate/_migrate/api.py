"""``ncclx migrate`` as one library call: a request in, the report out, an exit status back.

The click command (``_cli.py``) only turns its options into a ``MigrateRequest`` and calls
``migrate``; the pre-commit hooks (``.pre-commit-hooks.yaml``) run that command, so they call it
too.  ``migrate`` writes the report, the diff or the fixed stdin text where the command does
(stdout, or stderr when stdout carries a diff or the fixed text) and returns the exit status:
0 no finding left, 1 findings left, 2 a file could not be read or parsed, or a path holds
nothing it checks.  A request that cannot run raises ``RequestError``.
"""

from __future__ import annotations

import dataclasses
import os
import stat
import sys
from dataclasses import dataclass

import click

from .._color import use_color
from .._streams import fresh_line
from .._torch.releases import target_range_error
from .._words import count
from . import _baseline, _config
from . import _cache as _runner_cache
from ._discover import discover
from ._files import file_kind, kinds_checked
from ._model import FileResult, Finding, Options
from ._output import TextView, read_source, render
from ._project import Project, project_info
from ._project_files import context_files
from ._rule_table import RULES
from ._runner import (
    Mode,
    Outcome,
    RunReport,
    _unified,
    decode,
    notes_of,
    process_text,
    run,
    stderr_progress,
    suppression_warnings,
    with_project,
)
from ._target import parse_target

__all__ = ["MigrateRequest", "RequestError", "migrate"]


@dataclass(frozen=True)
class MigrateRequest:
    """What the user asked for, as ``ncclx migrate``'s options say it (see ``--help``)."""

    paths: tuple[str, ...] = (".",)
    diff: bool = False
    write: bool = False
    unsafe_fixes: bool = False
    select: tuple[str, ...] = ()  # rule-code prefixes, each item comma-separated
    ignore: tuple[str, ...] = ()
    target_torch: str | None = None  # "X.Y"; None: detected from the project, else 2.15
    use_shim: bool = False
    fmt: str = "text"
    exclude: tuple[str, ...] = ()
    jobs: int | None = None
    stdin_filename: str = "-"
    quiet: bool = False
    show_source: bool = False
    max_file_size: float | None = None  # MB
    ignore_unknown: bool = False
    baseline_file: str | None = None
    update_baseline: bool = False
    cache_dir: str | None = None
    no_cache: bool = False


class RequestError(ValueError):
    """A request that cannot run; the command shows it as a usage error (exit 2).

    ``bad_value``: one option's value is wrong (``param_hint`` names the option, if any),
    rather than a combination of options."""

    def __init__(self, message: str, param_hint: str | None = None, bad_value: bool = False) -> None:
        super().__init__(message)
        self.message = message
        self.param_hint = param_hint
        self.bad_value = bad_value


class _Stop(Exception):
    """A run ended early with an exit status, its error already on stderr."""

    def __init__(self, code: int) -> None:
        super().__init__(code)
        self.code = code


def migrate(request: MigrateRequest) -> int:
    """Run ``ncclx migrate`` as ``request`` says; the report goes out, the exit status comes back."""
    try:
        return _migrate(request)
    except _Stop as stop:
        return stop.code


def _prefixes(values: tuple[str, ...]) -> tuple[str, ...]:
    out: list[str] = []
    for v in values:
        for p in v.split(","):
            p = p.strip().upper()
            if not p:
                continue
            if p != "ALL" and not any(r.code.startswith(p) for r in RULES):
                raise RequestError(f"{p!r} matches no rule code (see `ncclx rules`)", bad_value=True)
            out.append("" if p == "ALL" else p)
    return tuple(out)


def _exit_code(results: list[FileResult], mode: Mode, baseline: _baseline.Comparison | None = None) -> int:
    if any(r.error for r in results):
        return 2
    if baseline is not None and baseline.written:
        return 0  # every finding left is in the baseline now
    left: list[Finding] = [
        f for r in results for f in r.findings
        if not (mode.write and f.applied) and f.baseline_state != "unchanged"
    ]
    return 1 if left else 0


def _ratchet(baseline: _baseline.Baseline | None, update: bool, fmt: str, results: list[FileResult],
             scanned: list[str], options: Options, view: TextView) -> _baseline.Comparison | None:
    """Fingerprints (SARIF, GitLab, a baseline) and the comparison with the baseline."""
    findings = [f for r in results for f in r.findings]
    if baseline is None:
        if fmt in ("sarif", "gitlab"):
            _baseline.stamp(findings, view.read, os.getcwd())
        return None
    try:
        return _baseline.ratchet(baseline, findings, scanned, options, view.read, update)
    except OSError as exc:
        click.echo(f"ncclx migrate: error: {baseline.path}: cannot write the baseline: {exc.strerror or exc}",
                   err=True)
        raise _Stop(2) from None


def _cache(folder: str | None, first: str) -> _runner_cache.Cache | None:
    folder = folder or os.environ.get("NCCLX_CACHE_DIR") or _runner_cache.default_dir(first)
    return _runner_cache.Cache(folder) if folder else None


def _stamp(path: str) -> tuple[int, int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_ino, st.st_mtime_ns, st.st_size


def _stamps(files: list[str]) -> dict[str, tuple[int, int, int] | None]:
    """Each file as it is before --write (a rename gives a new inode, a rewrite in place a new
    mtime): after Ctrl-C, those that differ are the files already rewritten."""
    return {f: _stamp(f) for f in files}


def _load_baseline(path: str | None, update: bool) -> _baseline.Baseline | None:
    if path is None:
        return None
    try:
        return _baseline.load(path)
    except _baseline.BaselineError as exc:
        if update and not os.path.lexists(path):
            return _baseline.Baseline(path)  # --update-baseline creates it
        # Not even --update-baseline overwrites a file that is not a baseline: it may be another file.
        click.echo(f"ncclx migrate: error: {exc}", err=True)
        raise _Stop(2) from None


def _migrate(request: MigrateRequest) -> int:
    paths, diff, write, fmt, quiet = request.paths, request.diff, request.write, request.fmt, request.quiet
    unsafe_fixes, update_baseline, baseline_file = request.unsafe_fixes, request.update_baseline, request.baseline_file
    target_torch, max_file_size, exclude = request.target_torch, request.max_file_size, request.exclude
    paths = paths or (".",)
    if "-" in paths and len(paths) > 1:
        raise RequestError("'-' (stdin) cannot be mixed with other paths")
    if diff and write:
        raise RequestError("--diff and --write are exclusive: --diff shows what --write would do")
    if update_baseline and baseline_file is None:
        raise RequestError("--update-baseline needs --baseline FILE: the file to write")
    if update_baseline and diff:
        raise RequestError("--update-baseline records the findings of the files as they are on disk: "
                               "use it without --diff (with --write, after the fixes)")
    baseline = _load_baseline(baseline_file, update_baseline)
    if unsafe_fixes and not (write or diff):
        raise RequestError("--unsafe-fixes applies fixes: add --diff to see them, or --write to apply them "
                               "(the report already lists every finding, those with an unsafe fix included)")
    if target_torch is not None:
        try:
            target = parse_target(target_torch)
        except ValueError as exc:
            raise RequestError(str(exc), param_hint="--target-torch", bad_value=True) from None
        problem = target_range_error(target)
        if problem:
            raise RequestError(problem, param_hint="--target-torch", bad_value=True)
    the_project = Project.at(paths[0] if paths[0] != "-" else ".", target if target_torch is not None else None)
    target, source = the_project.target, the_project.oldest_from
    if target_torch is None:
        # On stderr in every format (stdout stays pure JSON/SARIF/annotations), except where
        # --diff puts a machine-readable report on stderr itself.
        if source and not quiet and (fmt == "text" or not diff):
            rel = os.path.relpath(source)  # as the user would name it, when under the working directory
            shown = source if rel.startswith("..") else rel
            click.echo(f"ncclx migrate: target torch {target[0]}.{target[1]} (from {shown})", err=True)
    options = Options(
        target_torch=target,
        apply_safe=write or diff,
        apply_unsafe=unsafe_fixes and (write or diff),
        use_shim=request.use_shim,
        select=_prefixes(request.select),
        ignore=_prefixes(request.ignore),
        project=the_project,
    )
    mode = Mode(write=write, diff=diff) if max_file_size is None else Mode(
        write=write, diff=diff, max_bytes=int(max_file_size * 2**20), max_parse_bytes=int(max_file_size * 2**20))
    # The report goes to stderr when stdout carries a diff or the fixed stdin text.
    to_err = diff or (write and paths == ("-",))
    color = use_color(sys.stderr if to_err else sys.stdout)
    view = TextView(write=write, diff=diff, unsafe=options.apply_unsafe, color=color, show_source=request.show_source)
    if paths == ("-",):
        return _stdin(request.stdin_filename, options, mode, fmt, view, baseline, update_baseline)
    # A path that does not exist is a usage error (stderr, exit 2), not a file scanned with
    # an error in the report: the report covers the paths that do exist.
    missing = [p for p in paths if not os.path.lexists(p)]
    paths = tuple(p for p in paths if p not in missing)
    walk_errors: list[tuple[str, str]] = []
    files = list(discover(paths, exclude, walk_errors))
    progress = stderr_progress if sys.stderr.isatty() and not quiet else None
    cache = None if request.no_cache or not files else _cache(request.cache_dir, paths[0])
    if cache is not None:  # a cache folder inside the tree is not part of the project
        files = [f for f in files if not cache.holds(f)]
    before = _stamps(files) if write else {}
    try:
        report = run(files, options, mode, jobs=request.jobs, progress=progress, walked=paths, exclude=exclude,
                     cache=cache)
    except KeyboardInterrupt:
        if write:  # the workers finish the file they are writing: each file is whole, old or new
            n = sum(1 for f, was in before.items() if _stamp(f) != was)
            fresh_line()
            click.echo(f"ncclx migrate: {n:,} of {count(len(files), 'file')} already rewritten, each in full; "
                       "the others are as they were", err=True)
        raise
    if cache is not None and cache.problem:
        click.echo(f"ncclx migrate: warning: {cache.problem}", err=True)
    report.outcomes += [Outcome(FileResult(path, error=why)) for path, why in walk_errors]
    for o in report.outcomes:
        if o.skipped:
            click.echo(f"{o.result.path}: skipped: {o.skipped}", err=True)
    results = report.results
    for line in dict.fromkeys([*(n for o in report.outcomes for n in o.config), *_config.drain()]):
        click.echo(line, err=True)  # each worker reads a config file once: said once
    _warn(report.outcomes)
    unchecked = [f"{p}: no such file or directory" for p in missing]
    unchecked += [] if request.ignore_unknown else _unchecked(paths, report.outcomes)
    scanned = [o.result.path for o in report.outcomes if o.scanned and not o.result.error]
    comparison = None
    if unchecked and not report.files_scanned and not any(r.error for r in results):
        pass  # nothing was checked at all: the error alone, not a report of 0 files
    elif diff:
        for o in sorted(report.outcomes, key=lambda o: o.result.path):  # the report's order
            if o.diff:
                click.echo(o.diff, nl=False)
        # Findings left point into the text the diff leads to, which is not on disk.
        fixed = {r.path: r.new_text for r in results if r.new_text is not None}
        view = dataclasses.replace(view, read=lambda p: fixed[p] if p in fixed else read_source(p))
        comparison = _ratchet(baseline, update_baseline, fmt, results, scanned, options, view)
        # stdout holds only the diff (for `git apply`); the report, in any format, goes to stderr.
        click.echo(render(fmt, results, report.files_scanned, True, view, comparison), nl=False, err=True,
                   color=color)
    else:
        comparison = _ratchet(baseline, update_baseline, fmt, results, scanned, options, view)
        project = None
        if fmt == "json":
            project = project_info(paths[0], target)
        click.echo(render(fmt, results, report.files_scanned, view=view, baseline=comparison, project=project),
                   nl=False, color=color)
    for line in unchecked:
        click.echo(f"ncclx migrate: error: {line}", err=True)
    return 2 if unchecked else _exit_code(results, mode, comparison)



def _warn(outcomes: list[Outcome]) -> None:
    """Problems that are not findings (an ignore comment naming no rule) on stderr."""
    for o in outcomes:
        for w in o.warnings:
            line, _, text = w.partition(": ")
            click.echo(f"{o.result.path}:{line}: warning: {text}", err=True)


def _unchecked(paths: tuple[str, ...], outcomes: list[Outcome]) -> list[str]:
    """A line per command-line path that holds nothing a scanner reads: never silently 0 files."""
    scanned = [o.result.path for o in outcomes if o.scanned or o.result.error]
    out = []
    for p in paths:
        if os.path.isdir(p):
            prefix = os.path.join(os.path.normpath(p), "")
            if not any(os.path.normpath(f).startswith(prefix) or os.path.normpath(p) == "." for f in scanned):
                out.append(f"{p}: nothing to check (no file of the kinds it checks: {kinds_checked()}; "
                           "or --exclude/.gitignore left none)")
        elif p not in scanned and os.path.exists(p):
            out.append(f"{p}: not a kind of file ncclx migrate checks ({kinds_checked()}); "
                       "pass --ignore-unknown to skip such files")
    return out


def _same_bytes(path: str, raw: bytes) -> bool:
    try:
        st = os.stat(path)
        if not stat.S_ISREG(st.st_mode) or st.st_size != len(raw):  # (a FIFO is never opened)
            return False
        with open(path, "rb") as fh:
            return fh.read() == raw
    except OSError:
        return False


def _stdin(name: str, options: Options, mode: Mode, fmt: str, view: TextView,
           baseline: _baseline.Baseline | None = None, update: bool = False) -> int:
    raw = sys.stdin.buffer.read()
    display = name if name != "-" else "-"
    try:
        text, encoding = decode(raw, python=name == "-" or name.endswith((".py", ".pyw")))
    except ValueError as exc:
        result = FileResult(display, error=str(exc))
        click.echo(render(fmt, [result], 1), nl=False, err=mode.write or mode.diff)
        return 2
    kind_path = name
    if name == "-":
        # No --stdin-filename: a shell shebang says shell; anything else is read as Python.
        kind_path = "stdin.sh" if file_kind("-", text) == "shell" else "-"
    # An editor's buffer is labelled as in a run over its project (_project_files.py); bare stdin (`cat
    # train.py | ncclx migrate --write -`) as a file of the project the run was started in, so
    # that no label is less conservative than the file run's.  A file of it that holds the very
    # bytes read is taken to be the one piped in (not another file that sets the same names).
    given = name if name != "-" else os.path.join(os.getcwd(), kind_path)
    context = context_files([given])
    if name == "-":
        context = [f for f in context if not _same_bytes(f, raw)]
    if context:
        options = with_project(options, mode, context, given=(given, raw), scanned=(given,))
    result = process_text(kind_path, text, options) or FileResult(display)
    if name == "-" and kind_path == "-" and result.error and "parse" in result.error:
        result.error += ("; stdin is read as Python: for another kind of file pass --stdin-filename NAME "
                         "(e.g. run.sh, job.yaml, Dockerfile)")
    for line in _config.drain():
        click.echo(line, err=True)
    for w in [*notes_of(result), *suppression_warnings(text, kind_path), *result.warnings]:
        line, _, msg = w.partition(": ")
        click.echo(f"{display}:{line}: warning: {msg}", err=True)
    result.path = display
    for f in result.findings:
        f.path = display
    report = RunReport([Outcome(result)])
    # Positions of findings left point into the fixed text with --write or --diff.
    shown = result.new_text if (mode.write or mode.diff) and result.new_text is not None else text
    view = dataclasses.replace(view, read=lambda p: shown if p == display else None)
    c = _ratchet(baseline, update, fmt, report.results, [] if result.error else [display], options, view)
    if mode.write:
        out = result.new_text if result.new_text is not None else text
        sys.stdout.flush()
        sys.stdout.buffer.write(out.encode(encoding, errors="backslashreplace"))
        sys.stdout.buffer.flush()
        click.echo(render(fmt, report.results, 1, view=view, baseline=c), nl=False, err=True, color=view.color)
    elif mode.diff:
        if result.new_text is not None:
            sys.stdout.write(_unified(display, text, result.new_text))
        click.echo(render(fmt, report.results, 1, True, view, c), nl=False, err=True, color=view.color)
    else:
        click.echo(render(fmt, report.results, 1, view=view, baseline=c), nl=False, color=view.color)
    return _exit_code(report.results, mode, c)
