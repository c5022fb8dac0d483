"""``ncclx compare --cluster``: one rank per torchrun/srun task, rank 0 writes the report.

Like ``doctor --level cluster``: every task runs this command; the arms' ranks meet on the
job's own TCPStore at MASTER_ADDR:MASTER_PORT (torchrun's agent hosts it; under srun this
command on rank 0 does), under their own key prefix.  Both arms' ranks are alive on every task
and take part in every round.  At the end every task posts its rank's records there, and rank
0 gathers them, naming the ranks whose report never came.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .._doctor._cluster import job_prefix, job_store
from ._run import NO_REPORT, ArmRun, Placement, RankOut, Settings, parse_rank, rank_files, run_arms
from ._spec import Arm

__all__ = ["run_job_arms"]

PREFIX = "ncclx-compare"
GRACE_S = 10.0  # how long rank 0 waits past an arm's deadline for the other tasks' reports
BATCH = 1024


def _gather(store: Any, label: str, world: int, until: float) -> dict[int, dict[str, Any]]:
    while time.monotonic() < until and int(store.add(f"{label}/posted", 0)) < world:
        time.sleep(0.2)
    got: dict[int, dict[str, Any]] = {}
    for lo in range(0, world, BATCH):
        keys = [f"{label}/report/{r}" for r in range(lo, min(world, lo + BATCH))]
        present = [k for k in keys if store.check([k])]
        for key, raw in zip(present, store.multi_get(present) if present else [], strict=True):
            try:
                got[int(key.rsplit("/", 1)[1])] = json.loads(bytes(raw))
            except ValueError:
                continue
    return got


def run_job_arms(arms: list[Arm], s: Settings, end: float, workdir: Path, base_env: dict[str, str],
                 progress: Callable[[str], None], rank: int, local_rank: int, addr: str, port: int,
                 confirm: Callable[[list[ArmRun]], list[int]] | None = None) -> list[ArmRun] | None:
    """Run both arms as rank ``rank``, interleaved as on one node: every task follows the same
    schedule, so arm A's block k meets on every task before arm B's.  Which cases to measure
    again is rank 0's call (from its own rank's records), posted on the store for the others,
    so that every task runs the same extra rounds.  Rank 0 returns every rank's results."""
    store = job_store(addr, port, rank, s.world, s.timeout, prefix=PREFIX)
    where = Placement([rank], [local_rank], addr, port, False, job_prefix(PREFIX))

    def agreed(runs: list[ArmRun]) -> list[int]:
        try:
            if rank == 0:
                store.set("confirm", json.dumps(confirm(runs) if confirm else []))
            return [int(i) for i in json.loads(bytes(store.get("confirm")))]
        except Exception:  # rank 0 never posted (its arm stopped): no extra rounds here either
            return []

    local = run_arms(arms, s, end, workdir, base_env, progress, where, agreed)
    runs = []
    for arm, run in zip(arms, local, strict=True):
        records, stage = rank_files(workdir / arm.label, rank)
        store.set(f"{arm.label}/report/{rank}", json.dumps({"records": records, "stage": stage,
                                                            "killed": run.killed}))
        store.add(f"{arm.label}/posted", 1)
        if rank != 0:
            continue
        progress(f"arm {arm.label}: gathering the ranks' reports...")
        got = _gather(store, arm.label, s.world, max(end, time.monotonic()) + GRACE_S)
        ranks: dict[int, RankOut] = {}
        for r in range(s.world):
            ranks[r] = parse_rank(got[r]["records"], got[r]["stage"]) if r in got else RankOut(stage=NO_REPORT)
        killed = run.killed or any(bool(g.get("killed")) for g in got.values())
        runs.append(ArmRun(arm, ranks, run.seconds, killed, run.log, run.fr, run.startup))
    return runs if rank == 0 else None
