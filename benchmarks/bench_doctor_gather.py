"""The doctor's cluster gather at scale: rank 0 collecting 1,000 to 16,000 reports from one TCPStore.

    python benchmarks/bench_doctor_gather.py [--ranks 1000,4000,16000] [--posters 4]

For each rank count, a fresh rank-0 process hosts the TCPStore (as under srun) and
``--posters`` processes post a real ``ncclx doctor --level local --json`` report for every
other rank under the job's key prefix, exactly as ``ncclx_migrate._doctor._cluster.publish``
does.  Once all are posted, rank 0 runs, in the same process and on the same keys:

* ``gather``: the shipped loop (arrival counter, arrival list, ``multi_get`` in batches);
* ``per-rank``: the loop it replaced (``check`` then ``get`` for every waiting rank);
* ``merge``: ``merge_reports`` over every report (what rank 0 then prints).

Prints a markdown table for docs/performance.md with both gather times and their ratio,
the merge time, and rank 0's peak RSS (it also holds the store's copy of every report).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import socket
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

PY = sys.executable
NCCLX = str(Path(PY).parent / "ncclx") if (Path(PY).parent / "ncclx").exists() else shutil.which("ncclx") or "ncclx"
PREFIX = "ncclx-doctor/bench/0"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _store(port: int, world: int, master: bool) -> Any:
    import torch.distributed as dist

    store = dist.TCPStore("127.0.0.1", port, world, is_master=master, timeout=timedelta(seconds=600),
                          wait_for_workers=False)
    return dist.PrefixStore(PREFIX, store)


def _post(port: int, world: int, first: int, last: int, template: str) -> None:
    """A poster: ranks first..last-1 publish their report (and the keys the old loop read)."""
    store = _store(port, world, False)
    doc = json.loads(template)
    for rank in range(first, last):
        doc["rank"] = rank
        doc["host"] = f"node-{rank // 8:05}"
        store.set(f"report/{rank}", json.dumps(doc))
        store.append("arrived", f"{rank}:{time.time()!r},")
        store.add("arrived_n", 1)
        store.set(f"published/{rank}", repr(time.time()))


def _per_rank_gather(store: Any, world: int) -> int:
    """The loop before: for every waiting rank, one check and one get per poll."""
    from ncclx_migrate._doctor._model import Report

    got: dict[int, Report] = {}
    while len(got) < world - 1:
        for r in range(1, world):
            if r in got or not store.check([f"report/{r}"]):
                continue
            got[r] = Report.from_json(json.loads(store.get(f"report/{r}")))
            store.get(f"published/{r}")
    return len(got)


def _rank0(port: int, world: int, posters: int, template: str) -> dict[str, float]:
    from ncclx_migrate._doctor._cluster import gather
    from ncclx_migrate._doctor._merge import merge_reports
    from ncclx_migrate._doctor._model import Report

    store = _store(port, world, True)
    own = Report.from_json(json.loads(template))
    own.rank = 0
    start = time.perf_counter()
    step = -(-(world - 1) // posters)
    procs = [subprocess.Popen([PY, __file__, "--post", str(port), str(world), str(lo), str(min(lo + step, world))],
                              stdin=subprocess.PIPE, text=True)
             for lo in range(1, world, step)]
    for p in procs:
        assert p.stdin is not None
        p.stdin.write(template)
        p.stdin.close()
    for p in procs:
        p.wait()
    posted = time.perf_counter() - start
    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t0 = time.perf_counter()
    got = gather(store, world, own, time.monotonic() + 600)
    t_gather = time.perf_counter() - t0
    assert len(got.sources) == world and not got.bad, (len(got.sources), got.bad)
    t0 = time.perf_counter()
    merged = merge_reports([got.sources[r] for r in sorted(got.sources)], level="cluster",
                           expected_ranks=range(world), timeout=60, host="node-00000", rank=0)
    t_merge = time.perf_counter() - t0
    assert merged.checks[-1].details["reports"] == world
    rss1 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    del got, merged
    t0 = time.perf_counter()
    assert _per_rank_gather(store, world) == world - 1
    t_old = time.perf_counter() - t0
    return {"posted_s": posted, "gather_s": t_gather, "per_rank_s": t_old, "merge_s": t_merge,
            "rss_store_mb": rss0 / 1024, "rss_peak_mb": rss1 / 1024,
            "report_bytes": len(template)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--ranks", default="1000,4000,16000")
    ap.add_argument("--posters", type=int, default=4)
    ap.add_argument("--post", nargs=4, type=int, metavar=("PORT", "WORLD", "FIRST", "LAST"), help=argparse.SUPPRESS)
    ap.add_argument("--rank0", nargs=3, type=int, metavar=("PORT", "WORLD", "POSTERS"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.post:
        _post(*args.post, template=sys.stdin.read())
        return
    if args.rank0:
        print(json.dumps(_rank0(*args.rank0, template=sys.stdin.read())))
        return
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TORCH_", "NCCL", "NCCLX_"))}
    template = subprocess.run([NCCLX, "doctor", "--level", "local", "--json"], capture_output=True, text=True,
                              env=env, check=False).stdout
    json.loads(template)
    print(f"report size {len(template)} bytes; {args.posters} poster processes; one run, same machine\n")
    print("| ranks | post all (s) | gather, batched (s) | gather, per-rank (s) | per-rank / batched "
          "| merge_reports (s) | rank 0 RSS before gather (MB) | rank 0 peak RSS (MB) |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|")
    for world in (int(n) for n in args.ranks.split(",")):
        out = subprocess.run([PY, __file__, "--rank0", str(_free_port()), str(world), str(args.posters)],
                             input=template, capture_output=True, text=True, env=env, check=True, timeout=3600)
        r = json.loads(out.stdout.strip().splitlines()[-1])
        print(f"| {world:,} | {r['posted_s']:.2f} | {r['gather_s']:.2f} | {r['per_rank_s']:.2f} "
              f"| {r['per_rank_s'] / r['gather_s']:.1f}x | {r['merge_s']:.2f} | {r['rss_store_mb']:.0f} "
              f"| {r['rss_peak_mb']:.0f} |",
              flush=True)


if __name__ == "__main__":
    main()
