"""One-rank GPU probe of the recorders (run by test_gpu_recorders.py on a CUDA machine).

    python gpu_probe.py BACKEND PORT     -> one JSON line on stdout
"""

from __future__ import annotations

import json
import sys
import time
from datetime import timedelta


def main() -> None:
    backend, port = sys.argv[1], int(sys.argv[2])
    import torch
    import torch.distributed as dist

    from ncclx_migrate._fr import _dump

    torch.cuda.set_device(0)
    store = dist.TCPStore("127.0.0.1", port, 1, is_master=True, timeout=timedelta(seconds=30))
    dist.init_process_group(backend, store=store, rank=0, world_size=1, timeout=timedelta(seconds=30))
    pg = dist.group.WORLD
    names = {}
    for dev in pg._device_types:
        try:
            be = pg._get_backend(dev)
            names[str(dev)] = [type(be).__name__, str(be.name())]
        except Exception as exc:  # no backend for this device
            names[str(dev)] = [type(exc).__name__, ""]
    for _ in range(3):
        dist.all_reduce(torch.ones(8, device="cuda"))
    if backend.startswith("cpu:"):
        dist.all_reduce(torch.ones(4))
    torch.cuda.synchronize()
    time.sleep(1.0)  # completion is recorded on the backend's own thread
    dumps = _dump.dump_flight_recorder(stack_traces=False)
    out = {
        "torch": torch.__version__,
        "backends": names,
        "recorders_in_use": _dump.recorders_in_use(),
        "entries": {
            rec: [[e["profiling_name"], e["collective_seq_id"], e["state"], bool(e["retired"])] for e in d["entries"]]
            for rec, d in dumps.items()
        },
        "pg_config": {rec: d["pg_config"] for rec, d in dumps.items()},
        "files": sorted(p.name for p in _dump.write_rank_dumps(0, stack_traces=True, meta={"world_size": 1})),
    }
    print(json.dumps(out), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
