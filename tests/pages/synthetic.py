"""Synthetic flight-recorder dumps and reports, and doctor fleets, at scale: for the pages' tests
and benchmarks/bench_pages.py.

Real 2.10-format pickle dumps as torch writes them (one ``<prefix><rank>`` file per rank), of a
job where one rank never entered the last collective; and the same job as an ``ncclx.fr/1``
report with ``per_rank`` filled in as docs/flight-recorder.md specifies (5 entries, 4 frames).
A doctor fleet is one real ``ncclx.doctor/1`` report cloned to every rank with two odd ones out.
"""

from __future__ import annotations

import copy
import pickle
from pathlib import Path
from typing import Any

PREFIX = "fr_trace_"
OPS = ("all_reduce", "all_gather", "reduce_scatter", "broadcast")


def _frames(seq: int) -> list[dict[str, Any]]:
    return [
        {"name": "all_reduce", "filename": "/opt/torch/distributed/distributed_c10d.py", "line": 2950},
        {"name": f"_step_{seq % 4}", "filename": "/job/train.py", "line": 40 + seq % 4},
        {"name": "train_epoch", "filename": "/job/train.py", "line": 88},
        {"name": "main", "filename": "/job/train.py", "line": 120},
    ]


def _entry(seq: int, state: str, dtype: str = "Float") -> dict[str, Any]:
    return {
        "record_id": seq - 1,
        "pg_id": 0,
        "process_group": ("0", "default_pg"),
        "collective_seq_id": seq,
        "p2p_seq_id": 0,
        "op_id": seq,
        "profiling_name": f"nccl:{OPS[seq % len(OPS)]}",
        "time_created_ns": 1_700_000_000_000_000_000 + seq * 1_000_000,
        "duration_ms": 0.5 if state == "completed" else None,
        "input_sizes": [[1024, 4096]],
        "input_dtypes": [dtype],
        "output_sizes": [[1024, 4096]],
        "output_dtypes": [dtype],
        "state": state,
        "retired": state == "completed",
        "timeout_ms": 600_000,
        "is_p2p": False,
        "frames": _frames(seq),
    }


def write_dumps(folder: Path, world: int, culprit: int, entries: int = 6,
                dtype_culprit: int | None = None) -> Path:
    """``world`` ranks ran ``entries - 1`` collectives; all but ``culprit`` entered the next one.

    With ``dtype_culprit``, that rank passed Half where the others passed Float at every seq.
    """
    folder.mkdir(parents=True, exist_ok=True)
    config = {"0": {"name": "0", "desc": "default_pg", "ranks": str(list(range(world)))}}
    for rank in range(world):
        last = entries - 1 if rank == culprit else entries
        rows = []
        for seq in range(1, last + 1):
            state = "completed" if seq < entries else "started"
            rows.append(_entry(seq, state, "Half" if rank == dtype_culprit else "Float"))
        done = min(last, entries - 1)
        dump = {
            "version": "2.10",
            "comm_lib_version": "2.27.7",
            "pg_config": config,
            "pg_status": {"0": {"last_enqueued_collective": last, "last_started_collective": last,
                                "last_completed_collective": done}},
            "entries": rows,
        }
        (folder / f"{PREFIX}{rank}").write_bytes(pickle.dumps(dump))
    return folder


def _contract_entry(seq: int, state: str) -> dict[str, Any]:
    e = _entry(seq, state)
    return {"seq": seq, "op": e["profiling_name"].split(":")[1], "state": state, "retired": e["retired"],
            "input_sizes": e["input_sizes"], "input_dtypes": e["input_dtypes"],
            "output_sizes": e["output_sizes"], "output_dtypes": e["output_dtypes"], "frames": e["frames"]}


def report(world: int, culprit: int, entries: int = 2000, no_dump: tuple[int, ...] = (),
           unique_frames: bool = False) -> dict[str, Any]:
    """The ``ncclx.fr/1`` report of :func:`write_dumps`'s job, with ``per_rank`` (5 entries each).

    ``unique_frames``: every rank's frames name a file of its own (nothing shared: the largest page).
    """
    ranks = list(range(world))
    per_rank: dict[str, Any] = {}
    dumped = [r for r in ranks if r not in no_dump]
    for r in ranks:
        if r in no_dump:
            per_rank[str(r)] = {"state": "no-dump", "last_enqueued": None, "last_completed": None,
                                "last_entries": []}
            continue
        last = entries - 1 if r == culprit else entries
        state = "never-entered" if r == culprit else "started"
        rows = [_contract_entry(s, "completed" if s < entries else state) for s in range(last - 4, last + 1)]
        if unique_frames:
            for e in rows:
                e["frames"] = [{**f, "filename": f"/job/rank{r:05d}/{f['filename']}"} for f in e["frames"]]
        per_rank[str(r)] = {"state": state, "last_enqueued": last, "last_completed": min(last, entries - 1),
                            "last_entries": rows}
    entered = [r for r in dumped if r != culprit]
    group = {
        "group": "default_pg", "pg_name": "0", "recorder": "nccl2", "ranks": ranks,
        "first_incomplete": {"seq": entries, "op": OPS[entries % len(OPS)], "why": "never-entered",
                             "missing_ranks": [culprit], "entered_ranks": entered,
                             "no_dump_ranks": list(no_dump)},
        "mismatches": [], "culprit_ranks": [culprit],
        "last_completed": {str(r): per_rank[str(r)]["last_completed"] for r in dumped},
        "missing_dumps": list(no_dump), "per_rank": per_rank,
    }
    return {
        "schema": "ncclx.fr/1", "folder": "/scratch/job-4242/dumps", "prefix": PREFIX,
        "dumps": [{"rank": r, "recorder": "nccl2", "path": f"/scratch/job-4242/dumps/{PREFIX}{r}",
                   "version": "2.10", "format": "pickle"} for r in dumped],
        "repairs": [], "groups": [group], "missing_dumps": list(no_dump), "problem": True,
    }


def doctor_fleet(base: dict[str, Any], ranks: int, per_host: int = 8) -> list[dict[str, Any]]:
    """``base`` (a ``doctor --json`` report) as every rank of a job would save it, ``per_host``
    ranks per host: host 5 loads an old NCCL and rank 77 carries a deprecated variable."""
    fleet = []
    for rank in range(ranks):
        report = copy.deepcopy(base)
        report["rank"], report["host"] = rank, f"node-{rank // per_host:03d}"
        for c in report["checks"]:
            if c["id"] == "nccl-version" and rank // per_host == 5:
                c.update(status="fail", message="loaded NCCL 2.28.3 (built against 2.30.7): below the 2.29 floor",
                         remedy="load NCCL >= 2.29")
                c["details"]["runtime"] = "2.28.3"
            if c["id"] == "env-vars" and rank == 77:
                c.update(status="warn", message="TORCH_NCCL_BLOCKING_WAIT=1 is deprecated", remedy="unset it")
        fleet.append(report)
    return fleet
