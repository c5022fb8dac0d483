"""One gloo rank of a hang scenario; run as a script (under either torch venv).

    python worker.py RANK WORLD PORT SCENARIO CULPRIT DUMPMODE

(tests/fr/scenarios.py runs it so for every rank, as forks of one interpreter that imported
torch: tests/forked.py.)

SCENARIO: ok | skip (CULPRIT never enters all_reduce #3) | exit (CULPRIT exits
before #3) | type (CULPRIT calls broadcast as collective #3) | subgroup (#3 on a
subgroup of ranks 1..world-1, CULPRIT skips it) | barrier (#3 is a barrier, CULPRIT skips it).
DUMPMODE: none (torch alone) | manual (each rank calls torch's dump API itself,
as torch writes it; manual-json: the JSON dump) | watchdog (ncclx_migrate.enable_hang_dump)
| env (only `import ncclx_migrate`, with NCCLX_HANG_DUMP set by the caller).
Env: GLOO_TIMEOUT (s, default 4), SKIP_SLEEP (s the culprit stays out, default GLOO_TIMEOUT+2), HANG_DUMP (s, default 1.5), HANG_DUMP_STACKS (0/1:
watchdog dumps with stack traces; torch's first one imports torch._inductor, seconds
of CPU per rank), TORCH_FR_DUMP_TEMP_FILE.
"""

from __future__ import annotations

import os
import sys
import time
from datetime import timedelta


def _manual_dump(rank: int, fmt: str) -> None:
    import torch._C._distributed_c10d as c10d

    prefix = os.environ["TORCH_FR_DUMP_TEMP_FILE"]
    # No stack traces: torch's first stack-traced dump imports torch._inductor (seconds of
    # CPU per rank on a busy 2-core box); the verdicts do not need them.
    if fmt == "json":
        data = c10d._dump_fr_trace_json(True, False)
    else:
        data = c10d._dump_fr_trace(True, False, False)
    with open(f"{prefix}{rank}", "wb") as f:  # 2.13 has no _dump_fr_trace_file
        f.write(data)


def _collective_3(rank: int, world: int, scenario: str, is_culprit: bool, sub: object, wait: float) -> None:
    import torch
    import torch.distributed as dist

    if is_culprit and scenario == "type":
        dist.broadcast(torch.ones(4, 5), src=0)
    elif scenario == "barrier":
        dist.barrier()
    elif scenario == "subgroup":
        if rank >= 1:
            dist.all_reduce(torch.ones(4, 5), group=sub)
        else:
            time.sleep(wait)
    else:
        dist.all_reduce(torch.ones(4, 5))
    print(f"[rank {rank}] collective #3 completed", flush=True)


def main() -> None:
    rank, world, port = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    scenario, culprit, mode = sys.argv[4], int(sys.argv[5]), sys.argv[6]
    gloo_timeout = float(os.environ.get("GLOO_TIMEOUT", "4"))
    stay_out = float(os.environ.get("SKIP_SLEEP", str(gloo_timeout + 2)))
    import torch
    import torch.distributed as dist

    if mode == "env":
        import ncclx_migrate  # NCCLX_HANG_DUMP in the environment starts the watchdog
    if mode == "watchdog":
        import ncclx_migrate

        ncclx_migrate.enable_hang_dump(
            float(os.environ.get("HANG_DUMP", "1.5")),
            stack_traces=os.environ.get("HANG_DUMP_STACKS", "0") == "1",
        )
    dist.init_process_group(
        "gloo",
        init_method=f"tcp://127.0.0.1:{port}",
        rank=rank,
        world_size=world,
        timeout=timedelta(seconds=gloo_timeout),
    )
    sub = dist.new_group(list(range(1, world)), group_desc="tail") if scenario == "subgroup" else None
    for _ in range(2):
        dist.all_reduce(torch.ones(3, 4))
    is_culprit = rank == culprit and scenario != "ok"
    if is_culprit and scenario == "exit":
        print(f"[rank {rank}] exiting before collective #3", flush=True)
        os._exit(0)
    if is_culprit and scenario in ("skip", "subgroup", "barrier"):
        print(f"[rank {rank}] skipping collective #3", flush=True)
        time.sleep(stay_out)
    elif mode in ("watchdog", "env"):
        # A training script does not catch this: the exception ends the rank.
        _collective_3(rank, world, scenario, is_culprit, sub, stay_out)
        if scenario == "ok":
            time.sleep(stay_out)  # a healthy rank idles: the watchdog must stay quiet
    else:
        try:
            _collective_3(rank, world, scenario, is_culprit, sub, stay_out)
        except RuntimeError as exc:
            print(f"[rank {rank}] collective #3 raised: {str(exc).splitlines()[0][:120]}", flush=True)
    if mode in ("manual", "manual-json"):
        time.sleep(0.5)  # gloo retires an op on its own thread just after wait() returns
        _manual_dump(rank, "json" if mode == "manual-json" else "pickle")
    sys.stdout.flush()
    os._exit(0)  # skip gloo's teardown after a failed collective


if __name__ == "__main__":
    main()
