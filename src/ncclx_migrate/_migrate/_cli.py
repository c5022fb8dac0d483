"""``ncclx migrate``, ``ncclx rules``, ``ncclx explain``: thin click layers over the library."""

from __future__ import annotations

import dataclasses
import sys

import click

from .._color import use_color
from ._discover import discover
from ._model import FileResult, Finding, Options
from ._report import FORMATS, TextView, render
from ._rules import RULES, get_rule, rule_doc
from ._runner import Mode, Outcome, RunReport, decode, process_text, run, stderr_progress
from ._target import detect_target, parse_target

__all__ = ["explain", "migrate", "rules"]


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


def _exit_code(results: list[FileResult], mode: Mode) -> int:
    if any(r.error for r in results):
        return 2
    left: list[Finding] = [
        f for r in results for f in r.findings if not (mode.write and f.applied)
    ]
    return 1 if left else 0


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("paths", nargs=-1, type=click.Path(path_type=str))
@click.option("--diff", "diff", is_flag=True, help="Print the unified diff --write would apply; write nothing.")
@click.option("--write", "write", is_flag=True, help="Apply safe fixes in place.")
@click.option("--unsafe-fixes", is_flag=True, help="With --write/--diff: also apply fixes that change behaviour.")
@click.option("--select", multiple=True, metavar="CODES", help="Only these rule-code prefixes (comma-separated, repeatable).")
@click.option("--ignore", multiple=True, metavar="CODES", help="Skip these rule-code prefixes.")
@click.option("--target-torch", metavar="X.Y", help="Oldest torch the code must still run on (default: detected, else 2.15).")
@click.option("--use-shim", is_flag=True, help="Rewrite to ncclx_migrate.backend helpers instead of plain torch.")
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="text", show_default=True)
@click.option("--exclude", multiple=True, metavar="GLOB", help="Skip paths matching GLOB (repeatable).")
@click.option("--jobs", "-j", type=click.IntRange(min=1), default=None, help="Worker processes (default: CPU count).")
@click.option("--stdin-filename", default="-", metavar="NAME", help="Name (and so file kind) of the text read from '-'.")
@click.option("--quiet", "-q", is_flag=True, help="No progress or detection notes on stderr.")
@click.option("--show-source", is_flag=True, help="Text format: show the source line of each finding with a caret.")
def migrate(
    paths: tuple[str, ...], diff: bool, write: bool, unsafe_fixes: bool, select: tuple[str, ...],
    ignore: tuple[str, ...], target_torch: str | None, use_shim: bool, fmt: str, exclude: tuple[str, ...],
    jobs: int | None, stdin_filename: str, quiet: bool, show_source: bool,
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
    if target_torch is not None:
        try:
            target = parse_target(target_torch)
        except ValueError as exc:
            raise click.BadParameter(str(exc), param_hint="--target-torch") from None
    else:
        target, source = detect_target(paths[0] if paths[0] != "-" else ".")
        if source and not quiet and fmt == "text":
            click.echo(f"ncclx migrate: target torch {target[0]}.{target[1]} (from {source})", err=True)
    options = Options(
        target_torch=target,
        apply_safe=write or diff,
        apply_unsafe=unsafe_fixes and (write or diff),
        dry_run=diff,
        use_shim=use_shim,
        select=_prefixes(select),
        ignore=_prefixes(ignore),
    )
    mode = Mode(write=write, diff=diff)
    # The report goes to stderr when stdout carries a diff or the fixed stdin text.
    to_err = diff or (write and paths == ("-",))
    color = use_color(sys.stderr if to_err else sys.stdout)
    view = TextView(write=write, diff=diff, unsafe=options.apply_unsafe, color=color, show_source=show_source)
    if paths == ("-",):
        sys.exit(_stdin(stdin_filename, options, mode, fmt, view))
    files = discover(paths, exclude)
    progress = stderr_progress if sys.stderr.isatty() and not quiet else None
    report = run(files, options, mode, jobs=jobs, progress=progress)
    results = report.results
    if diff:
        for o in sorted(report.outcomes, key=lambda o: o.result.path):  # the report's order
            if o.diff:
                click.echo(o.diff, nl=False)
        # stdout holds only the diff (for `git apply`); the report, in any format, goes to stderr.
        click.echo(render(fmt, results, report.files_scanned, True, view), nl=False, err=True, color=color)
    else:
        click.echo(render(fmt, results, report.files_scanned, view=view), nl=False, color=color)
    sys.exit(_exit_code(results, mode))


def _stdin(name: str, options: Options, mode: Mode, fmt: str, view: TextView) -> int:
    raw = sys.stdin.buffer.read()
    display = name if name != "-" else "-"
    try:
        text, bom = decode(raw)
    except ValueError as exc:
        result = FileResult(display, error=str(exc))
        click.echo(render(fmt, [result], 1), nl=False, err=mode.write or mode.diff)
        return 2
    kind_path = name if name != "-" else "-"
    result = process_text(kind_path, text, options) or FileResult(display)
    result.path = display
    for f in result.findings:
        f.path = display
    report = RunReport([Outcome(result)])
    # Positions point into the written text after --write, else into the text as read.
    shown = result.new_text if mode.write and result.new_text is not None else text
    view = dataclasses.replace(view, read=lambda p: shown if p == display else None)
    if mode.write:
        out = result.new_text if result.new_text is not None else text
        sys.stdout.flush()
        sys.stdout.buffer.write((("\ufeff" if bom else "") + out).encode("utf-8"))
        sys.stdout.buffer.flush()
        click.echo(render(fmt, report.results, 1, view=view), nl=False, err=True, color=view.color)
    elif mode.diff:
        if result.new_text is not None:
            from ._runner import _unified

            sys.stdout.write(_unified(display, text, result.new_text))
        click.echo(render(fmt, report.results, 1, True, view), nl=False, err=True, color=view.color)
    else:
        click.echo(render(fmt, report.results, 1, view=view), nl=False, color=view.color)
    return _exit_code(report.results, mode)


@click.command()
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
def rules(fmt: str) -> None:
    """List every rule: code, fix kind, torch versions it concerns, summary."""
    if fmt == "json":
        import json

        click.echo(json.dumps([
            {"code": r.code, "name": r.name, "summary": r.summary, "fix": [k.value for k in r.fixes],
             "torch": r.torch, "files": r.files}
            for r in RULES
        ], indent=2))
        return
    width = max(len(r.fix_label) for r in RULES)
    for r in RULES:
        click.echo(f"{r.code}  {r.fix_label:<{width}}  torch {r.torch:<16}  {r.summary}")


@click.command()
@click.argument("code")
def explain(code: str) -> None:
    """Print a rule's full documentation (why, fix, evidence)."""
    rule = get_rule(code)
    if rule is None:
        raise click.UsageError(f"unknown rule code {code!r}; `ncclx rules` lists them")
    doc = rule_doc(rule.code)
    if doc is None:
        raise click.UsageError(f"{rule.code} has no documentation file ({rule.doc_path}); this is a packaging bug")
    click.echo(doc.rstrip("\n"))
