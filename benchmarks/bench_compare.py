"""How long `ncclx compare`'s default sweep takes on gloo (CPU), with 2 and 4 ranks.

    python benchmarks/bench_compare.py [--ranks 2,4]

Runs the real CLI, `ncclx compare --arm gloo --arm gloo --nproc N --format json`, with the
default sweep on CPU (8 B doubling to 1 MiB, 7 collectives x 3 dtypes, 5 warm-up and 20
timed iterations) and prints a markdown table for docs/performance.md: the whole command's
wall time, each arm's time (its torch start-up included), the cases, the command's CPU
time with its processes, and the ratio of one arm to a bare `python -c "import torch"`
measured in the same run (the floor of any arm: every arm starts one interpreter).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
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


def _children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--ranks", default="2,4")
    args = ap.parse_args()
    starts = []
    for _ in range(3):
        t = time.perf_counter()
        subprocess.run([PY, "-c", "import torch, torch.distributed"], env=_env(), check=True)
        starts.append(time.perf_counter() - t)
    floor = statistics.median(starts)
    print(f"`import torch, torch.distributed` (median of 3): {floor:.1f} s\n")
    print("| ranks | cases per arm | whole command | arm A | arm B | CPU (all processes) | arm / torch start-up |")
    print("|---|---|---|---|---|---|---|")
    for n in (int(x) for x in args.ranks.split(",") if x):
        cpu0, t = _children_cpu(), time.perf_counter()
        proc = subprocess.run([NCCLX, "compare", "--arm", "gloo", "--arm", "gloo", "--nproc", str(n), "--threshold",
                               "10000", "--format", "json", "--timeout", "3600"], capture_output=True, text=True,
                              env=_env(), timeout=3700)
        wall, cpu = time.perf_counter() - t, _children_cpu() - cpu0
        report = json.loads(proc.stdout)
        cases = sum(1 for row in report["rows"] if "skip" not in row)
        a, b = (arm["seconds"] for arm in report["arms"])
        print(f"| {n} | {cases} | {wall:.1f} s | {a:.1f} s | {b:.1f} s | {cpu:.1f} s | {max(a, b) / floor:.1f}x |")
        assert proc.returncode == 0, report["verdict"]


if __name__ == "__main__":
    main()
