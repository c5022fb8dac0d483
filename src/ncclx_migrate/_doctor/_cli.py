"""``ncclx doctor [opts]`` and ``ncclx doctor merge REPORT.json ...``.

Exit status: 0 no check failed (warnings allowed), 1 a check failed or errored (with
``--strict`` also on warnings), 2 usage error.  With ``--format json`` stdout carries exactly one
``ncclx.doctor/1`` document; anything torch or a library prints goes to stderr.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

import click

from .._format import format_option
from ._model import LEVELS, Report
from .checks import CHECKS

if TYPE_CHECKING:
    from ._merge import Source
    from ._render import Progress

__all__ = ["doctor"]

_IDS = [c.id for c in CHECKS]


@contextlib.contextmanager
def stdout_to_stderr() -> Iterator[TextIO]:
    """Point fd 1 at stderr while checks run, so C++/library prints cannot corrupt the JSON.

    Yields a stream on the real stdout, for the report streamed as the checks complete.
    """
    sys.stdout.flush()
    try:
        saved = os.dup(1)
    except OSError:
        yield sys.stdout
        return
    real = open(saved, "w", encoding=sys.stdout.encoding or "utf-8", errors="replace", closefd=False)
    try:
        os.dup2(2, 1)
        yield real
    finally:
        with contextlib.suppress(OSError, ValueError):  # a closed pipe must not skip the restore
            real.flush()
        sys.stdout.flush()
        os.dup2(saved, 1)
        with contextlib.suppress(OSError, ValueError):
            real.close()
        os.close(saved)


def _target(ctx: click.Context, param: click.Parameter, value: str | None) -> tuple[int, int] | None:
    if value is None:
        return None
    from .._torch.releases import target_range_error

    m = re.fullmatch(r"\s*(\d+)\.(\d+)(\.\d+)?\s*", value)
    if not m:
        raise click.BadParameter(f"{value!r} is not a torch release like 2.16")
    target = int(m.group(1)), int(m.group(2))
    problem = target_range_error(target)
    if problem:
        raise click.BadParameter(problem)
    return target


def known_backends(import_torch: bool) -> list[str]:
    """Backend names init_process_group accepts here: torch's built-ins, entry points, and
    (when torch may be imported) whatever torch's registry holds, custom backends included.
    The NCCL names of every release we have facts for count too: for a release that lacks one
    (nccl2 on 2.13, or judged with --target-torch) the checks say so with a remedy."""
    from .._torch.probe import startable_backends
    from .._torch.releases import BACKEND_NAMES

    names = {*startable_backends(), *BACKEND_NAMES}
    if import_torch:
        try:
            import torch.distributed as dist

            names |= {str(n).lower() for n in dist.Backend.backend_list} - {"undefined"}
        except Exception:  # no torch / no distributed: the checks say so
            pass
    return sorted(names)


def check_backend(value: str, import_torch: bool) -> None:
    """Raise a usage error naming the known backends when ``value`` names an unknown one."""
    parts = [p.partition(":")[2] if ":" in p else p for p in value.split(",")]
    known = known_backends(import_torch)
    unknown = [p.strip() for p in parts if p.strip().lower() not in known]
    if unknown or not value.strip():
        raise click.BadParameter(
            f"{(unknown or [value])[0]!r} is not a backend this torch knows; known: {', '.join(known)} "
            '(or the "cpu:gloo,cuda:nccl" form)', param_hint="'--backend'")


# A day: far past any probe or gather, and inside what TCPStore's timeout can hold.
MAX_TIMEOUT_S = 86400.0


def _timeout(ctx: click.Context, param: click.Parameter, value: float) -> float:
    if not 0 < value <= MAX_TIMEOUT_S:  # inf/nan would unbound every probe and gather
        raise click.BadParameter(f"must be a positive, finite number of seconds, at most {MAX_TIMEOUT_S:g}")
    return value


def emit(report: Report, as_json: bool) -> None:
    if as_json:
        click.echo(json.dumps(report.to_json(), indent=2, sort_keys=False))
    else:
        from .._color import use_color
        from ._render import render, terminal_width

        color = use_color()
        # click.echo strips escapes into a pipe unless told: FORCE_COLOR must reach one.
        click.echo(render(report, color=color, width=terminal_width()), color=color)


def _progress(as_json: bool, stream: TextIO) -> Progress | None:
    """The streaming text report (None with --format json); live status lines only on a terminal."""
    if as_json:
        return None
    from .._color import use_color
    from ._render import Progress, terminal_width

    # fd 1 points at stderr while the checks run: ask the real stdout (``stream``).
    color = use_color(stream)
    try:
        live = stream.isatty()
    except ValueError:
        live = False
    return Progress(stream, color, terminal_width(stream), live)


def write_html(path: Path, sources: Sequence[Source], summary: Report, expected: Sequence[int] = ()) -> None:
    """The --html page; a path that cannot be written is one line and exit 2."""
    from ._html import write_page

    try:
        write_page(path, sources, summary, expected)
    except OSError as exc:
        click.echo(f"ncclx doctor: error: {path}: cannot write the page there ({exc.strerror or exc})", err=True)
        sys.exit(2)
    click.echo(f"ncclx doctor: wrote {path}", err=True)


_HTML_HELP = "Also write a self-contained HTML page (hosts or ranks x checks) to this file."
_LABEL_HELP = "Name of the job this report speaks for, in the JSON (ncclx report rolls jobs up by it)."


def _default_label() -> str:
    import socket

    from ._facts import job_label

    return job_label(os.environ, socket.gethostname())


@click.group(invoke_without_command=True)
@click.option("--level", type=click.Choice(LEVELS), default="local", show_default=True,
              help="static: no torch import; local: import torch; probe: also build a real process "
                   "group here; cluster: every rank under torchrun/srun, gathered on rank 0.")
@format_option("ncclx.doctor/1")
@click.option("--strict", is_flag=True, help="Warnings fail too (Slurm prologs, CI).")
@click.option("--target-torch", callback=_target, metavar="X.Y",
              help="Judge readiness for this torch release (2.16: a legacy toggle fails).")
@click.option("--check", "selected", multiple=True, type=click.Choice(_IDS), metavar="ID",
              help="Run only this check (repeatable); see --list-checks.")
@click.option("--list-checks", is_flag=True, help="List the check ids and exit.")
@click.option("--backend", metavar="NAME",
              help='The backend the job passes to init_process_group ("nccl", "gloo", "nccl-lazy", '
                   '...). Default: "nccl" where a GPU is visible, else gloo.')
@click.option("--require-gpu", is_flag=True, help="No visible GPU is a failure, not a warning.")
@click.option("--timeout", type=float, default=30.0, show_default=True, callback=_timeout,
              metavar="SECONDS", help="Bound on the probe and on the cluster gather.")
@click.option("--html", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help=_HTML_HELP + " With --level cluster, rank 0 writes it.")
@click.option("--label", metavar="TEXT", help=_LABEL_HELP + " Default: the host and the Slurm or torchrun job id "
              "(node-a/slurm-4243).")
@click.pass_context
def doctor(
    ctx: click.Context,
    level: str,
    as_json: bool,
    strict: bool,
    target_torch: tuple[int, int] | None,
    selected: tuple[str, ...],
    list_checks: bool,
    backend: str | None,
    require_gpu: bool,
    timeout: float,
    html: Path | None,
    label: str | None,
) -> None:
    """Preflight check of torch, NCCL/RCCL, the environment and the GPUs for the nccl2 switch.

    \b
    ncclx doctor                      local checks of this process
    ncclx doctor --level static       no torch import (< 0.5 s)
    torchrun ... -m ncclx_migrate doctor --level cluster   every rank, reported on rank 0
    ncclx doctor merge a.json b.json  compare reports saved on several nodes
    """
    if ctx.invoked_subcommand is not None:
        return
    if list_checks:
        if as_json:
            click.echo(json.dumps([{"id": c.id, "level": c.min_level, "title": c.title} for c in CHECKS],
                                  indent=2))
        else:
            for c in CHECKS:
                click.echo(f"{c.id:<20} {c.min_level:<8} {c.title}")
        return
    from ._facts import Options
    from ._model import level_index

    if backend is not None:
        check_backend(backend, level_index(level) >= level_index("local"))
    options = Options(level=level, strict=strict, target_torch=target_torch, require_gpu=require_gpu,
                      timeout=timeout, selected=selected, backend=backend)
    if level == "cluster":
        from ._cluster import run_cluster

        with stdout_to_stderr() as out:
            report, code = run_cluster(
                options, _progress(as_json, out),
                on_merged=None if html is None else lambda src, rep, exp: write_html(html, src, rep, exp),
            )
        if report is not None:
            report.label = label or _default_label()  # rank 0 speaks for the job
            emit(report, as_json)
        ctx.exit(code)
    from ._runner import run_checks

    with stdout_to_stderr() as out:
        progress = _progress(as_json, out)
        report, _ = run_checks(options, progress=progress)
        report.label = label or _default_label()
        if progress is not None:
            progress.summary(report)
    if html is not None:
        from ._merge import Source

        write_html(html, [Source(report, "")], report)
    if progress is None:
        emit(report, as_json)
    ctx.exit(report.exit_code(strict))


@doctor.command("merge")
@click.argument("reports", nargs=-1, required=True, type=click.Path(dir_okay=False))
@format_option("ncclx.doctor/1")
@click.option("--strict", is_flag=True, help="Warnings fail too.")
@click.option("--html", type=click.Path(dir_okay=False, path_type=Path), default=None, help=_HTML_HELP)
@click.option("--label", metavar="TEXT", help=_LABEL_HELP + " Default: the inputs' label, where they share one.")
@click.pass_context
def merge(ctx: click.Context, reports: tuple[str, ...], as_json: bool, strict: bool, html: Path | None,
          label: str | None) -> None:
    """Compare doctor reports saved on several nodes (ncclx doctor --format json > NODE.json), offline."""
    from ._merge import load_reports, merge_reports

    try:
        loaded = load_reports(reports)
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    merged = merge_reports(loaded)
    labels = {s.report.label for s in loaded}
    jobs = {lb.partition("/")[2] for lb in labels if lb}  # node-a/slurm-42, node-b/slurm-42: slurm-42
    merged.label = label or (labels.pop() if len(labels) == 1 else jobs.pop() if len(jobs) == 1 and "" not in jobs
                             and None not in labels else None)
    if html is not None:
        write_html(html, loaded, merged)
    emit(merged, as_json)
    ctx.exit(merged.exit_code(strict))
