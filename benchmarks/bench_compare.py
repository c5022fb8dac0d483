"""`ncclx compare` on gloo (CPU): how long the default sweep takes, and how its timing
verdict holds up beside a busy neighbour.

    python benchmarks/bench_compare.py [--ranks 2,4]          # the default sweep's time
    python benchmarks/bench_compare.py --noise [--aa 20] [--slowed 10]

``--noise``: a process burning one CPU for the whole run (a neighbour on a shared node), then
(1) ``--aa`` A/A runs, gloo against gloo, 2 sizes x 3 collectives (6 cases): how many runs name
any regression or improvement (the false-alarm rate; the target is at most 1 in 20); (2)
``--slowed`` runs each with arm B's all_reduce_sum really 1.25x and 2x as slow (the test
backend of tests/compare/plugin on both arms spins on the CPU in proportion to each call):
in how many runs, and in how many of its cases, the slowdown is named, and whether anything
is ever named as an improvement.  Prints markdown for docs/performance.md.

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
from typing import Any

PY = sys.executable
NCCLX = str(Path(PY).parent / "ncclx") if (Path(PY).parent / "ncclx").exists() else shutil.which("ncclx") or "ncclx"


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TORCH_", "NCCL", "NCCLX_"))}
    env["NO_COLOR"] = "1"
    return env


def _children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


PLUGIN = Path(__file__).resolve().parents[1] / "tests" / "compare" / "plugin"
# --noise: 6 cases (2 sizes x 3 collectives, fp32), the default 20 one-call rounds: ~12 s a run on
# the 2 loaded cores of the development machine, mostly the two torch start-ups (in parallel).
SMALL = ["--sizes", "1K,64K", "--dtypes", "fp32", "--warmup", "1", "--collectives",
         "all_reduce_sum,all_gather,broadcast", "--format", "json"]


def _one(arms: list[str]) -> dict[str, Any]:
    proc = subprocess.run([NCCLX, "compare", *(x for a in arms for x in ("--arm", a)), *SMALL],
                          capture_output=True, text=True, env=_env(), timeout=900)
    report: dict[str, Any] = json.loads(proc.stdout)
    return report


def _load() -> float:
    return float(Path("/proc/loadavg").read_text().split()[0]) if Path("/proc/loadavg").exists() else -1.0


def _noise(aa: int, slowed: int) -> None:
    burner = subprocess.Popen([PY, "-c", "while True: pass"])
    loads = [_load()]
    began = time.perf_counter()
    try:
        alarms, walls, sens, unconfirmed = 0, [], [], 0
        for n in range(aa):
            t0 = time.perf_counter()
            r = _one(["gloo", "gloo"])
            walls.append(time.perf_counter() - t0)
            loads.append(_load())
            named = len(r["regressions"]) + len(r["improvements"])
            alarms += named > 0
            unconfirmed += bool(r["unconfirmed"])
            sens.append({x["collective"]: x["detectable"] for x in r["sensitivity"]})
            print(f"A/A run {n + 1}: exit {r['exit']}, {named} named, {len(r['unconfirmed'])} not confirmed, "
                  f"detectable {sens[-1]}, load {loads[-1]:.1f}", file=sys.stderr)
        print(f"A/A (gloo against gloo, {' '.join(SMALL[:-2])}): {alarms} of {aa} runs named a regression or an "
              f"improvement; {unconfirmed} had a case flagged in the sweep and not confirmed when measured again "
              f"(median run {statistics.median(walls):.1f} s)\n")
        per = {c: [s[c] for s in sens if s.get(c) is not None] for c in sens[0]} if sens else {}
        print("| collective | detectable slowdown: median of the A/A runs (range) | runs with none detectable |")
        print("|---|---|---|")
        for c, xs in per.items():
            print(f"| {c} | {statistics.median(xs):.0%} ({min(xs):.0%} to {max(xs):.0%}) | "
                  f"{sum(1 for s in sens if s.get(c) is None)} |" if xs else f"| {c} | - | {len(sens)} |")
        print("\n| arm B's all_reduce_sum | runs naming it | its cases named | its detectable size (median) | "
              "named as an improvement | other collectives named |")
        print("|---|---|---|---|---|---|")
        base = f"perturbed,PYTHONPATH={PLUGIN}"
        for factor in ("1.25", "2"):
            hit = cases = faster = other = 0
            seen: list[float] = []
            for n in range(slowed):
                r = _one([base, f"{base},NCCLX_PERTURB=slower:all_reduce_sum:{factor}"])
                loads.append(_load())
                mine = [g for g in r["regressions"] if g["collective"] == "all_reduce_sum"]
                hit += bool(mine)
                cases += len(mine)
                faster += len(r["improvements"])
                other += len(r["regressions"]) - len(mine)
                det = next((x["detectable"] for x in r["sensitivity"] if x["collective"] == "all_reduce_sum"), None)
                seen.append(float("inf") if det is None else det)
                print(f"{factor}x run {n + 1}: exit {r['exit']}, {len(mine)} of 2 named, detectable {det}, "
                      f"load {loads[-1]:.1f}", file=sys.stderr)
            typical = statistics.median(seen) if seen else float("inf")
            shown = "none" if typical == float("inf") else f"{typical:.0%}"
            print(f"| {factor}x | {hit} of {slowed} | {cases} of {2 * slowed} | {shown} | {faster} | {other} |")
        print(f"\n{aa + 2 * slowed} runs in {time.perf_counter() - began:.0f} s; load average (1 min) "
              f"{min(loads):.1f} to {max(loads):.1f}, the neighbour included")
    finally:
        burner.kill()
        burner.wait()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--ranks", default="2,4")
    ap.add_argument("--noise", action="store_true", help="false alarms and detection beside a busy neighbour")
    ap.add_argument("--aa", type=int, default=20, help="--noise: A/A runs")
    ap.add_argument("--slowed", type=int, default=10, help="--noise: runs per slowdown")
    args = ap.parse_args()
    if args.noise:
        _noise(args.aa, args.slowed)
        return
    starts = []
    for _ in range(3):
        t = time.perf_counter()
        subprocess.run([PY, "-c", "import torch, torch.distributed"], env=_env(), check=True)
        starts.append(time.perf_counter() - t)
    floor = statistics.median(starts)
    print(f"`import torch, torch.distributed` (median of 3): {floor:.1f} s\n")
    print("| ranks | cases per arm | whole command | arm A's blocks | arm B's blocks | CPU (all processes) | "
          "command / torch start-up |")
    print("|---|---|---|---|---|---|---|")
    for n in (int(x) for x in args.ranks.split(",") if x):
        cpu0, t = _children_cpu(), time.perf_counter()
        proc = subprocess.run([NCCLX, "compare", "--arm", "gloo", "--arm", "gloo", "--nproc", str(n), "--threshold",
                               "10000", "--format", "json", "--timeout", "3600"], capture_output=True, text=True,
                              env=_env(), timeout=3700)
        wall, cpu = time.perf_counter() - t, _children_cpu() - cpu0
        report = json.loads(proc.stdout)
        cases = sum(1 for row in report["rows"] if "skip" not in row)
        a, b = (arm["seconds"] for arm in report["arms"])  # the time in each arm's own blocks
        print(f"| {n} | {cases} | {wall:.1f} s | {a:.1f} s | {b:.1f} s | {cpu:.1f} s | {wall / floor:.1f}x |")
        assert proc.returncode == 0, report["verdict"]


if __name__ == "__main__":
    main()
