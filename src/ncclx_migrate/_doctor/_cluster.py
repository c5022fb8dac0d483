"""The cluster level: every rank runs the local checks; rank 0 gathers and compares.

The reports travel over the job's own c10d TCPStore at MASTER_ADDR:MASTER_PORT (the
store torchrun's agent hosts, or one rank 0 hosts under srun), never over NCCL, the thing
under test, and under their own key prefix.  Rank 0 waits at most ``--timeout`` and names
the ranks that never reported.  Ranks other than 0 print nothing and exit 0: rank 0's
report and exit status speak for the job.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import replace
from datetime import timedelta
from typing import TYPE_CHECKING, Any

import click

from ._facts import Options
from ._merge import Source, merge_reports
from ._model import CheckResult, Report, Status
from ._runner import run_checks

if TYPE_CHECKING:
    from ._render import Progress

__all__ = ["run_cluster"]

PREFIX = "ncclx-doctor"
POLL_S = 0.05


def _int_env(names: tuple[str, ...]) -> int | None:
    for name in names:
        raw = os.environ.get(name)
        if raw is not None:
            try:
                return int(raw)
            except ValueError:
                raise click.UsageError(f"{name}={raw!r} is not an integer") from None
    return None


def _where() -> tuple[int, int, str, int]:
    rank = _int_env(("RANK", "SLURM_PROCID"))
    world = _int_env(("WORLD_SIZE", "SLURM_NTASKS"))
    if rank is None or world is None:
        raise click.UsageError(
            "--level cluster runs on every rank under torchrun or srun: RANK/WORLD_SIZE "
            "(or SLURM_PROCID/SLURM_NTASKS) are not set"
        )
    addr = os.environ.get("MASTER_ADDR")
    port = _int_env(("MASTER_PORT",))
    if not addr or port is None:
        raise click.UsageError("--level cluster needs MASTER_ADDR and MASTER_PORT (torchrun sets them; "
                               "under srun export them in the batch script)")
    return rank, world, addr, port


def _store(addr: str, port: int, rank: int, world: int, timeout: float) -> Any:
    import torch.distributed as dist

    # torchrun's agent already hosts a TCPStore there; under srun rank 0 hosts one.
    agent = os.environ.get("TORCHELASTIC_USE_AGENT_STORE", "").lower() == "true"
    store = dist.TCPStore(addr, port, world, is_master=(rank == 0 and not agent),
                          timeout=timedelta(seconds=timeout), wait_for_workers=False)
    run = os.environ.get("TORCHELASTIC_RUN_ID") or os.environ.get("SLURM_JOB_ID") or "job"
    attempt = os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")
    return dist.PrefixStore(f"{PREFIX}/{run}/{attempt}", store)


def run_cluster(options: Options, progress: Progress | None = None) -> tuple[Report | None, int]:
    """``progress`` (rank 0, text output): status lines only; the merged report prints at the end."""
    rank, world, addr, port = _where()
    status = progress.status if progress is not None and rank == 0 else (lambda text: None)
    local_opts = replace(options, level="local")
    status("local checks...")
    report, _ = run_checks(local_opts)
    report.level = "cluster"
    report.rank = rank
    started = time.monotonic()
    try:
        store = _store(addr, port, rank, world, options.timeout)
        store.set(f"report/{rank}", json.dumps(report.to_json()))
        store.set(f"published/{rank}", repr(time.time()))  # for the gather-latency figure
    except Exception as exc:  # the store is the job's rendezvous: say so plainly
        if rank != 0:
            click.echo(f"ncclx doctor: rank {rank} could not publish its report to {addr}:{port}: "
                       f"{type(exc).__name__}: {exc}", err=True)
            return None, 1
        report.checks.append(CheckResult(
            "cluster-consistency", Status.FAIL,
            f"cannot reach the job's store at {addr}:{port}: {type(exc).__name__}: {str(exc).splitlines()[0]}",
            "check MASTER_ADDR/MASTER_PORT and that rank 0's node accepts connections on that port",
        ))
        return report, report.exit_code(options.strict)
    if rank != 0:
        return None, 0
    sources: dict[int, Source] = {0: Source(report, "")}
    poll_start = time.time()
    seen: dict[int, float] = {0: poll_start}
    deadline = started + options.timeout
    bad: dict[int, str] = {}
    while len(sources) + len(bad) < world and time.monotonic() < deadline:
        status(f"gathered {len(sources) + len(bad)}/{world} ranks")
        for r in range(world):
            if r in sources or r in bad:
                continue
            key = f"report/{r}"
            if not store.check([key]):
                continue
            seen[r] = time.time()
            try:
                sources[r] = Source(Report.from_json(json.loads(store.get(key))), "")
            except ValueError as exc:
                bad[r] = str(exc)
        if len(sources) + len(bad) < world:
            time.sleep(POLL_S)
    if progress is not None:
        progress.done()
    gather_ms = round((time.monotonic() - started) * 1000, 1)
    merged = merge_reports([sources[r] for r in sorted(sources)], level="cluster",
                           expected_ranks=[r for r in range(world) if r not in bad],
                           timeout=options.timeout, host=report.host, rank=0)
    consistency = merged.checks[-1]
    consistency.details["gather_ms"] = gather_ms
    latency = []
    for r, when in seen.items():
        try:
            latency.append(when - max(float(store.get(f"published/{r}")), poll_start))
        except Exception:
            pass
    # From a rank's publish (or rank 0 starting to wait, if later) to rank 0 holding its
    # report: what the store and the polling cost, without the ranks' start-up skew.
    consistency.details["max_latency_ms"] = round(max(latency, default=0.0) * 1000, 1)
    consistency.details["world_size"] = world
    if bad:
        consistency.status = Status.FAIL
        consistency.message += "; unreadable reports from " + ", ".join(f"rank {r} ({e})" for r, e in bad.items())
    store.set("done", "1")
    return merged, merged.exit_code(options.strict)
