"""How long `ncclx doctor` takes, against `python -m torch.utils.collect_env` in the same run.

    python benchmarks/bench_doctor.py [--repeat 5] [--ranks 2,4,8,16]

Prints a markdown table for docs/performance.md:
* static and local wall time (median of --repeat runs of the real CLI in a subprocess),
  and their ratio to collect_env's wall time (median of the same count); the static
  compiled-extensions check alone (it reads every shared object on sys.path);
* the cluster gather under torchrun on loopback for each rank count: the whole torchrun
  wall time, rank 0's wait for every report (gather_ms: mostly the other ranks' start-up
  skew) and the largest publish-to-received latency (max_latency_ms: the store's cost).
Target: static < 0.5 s, and at least 5x faster than collect_env. ``--ranks ""`` skips the
cluster runs.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

PY = sys.executable
NCCLX = str(Path(PY).parent / "ncclx") if (Path(PY).parent / "ncclx").exists() else shutil.which("ncclx") or "ncclx"


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TORCH_", "NCCL", "NCCLX_"))}
    env["NO_COLOR"] = "1"
    return env


def _wall(cmd: list[str], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        subprocess.run(cmd, capture_output=True, env=_env(), check=False, timeout=600)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _cluster(ranks: int) -> tuple[float, float, float, str]:
    cmd = [PY, "-m", "torch.distributed.run", "--nproc-per-node", str(ranks), "--master-addr", "127.0.0.1",
           "--master-port", str(_free_port()), "-m", "ncclx_migrate", "doctor", "--level", "cluster", "--json",
           "--timeout", "600"]
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=_env(), timeout=1200)
    wall = time.perf_counter() - start
    report = json.loads(proc.stdout)
    cc = next(c for c in report["checks"] if c["id"] == "cluster-consistency")
    return wall, cc["details"]["gather_ms"], cc["details"]["max_latency_ms"], cc["status"]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--ranks", default="2,4,8,16")
    args = ap.parse_args()
    static = _wall([NCCLX, "doctor", "--level", "static", "--json"], args.repeat)
    extensions_cmd = [NCCLX, "doctor", "--level", "static", "--check", "compiled-extensions"]
    extensions = _wall([*extensions_cmd, "--json"], args.repeat)
    local = _wall([NCCLX, "doctor", "--json"], args.repeat)
    collect = _wall([PY, "-m", "torch.utils.collect_env"], args.repeat)
    report = json.loads(subprocess.run([*extensions_cmd, "--json"], capture_output=True, text=True,
                                       env=_env(), check=False).stdout)
    read = report["checks"][0]["details"]["shared_objects"]
    print(f"median of {args.repeat} runs each, {os.cpu_count()} CPUs\n")
    print("| command | wall time | vs collect_env |")
    print("|---|---|---|")
    for name, t in (("ncclx doctor --level static", static),
                    (f"ncclx doctor --level static --check compiled-extensions ({read} shared objects)", extensions),
                    ("ncclx doctor (local)", local), ("python -m torch.utils.collect_env", collect)):
        print(f"| `{name}` | {t:.3f} s | {t / collect:.2f}x |")
    print(f"\nstatic target < 0.5 s: {'met' if static < 0.5 else 'MISSED'}; "
          f"collect_env / static = {collect / static:.1f}x (target >= 5x: {'met' if collect >= 5 * static else 'MISSED'})\n")
    ranks = [int(x) for x in args.ranks.split(",") if x.strip()]
    if not ranks:
        return
    print("| ranks (torchrun, loopback, gloo/CPU) | torchrun wall | gather_ms (rank 0 waits) | max publish-to-received | consistency |")
    print("|---|---|---|---|---|")
    for n in ranks:
        wall, gather, latency, status = _cluster(n)
        print(f"| {n} | {wall:.1f} s | {gather:.0f} ms | {latency:.1f} ms | {status} |")


if __name__ == "__main__":
    main()
