"""The cluster level: every rank runs the local checks; rank 0 gathers and compares.

The reports travel over the job's own c10d TCPStore at MASTER_ADDR:MASTER_PORT (the
store torchrun's agent hosts, or one rank 0 hosts under srun), never over NCCL, the thing
under test, and under their own key prefix.  Rank 0 waits at most ``--timeout`` and names
the ranks that never reported.  Ranks other than 0 print nothing and exit 0: rank 0's
report and exit status speak for the job.

Each rank sets ``report/<rank>`` and appends ``<rank>:<time>,`` to ``arrived`` (and bumps
``arrived_n``); rank 0 reads the counter each poll, the arrival list only when it moved,
and fetches new reports with ``multi_get`` in batches: a few round trips per poll at any
rank count, instead of one per waiting rank (docs/performance.md).  When the launcher
stops rank 0 (SIGTERM: torchrun does so to every rank when one dies), rank 0 stops
waiting, reports what it has, naming the ranks that never reported, and exits 1.
"""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from datetime import timedelta
from typing import TYPE_CHECKING, Any

import click

from .._words import count
from ._facts import Options
from ._merge import Source, merge_reports
from ._model import CheckResult, Report, ReportError, Status
from ._runner import run_checks

if TYPE_CHECKING:
    from ._render import Progress

__all__ = ["Gathered", "gather", "job_prefix", "job_store", "publish", "run_cluster", "where"]

PREFIX = "ncclx-doctor"
POLL_S = 0.05
BATCH = 1024  # reports per multi_get


def _int_env(names: tuple[str, ...]) -> int | None:
    for name in names:
        raw = os.environ.get(name)
        if raw is not None:
            try:
                return int(raw)
            except ValueError:
                raise click.UsageError(f"{name}={raw!r} is not an integer") from None
    return None


def where(what: str = "--level cluster") -> tuple[int, int, str, int]:
    """(rank, world size, MASTER_ADDR, MASTER_PORT) of this torchrun/srun task; ``what`` names
    the mode in the usage error when they are missing."""
    rank = _int_env(("RANK", "SLURM_PROCID"))
    world = _int_env(("WORLD_SIZE", "SLURM_NTASKS"))
    if rank is None or world is None:
        raise click.UsageError(
            f"{what} runs on every rank under torchrun or srun: RANK/WORLD_SIZE "
            "(or SLURM_PROCID/SLURM_NTASKS) are not set"
        )
    addr = os.environ.get("MASTER_ADDR")
    port = _int_env(("MASTER_PORT",))
    if not addr or port is None:
        raise click.UsageError(f"{what} needs MASTER_ADDR and MASTER_PORT (torchrun sets them; "
                               "under srun export them in the batch script)")
    return rank, world, addr, port



def job_prefix(prefix: str = PREFIX) -> str:
    """The key prefix of this job and attempt in the job's store."""
    run = os.environ.get("TORCHELASTIC_RUN_ID") or os.environ.get("SLURM_JOB_ID") or "job"
    attempt = os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")
    return f"{prefix}/{run}/{attempt}"


def job_store(addr: str, port: int, rank: int, world: int, timeout: float, prefix: str = PREFIX) -> Any:
    """The job's own TCPStore under ``job_prefix(prefix)``: torchrun's agent already hosts one
    at MASTER_ADDR:MASTER_PORT; under srun rank 0 hosts it (and must outlive the others' use)."""
    import torch.distributed as dist

    agent = os.environ.get("TORCHELASTIC_USE_AGENT_STORE", "").lower() == "true"
    store = dist.TCPStore(addr, port, world, is_master=(rank == 0 and not agent),
                          timeout=timedelta(seconds=timeout), wait_for_workers=False)
    return dist.PrefixStore(job_prefix(prefix), store)



def publish(store: Any, rank: int, report: Report) -> None:
    """What every rank (rank 0 too) posts: its report, then its arrival."""
    store.set(f"report/{rank}", json.dumps(report.to_json()))
    store.append("arrived", f"{rank}:{time.time()!r},")
    store.add("arrived_n", 1)


def _arrivals(store: Any, world: int) -> dict[int, float]:
    """rank -> when it published, from the ``arrived`` list (garbage in it is skipped)."""
    out: dict[int, float] = {}
    for item in bytes(store.get("arrived")).decode("ascii", "replace").split(","):
        rank, _, when = item.partition(":")
        try:
            r, t = int(rank), float(when)
        except ValueError:
            continue
        if 0 <= r < world:
            out.setdefault(r, t)
    return out


def _batches(items: list[int]) -> Iterator[list[int]]:
    for k in range(0, len(items), BATCH):
        yield items[k:k + BATCH]


@dataclass
class Gathered:
    sources: dict[int, Source]
    bad: dict[int, str]  # rank -> why its report could not be read
    seen: dict[int, float]  # rank -> when rank 0 had its report
    published: dict[int, float]  # rank -> when it posted


def gather(store: Any, world: int, own: Report, deadline: float, stopped: Callable[[], bool] = lambda: False,
           status: Callable[[str], None] = lambda text: None) -> Gathered:
    """Rank 0: collect the other ranks' reports until all are in, ``deadline`` (monotonic)
    passes or ``stopped()``; what could not be read is named, never raised."""
    out = Gathered({0: Source(own, "")}, {}, {0: time.time()}, {})
    count = 0
    while True:
        status(f"gathered {len(out.sources) + len(out.bad)}/{world} ranks")
        total = int(store.add("arrived_n", 0))
        if total != count:
            count = total
            arrived = _arrivals(store, world)
            new = sorted(r for r in arrived if r not in out.sources and r not in out.bad)
            for batch in _batches(new):
                values = store.multi_get([f"report/{r}" for r in batch])
                now = time.time()
                for r, raw in zip(batch, values, strict=True):
                    out.seen[r], out.published[r] = now, arrived[r]
                    try:
                        out.sources[r] = Source(Report.from_text(bytes(raw)), "")
                    except ReportError as exc:
                        out.bad[r] = str(exc)
        if len(out.sources) + len(out.bad) >= world or time.monotonic() >= deadline or stopped():
            return out
        time.sleep(POLL_S)


def run_cluster(
    options: Options, progress: Progress | None = None,
    on_merged: Callable[[Sequence[Source], Report, Sequence[int]], None] | None = None,
) -> tuple[Report | None, int]:
    """Run on every rank; rank 0 returns the merged report (and hands it to ``on_merged``).
    ``progress`` (rank 0, text output): status lines only; the merged report prints at the end."""
    rank, world, addr, port = where()
    stop: list[int] = []
    previous = None
    if rank == 0:  # from now on a SIGTERM ends the wait, not the process
        previous = signal.signal(signal.SIGTERM, lambda signum, frame: stop.append(signum))
    try:
        return _run_cluster(options, rank, world, addr, port, stop, progress, on_merged)
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


MISSING_WHEN_STOPPED = "they had not reported when the launcher stopped the job"


def launcher() -> str:
    """Who started this rank, for the stop's wording: srun (a Slurm step, no torchrun agent) or torchrun."""
    if os.environ.get("SLURM_STEP_ID") is not None and not os.environ.get("TORCHELASTIC_RUN_ID"):
        return "srun"
    return "torchrun"


# Why the launcher stops rank 0, and where to find the task that failed first.
STOP_WHY = {
    "torchrun": ("torchrun: when a rank dies",
                 "find the rank that failed first in the launcher's log (torchrun names it and its exit "
                 "code) and read its output; --max-restarts 0 keeps torchrun from starting the job again"),
    "srun": ("srun: when a task exits non-zero under --kill-on-bad-exit, or at the job's time limit",
             "find the task that failed first in srun's output (\"srun: error: NODE: task N: Exited with "
             "exit code C\") and read its output; \"CANCELLED ... DUE TO TIME LIMIT\" there means the "
             "time limit stopped it: raise --time"),
}


def mark_stopped(consistency: CheckResult, waited_s: float, reports: int, world: int,
                 by: str = "torchrun") -> None:
    """``consistency`` of a gather that a SIGTERM ended: the stop first, in the message (JSON)
    and in the problems the text lists, and missing ranks not blamed on their start-up.
    ``by``: the launcher ("torchrun" or "srun"), whose words the stop and its fix use."""
    why, remedy = STOP_WHY.get(by, STOP_WHY["torchrun"])
    stopped = f"stopped (SIGTERM) after {waited_s:.1f}s of waiting, with {reports} of {count(world, 'report')}"
    consistency.status = Status.FAIL
    consistency.message = f"{stopped}; {consistency.message}"
    consistency.details["stopped_by"] = "SIGTERM"
    consistency.details["launcher"] = by
    problems = consistency.details.setdefault("problems", [])
    for p in problems:
        if "did not report" in str(p.get("message")):
            p["remedy"] = MISSING_WHEN_STOPPED
    problems.insert(0, {
        "status": Status.FAIL.value,
        "message": f"{stopped}: the launcher stops every rank when one fails ({why})",
        "remedy": remedy,
    })
    consistency.remedy = "; ".join(dict.fromkeys(str(p["remedy"]) for p in problems if p.get("remedy")))


def _run_cluster(options: Options, rank: int, world: int, addr: str, port: int, stop: list[int],
                 progress: Progress | None,
                 on_merged: Callable[[Sequence[Source], Report, Sequence[int]], None] | None,
                 ) -> tuple[Report | None, int]:
    status = progress.status if progress is not None and rank == 0 else (lambda text: None)
    local_opts = replace(options, level="local")
    status("local checks...")
    report, _ = run_checks(local_opts)
    report.level = "cluster"
    report.rank = rank
    started = time.monotonic()
    try:
        store = job_store(addr, port, rank, world, options.timeout)
        publish(store, rank, report)
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
    poll_start = time.time()
    got = gather(store, world, report, started + options.timeout, lambda: bool(stop), status)
    if progress is not None:
        progress.done()
    gather_ms = round((time.monotonic() - started) * 1000, 1)
    merged = merge_reports([got.sources[r] for r in sorted(got.sources)], level="cluster",
                           expected_ranks=[r for r in range(world) if r not in got.bad],
                           timeout=None if stop else options.timeout, host=report.host, rank=0)
    consistency = merged.checks[-1]
    consistency.details["gather_ms"] = gather_ms
    # From a rank's publish (or rank 0 starting to wait, if later) to rank 0 holding its
    # report: what the store and the polling cost, without the ranks' start-up skew.
    latency = [got.seen[r] - max(when, poll_start) for r, when in got.published.items()]
    consistency.details["max_latency_ms"] = round(max(latency, default=0.0) * 1000, 1)
    consistency.details["world_size"] = world
    if got.bad:
        consistency.status = Status.FAIL
        consistency.message += "; unreadable reports from " + ", ".join(
            f"rank {r} ({e})" for r, e in sorted(got.bad.items()))
    if stop:
        mark_stopped(consistency, gather_ms / 1000, len(got.sources), world, launcher())
    try:
        store.set("done", "1")
    except Exception:  # the launcher may be tearing the store down
        pass
    if on_merged is not None:
        on_merged([got.sources[r] for r in sorted(got.sources)], merged,
                  [r for r in range(world) if r not in got.bad])
    return merged, 1 if stop else merged.exit_code(options.strict)
