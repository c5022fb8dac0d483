"""``ncclx compare``: two backend arms side by side (collectives), or ``--train -- CMD ...``.

Exit status: 0 the arms agree, 1 a mismatch, hang or regression (training: a divergence, a failure in
one arm, a slower step time),
2 the comparison could not run (bad arguments, nothing to compare, an arm that cannot start),
3 (--require-sensitivity) no finding, but the run could not have seen a slowdown of that size (with --train:
in the step time).
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import click

from .._format import format_option
from ._spec import (
    COLLECTIVES,
    CPU_MAX_BYTES,
    DTYPES,
    GPU_MAX_BYTES,
    ITERS,
    ROUNDS,
    WARMUP,
    Arm,
    ArmError,
    default_sizes,
    needs_gpu,
    parse_arm,
    parse_sizes,
    unknown_backend,
)

if TYPE_CHECKING:
    from ._run import Settings

__all__ = ["compare"]

EXIT_COULD_NOT_RUN = 2


def _fail(text: str) -> None:
    click.echo(f"ncclx compare: error: {text}", err=True)
    sys.exit(EXIT_COULD_NOT_RUN)


def _names(text: str | None, known: tuple[str, ...], what: str) -> list[str]:
    if text is None:
        return list(known)
    got = [p.strip() for p in text.split(",") if p.strip()]
    bad = [p for p in got if p not in known]
    if bad or not got:
        raise click.BadParameter(f"{', '.join(bad) or repr(text)}: not a {what}; choose from {', '.join(known)}")
    return [k for k in known if k in got]


def _threshold_or_none(ctx: click.Context, param: click.Parameter, value: str | None) -> float | None:
    return None if value is None else _threshold(ctx, param, value)


def _threshold(ctx: click.Context, param: click.Parameter, value: str) -> float:
    try:
        pct = float(value.strip().rstrip("%"))
    except ValueError:
        pct = -1.0
    if not 0 <= pct < float("inf"):
        raise click.BadParameter(f"{value!r} is not a percentage like 5 or 5%")
    return pct / 100


@click.command(context_settings={"ignore_unknown_options": False})
@click.option("--arm", "arms", multiple=True, metavar="ARM",
              help="An arm, given twice (the first is the baseline): a backend name (nccl2, nccl-legacy, "
                   "gloo), NAME=VALUE environment settings joined by commas, or BACKEND,NAME=VALUE,... "
                   "Default: the rollback (TORCH_DIST_USE_NCCL2=0) against what \"nccl\" builds here.")
@click.option("--nproc", type=click.IntRange(1, 1024), default=None,
              help="Ranks on this node (default: one per GPU; 2 gloo ranks without a GPU).")
@click.option("--device", type=click.Choice(["auto", "cpu", "cuda"]), default="auto", show_default=True,
              help="Where the tensors live (auto: cuda when a GPU is visible and an arm is not gloo).")
@click.option("--sizes", default=None, metavar="LIST",
              help="Message sizes such as 1K,64K,1M (default: 8 B doubling up to 1 GiB, bounded by GPU "
                   "memory; up to 1 MiB on CPU).")
@click.option("--dtypes", default=None, metavar="LIST", help=f"Of {', '.join(DTYPES)} (default: all).")
@click.option("--collectives", default=None, metavar="LIST", help=f"Of {', '.join(COLLECTIVES)} (default: all).")
@click.option("--warmup", type=click.IntRange(0, 10_000), default=WARMUP, show_default=True,
              help="Untimed iterations per case (nccl-tests' -w).")
@click.option("--iters", type=click.IntRange(1, 100_000), default=ITERS, show_default=True,
              help="Timed iterations per case (nccl-tests' -n).")
@click.option("--threshold", default="5", callback=_threshold, show_default=True, metavar="PCT",
              help="A case whose median time is worse by more than PCT percent is a regression (with "
                   "--train: the step time, or tokens/s).")
@click.option("--rounds", type=click.IntRange(1, 10_000), default=ROUNDS, show_default=True,
              help="Paired rounds per case: the arms alternate, one short block each, --iters spread over them.")
@click.option("--require-sensitivity", "require", default=None, callback=_threshold_or_none, metavar="PCT",
              help="Exit 3 when the run could not have detected a slowdown of PCT percent in every collective "
                   "(with --train: in the step time).")
@click.option("--timeout", type=click.FloatRange(1, 86_400), default=900.0, show_default=True,
              help="Seconds for everything (both arms); a rank still running then is killed and named.")
@click.option("--html", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Also write a self-contained HTML page (busbw against size per collective) here.")
@click.option("--train", is_flag=True, help="Training parity: run CMD (after --) once per arm and compare "
                                              "its per-step metrics.")
@click.option("--steps", type=click.IntRange(1, 1_000_000), default=None,
              help="--train: compare the first N steps (default: every step both arms printed).")
@click.option("--metric", "metrics", multiple=True, metavar="REGEX",
              help="--train: a regex whose first group is a per-step value (repeatable; default "
                   "'loss[=:] *([-0-9.eE+]+)').")
@click.option("--rtol", type=click.FloatRange(0, 1), default=0.0, show_default=True,
              help="--train: relative tolerance (0: the values must be equal).")
@click.option("--cluster", is_flag=True,
              help="Run on every task of a torchrun or srun job (one rank each, WORLD_SIZE ranks); "
                   "rank 0 writes the report.")
@format_option("ncclx.compare/1")
@click.argument("command", nargs=-1, type=click.UNPROCESSED)
def compare(arms: tuple[str, ...], nproc: int | None, device: str, sizes: str | None, dtypes: str | None,
            collectives: str | None, warmup: int, iters: int, threshold: float, rounds: int,
            require: float | None, timeout: float,
            html: Path | None, train: bool, steps: int | None, metrics: tuple[str, ...], rtol: float,
            cluster: bool, command: tuple[str, ...], as_json: bool) -> None:
    """Compare two backend arms (nccl2 against the rollback by default): every collective
    for correctness and speed, or (--train) your own training run step by step.

    \b
    ncclx compare                                  # the rollback against "nccl" (nccl2)
    ncclx compare --arm gloo --arm gloo --sizes 1K,64K
    ncclx compare --train --steps 10 -- torchrun --nproc-per-node 8 train.py

    Exit 0: the arms agree; 1: a mismatch, hang, regression or divergence; 2: could not run.
    """
    if train:
        from ._train import run_train

        if not command:
            _fail("--train needs the training command after --, e.g. ncclx compare --train -- python train.py")
        given = {"--sizes": sizes, "--dtypes": dtypes, "--collectives": collectives, "--nproc": nproc,
                 "--html": html, "--cluster": cluster or None}
        for opt in (o for o, v in given.items() if v is not None):
            _fail(f"{opt} goes without --train (the training command decides its own ranks and work)")
        if click.get_current_context().get_parameter_source("rounds") != click.core.ParameterSource.DEFAULT:
            _fail("--rounds goes without --train (a training run's paired rounds are its steps: --steps sets "
                  "how many)")
        sys.exit(run_train(list(command), _arms(arms, "nccl"), steps, list(metrics), rtol, timeout, as_json,
                           threshold, require))
    if command:
        _fail(f"unexpected argument {command[0]!r} (a command after -- goes with --train)")
    for opt in (o for o, v in (("--steps", steps), ("--metric", metrics or None)) if v is not None):
        _fail(f"{opt} goes with --train")
    try:
        chosen_sizes = parse_sizes(sizes) if sizes is not None else None
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--sizes") from None
    colls = _names(collectives, COLLECTIVES, "collective")
    types = _names(dtypes, DTYPES, "dtype")
    gloo_only = bool(arms) and all(a.split(",")[0].strip() == "gloo" for a in arms)
    gpus = 0
    if device != "cpu" and not gloo_only:
        from .._torch.probe import cuda_device_count

        gpus = cuda_device_count()
    where = device if device != "auto" else ("cuda" if gpus else "cpu")
    if where == "cuda" and gpus == 0 and device == "cuda":
        _fail("--device cuda, but no GPU is visible here")
    chosen = _arms(arms, "nccl" if where == "cuda" else "gloo")
    for arm in (a for a in chosen if where == "cpu" and arms and needs_gpu(a.backend)):
        why = "--device cpu" if device == "cpu" else "no GPU is visible here"
        _fail(f'arm {arm.label} ("{arm.backend}") needs a GPU, and the tensors are on cpu ({why}): '
              "compare it on a GPU node, or name a CPU backend such as gloo")
    if where == "cpu" and not arms:
        _fail('no GPU is visible here, and the default arms ("nccl" and its rollback) need one: run on a GPU '
              "node, or check the harness with --arm gloo --arm gloo")
    job = None
    if cluster:
        from .._doctor._cluster import where as job_where

        rank, job_world, addr, port = job_where("ncclx compare --cluster")
        if nproc is not None:
            _fail("--nproc goes without --cluster (under torchrun or srun every task is one rank)")
        local = os.environ.get("LOCAL_RANK") or os.environ.get("SLURM_LOCALID") or "0"
        job = (rank, int(local) if local.isdigit() else 0, addr, port)
    world = job_world if cluster else nproc or (gpus if where == "cuda" else 2)
    from ._run import Settings

    settings = Settings(world, where, chosen_sizes or default_sizes(GPU_MAX_BYTES if where == "cuda" else CPU_MAX_BYTES),
                        types, colls, warmup, iters, timeout, rounds)
    _run_collectives(chosen, settings, threshold, html, as_json, job, require)


def _arms(given: tuple[str, ...], default_backend: str) -> list[Arm]:
    if not given:
        from ._arms import NoComparison, default_arms

        try:
            return default_arms()
        except NoComparison as exc:
            _fail(str(exc))
    if len(given) != 2:
        _fail(f"--arm is given twice (baseline, then the other arm); got it {len(given)} time"
              f"{'s' if len(given) != 1 else ''}")
    try:
        chosen = [parse_arm(text, label, default_backend) for text, label in zip(given, "AB", strict=True)]
    except ArmError as exc:
        _fail(str(exc))
        raise  # unreachable: _fail exits
    for arm in chosen:
        problem = unknown_backend(arm)
        if problem:
            _fail(problem)
    return chosen


def _run_collectives(arms: list[Arm], settings: Settings, threshold: float, html: Path | None,
                     as_json: bool, job: tuple[int, int, str, int] | None, require: float | None = None) -> None:
    from .._torch.probe import installed_torch_version
    from ._run import ArmRun, run_arms
    from ._verdict import judge

    def confirm(so_far: list[ArmRun]) -> list[int]:  # the cases to measure again before naming them
        return list(judge(so_far, settings, threshold, None)["flagged_cases"])

    progress = _progress()
    end = time.monotonic() + settings.timeout
    workdir = Path(tempfile.mkdtemp(prefix="ncclx-compare-"))
    runs: list[ArmRun] = []
    try:
        if job is not None:
            from ._cluster import run_job_arms

            rank, local, addr, port = job
            got = run_job_arms(arms, settings, end, workdir, dict(os.environ), progress, rank, local, addr, port,
                               confirm)
            if got is None:  # rank 0 speaks for the job
                sys.exit(0)
            runs = got
        else:
            runs = run_arms(arms, settings, end, workdir, dict(os.environ), progress, confirm=confirm)
    finally:
        progress("")
        # A hang's records and flight-recorder dumps are evidence: they stay (and the report says where).
        if not any(r.hung for r in runs):
            shutil.rmtree(workdir, ignore_errors=True)
    report = judge(runs, settings, threshold, installed_torch_version(), require)
    if any(r.hung for r in runs):
        report["kept"] = str(workdir)
        report["notes"].append(f"the ranks' records and flight-recorder dumps are kept in {workdir}")
    if html is not None:
        from ._html import write_page

        try:
            write_page(html, report)
        except OSError as exc:
            _fail(f"{html}: cannot write the page there ({exc.strerror or exc})")
        click.echo(f"ncclx compare: wrote {html}", err=True)
    if as_json:
        click.echo(json.dumps(report, indent=2))
    else:
        from ._render import render_text

        # A run that could not start has no comparison to show: its rows would all read "not run".
        shown = {**report, "rows": []} if report["exit"] == EXIT_COULD_NOT_RUN else report
        click.echo(render_text(shown))
    sys.exit(report["exit"])


def _progress() -> Callable[[str], None]:
    """A status line on a terminal's stderr (nothing otherwise); "" clears it."""
    if not sys.stderr.isatty():
        return lambda text: None
    last = [""]

    def show(text: str) -> None:
        if text != last[0]:
            sys.stderr.write("\r\x1b[2K" + text[:150])
            sys.stderr.flush()
            last[0] = text

    return show
