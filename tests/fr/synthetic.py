"""Synthetic torch 2.10-format flight-recorder dumps of a hung job (for tests and benchmarks).

``write_job(folder, world=64, entries=2000, culprit=5, fmt="pickle")`` writes
``fr_trace_<rank>`` for every rank: each ring buffer holds the last ``entries``
collectives of the default group (all retired), then every rank but ``culprit``
enqueued one more all_reduce that never completes; the culprit's window ends one
collective earlier.  Shapes, keys and types are what torch 2.15's gloo recorder
writes (docs/torch-versions.md, "Flight recorder per backend"), with pg_config already named
(as the ncclx watchdog writes it), so torchfrtrace reads the folder as is.
"""

from __future__ import annotations

import json
import pickle
from pathlib import Path

PREFIX = "fr_trace_"
_SHAPES = [([[1024, 1024]], "all_reduce"), ([[4096]], "all_reduce"), ([[256, 8]], "broadcast")]


def rank_dump(rank: int, world: int, entries: int, culprit: int, *, total: int | None = None,
              fmt: str = "pickle", stacks: bool = False) -> dict[str, object]:
    total = total or entries + 100  # the ring buffer dropped the first 100 collectives
    last = total - 1 if rank == culprit else total  # the culprit never enqueued #total
    first = max(1, last - entries + 1)
    frames = [
        {"name": "train_step", "filename": "/job/train.py", "line": 120},
        {"name": "all_reduce", "filename": "/venv/torch/distributed/distributed_c10d.py", "line": 2950},
    ] if stacks else []
    out: list[dict[str, object]] = []
    pg = ("0", "default_pg")
    for i, seq in enumerate(range(first, last + 1)):
        sizes, op = _SHAPES[seq % len(_SHAPES)]
        done = seq < total
        out.append({
            "record_id": seq - 1,
            "pg_id": 0,
            "process_group": list(pg) if fmt == "json" else pg,
            "thread_id": "140000000000",
            "thread_name": "MainThread",
            "collective_seq_id": seq,
            "p2p_seq_id": 0,
            "op_id": seq,
            "profiling_name": f"gloo:{op}",
            "time_created_ns": 1_700_000_000_000_000_000 + seq * 1000 + i,
            "input_sizes": sizes,
            "input_dtypes": ["Float"],
            "output_sizes": sizes,
            "output_dtypes": ["Float"],
            "state": "completed" if done else "scheduled",
            "time_discovered_started_ns": None if fmt == "pickle" else 0,
            "time_discovered_completed_ns": None if fmt == "pickle" else 0,
            "retired": done,
            "timeout_ms": 600000,
            "is_p2p": False,
            "frames": frames,
        })
    ranks = str(list(range(world)))
    status = {"last_enqueued_collective": last, "last_started_collective": last,
              "last_completed_collective": total - 1}
    dump: dict[str, object] = {
        "version": "2.10",
        "comm_lib_version": "gloo",
        "pg_config": {"0": {"name": "0", "desc": "default_pg", "ranks": ranks}},
        "pg_status": {"0": {k: str(v) for k, v in status.items()} if fmt == "json" else status},
        "entries": out,
    }
    if fmt == "json":
        dump["nccl_comm_state"] = {}
    return dump


def write_job(folder: Path, *, world: int = 64, entries: int = 2000, culprit: int = 5,
              fmt: str = "pickle", stacks: bool = False) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for r in range(world):
        d = rank_dump(r, world, entries, culprit, fmt=fmt, stacks=stacks)
        data = json.dumps(d).encode() if fmt == "json" else pickle.dumps(d, protocol=pickle.HIGHEST_PROTOCOL)
        (folder / f"{PREFIX}{r}").write_bytes(data)
    return folder
