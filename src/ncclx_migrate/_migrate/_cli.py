"""``ncclx migrate``: a thin click layer over the library (``rules`` and ``explain``: _docs_cli)."""

from __future__ import annotations

import dataclasses
import os
import stat
import sys

import click

from .._color import use_color
from . import _baseline, _config, _runner
from . import _cache as _runner_cache
from ._discover import discover
from ._model import FileResult, Finding, Options
from ._project import Project
from ._report import FORMATS, TextView, read_source, render
from ._rules import RULES
from ._runner import (
    Mode,
    Outcome,
    RunReport,
    decode,
    process_text,
    run,
    stderr_progress,
    suppression_warnings,
    with_project,
)
from ._scope import context_files
from ._target import parse_target

__all__ = ["migrate"]


def _prefixes(values: tuple[str, ...]) -> tuple[str, ...]:
    out: list[str] = []
    for v in values:
        for p in v.split(","):
            p = p.strip().upper()
            if not p:
                continue
            if p != "ALL" and not any(r.code.startswith(p) for r in RULES):
                raise click.BadParameter(f"{p!r} matches no rule code (see `ncclx rules`)")
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
            import os

            _baseline.stamp(findings, view.read, os.getcwd())
        return None
    try:
        return _baseline.ratchet(baseline, findings, scanned, options, view.read, update)
    except OSError as exc:
        click.echo(f"ncclx migrate: error: {baseline.path}: cannot write the baseline: {exc.strerror or exc}",
                   err=True)
        sys.exit(2)


def _cache(folder: str | None, first: str) -> _runner_cache.Cache | None:
    import os

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
        import os

        if update and not os.path.lexists(path):
            return _baseline.Baseline(path)  # --update-baseline creates it
        # Not even --update-baseline overwrites a file that is not a baseline: it may be another file.
        click.echo(f"ncclx migrate: error: {exc}", err=True)
        sys.exit(2)


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("paths", nargs=-1, type=click.Path(path_type=str))
@click.option("--diff", "diff", is_flag=True, help="Print the unified diff --write would apply; write nothing.")
@click.option("--write", "write", is_flag=True, help="Apply safe fixes in place.")
@click.option("--unsafe-fixes", is_flag=True, help="With --write/--diff: also apply fixes that change behaviour.")
@click.option("--select", multiple=True, metavar="CODES", help="Only these rule-code prefixes (comma-separated, repeatable).")
@click.option("--ignore", multiple=True, metavar="CODES", help="Skip these rule-code prefixes.")
@click.option("--target-torch", metavar="X.Y", help="Oldest torch the code must still run on (default: detected, else 2.15).")
@click.option("--use-shim", is_flag=True,
              help="Five fixes use ncclx_migrate.backend helpers instead of plain torch: isinstance(x, "
                   "ProcessGroupNCCL) -> is_nccl_backend(x), a backend's NCCL versions -> runtime_nccl_version() / "
                   "build_nccl_version(), pg._get_backend(...)._set_default_timeout(t) -> set_timeout(t, group=pg) (an unsafe "
                   "fix; not on a backend whose group the function does not show), _group_start/_group_end -> "
                   "coalescing(), and C++ casts -> ncclx::is_nccl / comm_ptr. Every other fix (get_backend() == "
                   "\"nccl\" too) is the same with or without it.")
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="text", show_default=True)
@click.option("--exclude", multiple=True, metavar="GLOB", help="Skip paths matching GLOB (repeatable).")
@click.option("--jobs", "-j", type=click.IntRange(min=1), default=None, help="Worker processes (default: CPU count; at most 2 per CPU and 1 per file).")
@click.option("--stdin-filename", default="-", metavar="NAME", help="Name (and so file kind) of the text read from '-'.")
@click.option("--quiet", "-q", is_flag=True, help="No progress or detection notes on stderr.")
@click.option("--show-source", is_flag=True, help="Text format: show the source line of each finding with a caret.")
@click.option("--max-file-size", type=click.FloatRange(min=0, min_open=True, max=2**20), default=None, metavar="MB",
              help=f"Larger files are not read (Python: an error; others: skipped). Default: {_runner.DEFAULT_MAX_MB:g}, "
                   f"and Python a rule would parse {_runner.DEFAULT_MAX_PYTHON_MB:g} (parsing takes ~1,300x the size).")
@click.option("--ignore-unknown", is_flag=True,
              help="A file of a kind no scanner reads is skipped, not an error (pre-commit passes every text file).")
@click.option("--baseline", "baseline_file", metavar="FILE", type=click.Path(dir_okay=False, path_type=str),
              help="Report and fail only on findings not in FILE (a JSON file --update-baseline writes).")
@click.option("--update-baseline", is_flag=True,
              help="With --baseline FILE: write this run's findings into FILE (for the files scanned) and exit 0.")
@click.option("--cache-dir", metavar="DIR", type=click.Path(file_okay=False, readable=False, path_type=str),
              help="Keep per-file results in DIR (default: $NCCLX_CACHE_DIR, else .ncclx_cache/ at the project root).")
@click.option("--no-cache", is_flag=True, help="Scan every file; read and write no cache.")
def migrate(
    paths: tuple[str, ...], diff: bool, write: bool, unsafe_fixes: bool, select: tuple[str, ...],
    ignore: tuple[str, ...], target_torch: str | None, use_shim: bool, fmt: str, exclude: tuple[str, ...],
    jobs: int | None, stdin_filename: str, quiet: bool, show_source: bool, max_file_size: float | None,
    ignore_unknown: bool, baseline_file: str | None, update_baseline: bool, cache_dir: str | None, no_cache: bool,
) -> None:
    """Find (and with --write fix) legacy-NCCL toggles and code that changes under nccl2.

    Exit status: 0 no finding left, 1 findings left, 2 usage error or a file could not be
    read or parsed (all other files are still processed).
    """
    paths = paths or (".",)
    if "-" in paths and len(paths) > 1:
        raise click.UsageError("'-' (stdin) cannot be mixed with other paths")
    if diff and write:
        raise click.UsageError("--diff and --write are exclusive: --diff shows what --write would do")
    if update_baseline and baseline_file is None:
        raise click.UsageError("--update-baseline needs --baseline FILE: the file to write")
    if update_baseline and diff:
        raise click.UsageError("--update-baseline records the findings of the files as they are on disk: "
                               "use it without --diff (with --write, after the fixes)")
    baseline = _load_baseline(baseline_file, update_baseline)
    if unsafe_fixes and not (write or diff):
        raise click.UsageError("--unsafe-fixes applies fixes: add --diff to see them, or --write to apply them "
                               "(the report already lists every finding, those with an unsafe fix included)")
    if target_torch is not None:
        from .._torchfacts import target_range_error

        try:
            target = parse_target(target_torch)
        except ValueError as exc:
            raise click.BadParameter(str(exc), param_hint="--target-torch") from None
        problem = target_range_error(target)
        if problem:
            raise click.BadParameter(problem, param_hint="--target-torch")
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
        use_shim=use_shim,
        select=_prefixes(select),
        ignore=_prefixes(ignore),
        project=the_project,
    )
    mode = Mode(write=write, diff=diff) if max_file_size is None else Mode(
        write=write, diff=diff, max_bytes=int(max_file_size * 2**20), max_parse_bytes=int(max_file_size * 2**20))
    # The report goes to stderr when stdout carries a diff or the fixed stdin text.
    to_err = diff or (write and paths == ("-",))
    color = use_color(sys.stderr if to_err else sys.stdout)
    view = TextView(write=write, diff=diff, unsafe=options.apply_unsafe, color=color, show_source=show_source)
    if paths == ("-",):
        sys.exit(_stdin(stdin_filename, options, mode, fmt, view, baseline, update_baseline))
    # A path that does not exist is a usage error (stderr, exit 2), not a file scanned with
    # an error in the report: the report covers the paths that do exist.
    missing = [p for p in paths if not os.path.lexists(p)]
    paths = tuple(p for p in paths if p not in missing)
    walk_errors: list[tuple[str, str]] = []
    files = list(discover(paths, exclude, walk_errors))
    progress = stderr_progress if sys.stderr.isatty() and not quiet else None
    cache = None if no_cache or not files else _cache(cache_dir, paths[0])
    if cache is not None:  # a cache folder inside the tree is not part of the project
        files = [f for f in files if not cache.holds(f)]
    before = _stamps(files) if write else {}
    try:
        report = run(files, options, mode, jobs=jobs, progress=progress, walked=paths, exclude=exclude,
                     cache=cache)
    except KeyboardInterrupt:
        if write:  # the workers finish the file they are writing: each file is whole, old or new
            from .._cli import fresh_line
            from .._words import count

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
    unchecked += [] if ignore_unknown else _unchecked(paths, report.outcomes)
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
            from ._project import project_info

            project = project_info(paths[0], target)
        click.echo(render(fmt, results, report.files_scanned, view=view, baseline=comparison, project=project),
                   nl=False, color=color)
    for line in unchecked:
        click.echo(f"ncclx migrate: error: {line}", err=True)
    sys.exit(2 if unchecked else _exit_code(results, mode, comparison))


def _warn(outcomes: list[Outcome]) -> None:
    """Problems that are not findings (an ignore comment naming no rule) on stderr."""
    for o in outcomes:
        for w in o.warnings:
            line, _, text = w.partition(": ")
            click.echo(f"{o.result.path}:{line}: warning: {text}", err=True)


def _unchecked(paths: tuple[str, ...], outcomes: list[Outcome]) -> list[str]:
    """A line per command-line path that holds nothing a scanner reads: never silently 0 files."""
    from ._files import kinds_checked

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
        from ._files import file_kind

        # No --stdin-filename: a shell shebang says shell; anything else is read as Python.
        kind_path = "stdin.sh" if file_kind("-", text) == "shell" else "-"
    # An editor's buffer is labelled as in a run over its project (_scope.py); bare stdin (`cat
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
    for w in suppression_warnings(text, kind_path):
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
            from ._runner import _unified

            sys.stdout.write(_unified(display, text, result.new_text))
        click.echo(render(fmt, report.results, 1, True, view, c), nl=False, err=True, color=view.color)
    else:
        click.echo(render(fmt, report.results, 1, view=view, baseline=c), nl=False, color=view.color)
    return _exit_code(report.results, mode, c)
