"""The per-file cache of ``ncclx migrate``: cold, warm, and one file edited, in one run.

    python benchmarks/bench_cache.py [--root DIR] [--keep]

Default root: the installed torch package (Python sources and C++ headers); ``--root
.venv/lib/python3.11/site-packages/torch/distributed`` is the ~400-file Python tree of the
issue.  The tree is copied to a temporary folder (so that a file can be edited), then
``ncclx migrate --format json --cache-dir CACHE COPY`` runs as a user runs it, each in a
fresh process: (1) cold (an empty cache), (2) warm (nothing changed), the best of 3, (3)
``--no-cache``, (4) with one Python file edited (a finding appended).  The floor a warm run is
measured against: ``ncclx --version`` (the start-up, best of 3) plus reading every file of
the tree once.  Prints the times and ratios, and what the edit added to a warm run against the
average cost of one file in the cold run.  Checks that the warm report is the cold one byte
for byte and that the edited run reports exactly one finding more.  Exits 1 when warm is not
at least 10x faster than cold.
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def _command() -> list[str]:
    exe = Path(sys.executable).parent / "ncclx"
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "ncclx_migrate"]


def _cpu() -> float:
    """CPU seconds (user + system) of the children waited for so far."""
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


CPU: dict[str, float] = {}  # the last run's CPU seconds, by label


def _run(root: Path, cache: Path | None, label: str = "") -> tuple[float, str]:
    c0 = _cpu()
    t0 = time.perf_counter()
    where = ["--cache-dir", str(cache)] if cache is not None else ["--no-cache"]
    proc = subprocess.run([*_command(), "migrate", "-q", "--format", "json", *where, str(root)],
                          capture_output=True, text=True)
    took = time.perf_counter() - t0
    CPU[label] = min(CPU.get(label, float("inf")), _cpu() - c0)
    if proc.returncode not in (0, 1):
        sys.exit(f"ncclx migrate failed ({proc.returncode}): {proc.stderr[-2000:]}")
    return took, proc.stdout


def _timed(cmd: list[str]) -> float:
    c0 = _cpu()
    t0 = time.perf_counter()
    subprocess.run(cmd, capture_output=True, check=True)
    CPU["version"] = min(CPU.get("version", float("inf")), _cpu() - c0)
    return time.perf_counter() - t0


def main() -> int:
    ap = argparse.ArgumentParser()
    default_root = None
    try:
        import torch

        default_root = str(Path(torch.__file__).parent)
    except ImportError:
        pass
    ap.add_argument("--root", default=default_root)
    ap.add_argument("--keep", action="store_true", help="leave the copy and the cache (printed)")
    args = ap.parse_args()
    if not args.root:
        sys.exit("no --root and no torch installed")
    work = Path(tempfile.mkdtemp(prefix="ncclx-bench-cache-"))
    try:
        tree = work / "tree"
        shutil.copytree(args.root, tree, ignore=shutil.ignore_patterns("__pycache__"))
        time.sleep(2.5)  # files changed within 2 s of a run are read again (the cache's racy-file rule)
        cache = work / "cache"
        cold, cold_out = _run(tree, cache, "cold")
        warms = [_run(tree, cache, "warm") for _ in range(3)]
        warm = min(t for t, _ in warms)
        bare, bare_out = _run(tree, None, "bare")
        doc = json.loads(cold_out)
        files = int(doc["files_scanned"])
        if any(out != cold_out for _, out in warms) or bare_out != cold_out:
            print("FAIL: the warm (or --no-cache) report differs from the cold one")
            return 1
        start = min(_timed([*_command(), "--version"]) for _ in range(3))
        t0, r0 = time.perf_counter(), time.process_time()
        for p in tree.rglob("*"):
            if p.is_file():
                p.read_bytes()
        read, read_cpu = time.perf_counter() - t0, time.process_time() - r0
        edited = next(p for p in sorted(tree.rglob("*.py")) if p.stat().st_size > 2000)
        with open(edited, "a", encoding="utf-8") as fh:
            fh.write('\nimport os\nos.environ["TORCH_DIST_USE_NCCL2"] = "0"\n')
        one, one_out = _run(tree, cache, "one")
        added = len(json.loads(one_out)["findings"]) - len(doc["findings"])
        per_file = cold / files
        print(f"tree: {args.root} ({files} files scanned, {len(doc['findings'])} findings, "
              f"{len(doc['errors'])} errors)")
        floor, floor_cpu = start + read, CPU["version"] + read_cpu
        print("| run | time | CPU (user+sys) | ratio (time; CPU) |")
        print("|---|---|---|---|")
        print(f"| cold (empty cache) | {cold:.2f} s | {CPU['cold']:.2f} s | 1x |")
        print(f"| warm, nothing changed (best of 3) | {warm:.2f} s | {CPU['warm']:.2f} s | "
              f"**{cold / warm:.1f}x; {CPU['cold'] / CPU['warm']:.1f}x** faster than cold |")
        print(f"| `--no-cache` | {bare:.2f} s | {CPU['bare']:.2f} s | "
              f"warm is **{bare / warm:.1f}x; {CPU['bare'] / CPU['warm']:.1f}x** faster |")
        print(f"| floor: `ncclx --version` + reading every file | {floor:.2f} s | {floor_cpu:.2f} s | "
              f"warm is **{warm / floor:.1f}x; {CPU['warm'] / floor_cpu:.1f}x** the floor |")
        print(f"| warm, one file edited ({edited.relative_to(tree)}) | {one:.2f} s | {CPU['one']:.2f} s | "
              f"+{one - warm:.2f} s over warm |")
        print(f"one file's share of the cold run: {per_file * 1000:.1f} ms; the edit added {added} finding(s)")
        ok = cold / warm >= 10 and added == 1
        print("ok" if ok else "FAIL: warm is not 10x faster than cold, or the edit was not reported")
        return 0 if ok else 1
    finally:
        if args.keep:
            print(f"kept: {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
