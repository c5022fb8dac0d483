"""Peak memory and time of ``ncclx migrate --write`` on inputs at the resource bounds (issues 18, 25).

    python benchmarks/bench_limits.py [--python-mb MB] [--cells N] [--big-cells N] [--env-mb MB] [--functions N] [--only KIND]

Generated inputs, each reported and then fixed by one ``ncclx migrate --write`` in a subprocess
whose peak RSS (from wait4) and wall time are printed with the ratio of peak memory to the file
size: (1) a Python file at the default parse limit with a get_backend() == "nccl" fix every 4.7 KB
(the density of the issue's 7.8 MB file: 1,670 matches); (2) a notebook of N small code
cells, 1 in 100 with a fix, and the same with 60,000 cells without spaces (7.7 MB, under the
8 MB read limit: issue 37 §5); (3) a .env file of MB megabytes, one NCCL setting every 100 lines.
``--only notebook`` runs one input.
CPU time is printed beside the wall time (on a loaded machine, what an idle one would take).
The subprocess's baseline (``ncclx migrate`` on an empty file: interpreter, imports) is
printed too, and subtracted in the ratio.

Then (issue 25 §5) a module of N small functions, one in 10 with a fix (N = 10,000 by default:
the target is 1,000 fixes within 30 s), and the growth of the CPU time over the baseline with
the size (N/4, N/2, N functions, one in 10 fixed) and with the fix count (N functions, 0, 1 in
40, 1 in 10 fixed): per-function and per-fix costs that stay level mean linear growth.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from ncclx_migrate._migrate._runner import DEFAULT_MAX_PYTHON_MB

NCCL_CHECK = 'def uses_nccl{i}(pg):\n    return dist.get_backend(pg) == "nccl"\n\n\n'
FILLER = "def f{i}(a, b):\n    x = [a + b for _ in range({i})]\n    return {{'k': x, 'v': a * {i}}}\n\n\n"


def python_file(size: int, every: int = 4700) -> str:
    out = ["import torch.distributed as dist\n\n\n"]
    total = matches = i = 0
    while total < size - 200:
        s = (NCCL_CHECK if total // every > matches else FILLER).format(i=i)
        matches += s.startswith("def uses_nccl")
        out.append(s)
        total += len(s)
        i += 1
    return "".join(out)


SMALL = "def f{i}(a):\n    return a + {i}\n\n\n"


def functions(n: int, fixes: int) -> str:
    """``n`` small functions, ``fixes`` of them spread evenly with a get_backend() == "nccl" fix."""
    every = n // fixes if fixes else 0
    out = ["import torch.distributed as dist\n\n\n"]
    for i in range(n):
        out.append((NCCL_CHECK if every and i % every == 0 else SMALL).format(i=i))
    return "".join(out)


def notebook(cells: int, every: int = 100, compact: bool = False) -> str:
    """``cells`` small code cells, 1 in ``every`` with a fix; ``compact``: JSON without
    spaces (60,000 cells in 7.7 MB, under the 8 MB read limit: the issue 37 notebook)."""
    def cell(i: int) -> dict[str, object]:
        src = ["import torch.distributed as dist\n", "def uses_nccl(pg):\n", '    return dist.get_backend(pg) == "nccl"']
        if i % every:
            src = [f"x{i} = {i}\n", f"print(x{i} * 2)"]
        return {"cell_type": "code", "execution_count": None, "id": f"c{i}", "metadata": {}, "outputs": [],
                "source": src}
    doc = {"cells": [cell(i) for i in range(cells)], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    return (json.dumps(doc, separators=(",", ":")) if compact else json.dumps(doc, indent=1)) + "\n"


def env_file(size: int) -> str:
    line = "APP_SETTING_{i}=value-{i}\n"
    out, total, i = [], 0, 0
    while total < size:
        s = "NCCL_ASYNC_ERROR_HANDLING=1\n" if i % 100 == 0 else line.format(i=i)
        out.append(s)
        total += len(s)
        i += 1
    return "".join(out)


# A fresh interpreter starts the command and reports its peak RSS: a child forked from this
# process (which has imported the codemod) would inherit this one's peak as its own.
_PEAK = """
import resource, subprocess, sys
out = subprocess.run(sys.argv[1:], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True).stdout
usage = resource.getrusage(resource.RUSAGE_CHILDREN)
print(usage.ru_maxrss * 1024, usage.ru_utime + usage.ru_stime)
print((out.strip().splitlines() or [""])[-1])
"""


def measure(path: Path, *extra: str, write: bool = True) -> tuple[float, float, int, str]:
    """(wall seconds, CPU seconds, peak RSS in bytes, last line of output) of ``ncclx migrate
    --write PATH`` (without ``--write``: the report).  On a loaded machine the CPU time is what
    an idle one would take."""
    ncclx = shutil.which("ncclx", path=os.path.dirname(sys.executable)) or "ncclx"
    start = time.monotonic()
    how = ["--write"] if write else []
    out = subprocess.run([sys.executable, "-c", _PEAK, ncclx, "migrate", *how, "-q", *extra, path.name],
                         cwd=path.parent, capture_output=True, text=True, check=True).stdout
    usage, last = out.split("\n", 1)
    peak, cpu = usage.split()
    return time.monotonic() - start, float(cpu), int(peak), last.strip()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--python-mb", type=float, default=DEFAULT_MAX_PYTHON_MB)
    ap.add_argument("--cells", type=int, default=10_000)
    ap.add_argument("--env-mb", type=float, default=50)
    ap.add_argument("--functions", type=int, default=10_000)
    ap.add_argument("--big-cells", type=int, default=60_000, help="cells of the compact notebook")
    ap.add_argument("--only-growth", action="store_true", help="only the functions module and the growth")
    ap.add_argument("--only", choices=["python", "notebook", ".env"], help="only this input, report and --write")
    args = ap.parse_args()
    print(f"load average before: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    with tempfile.TemporaryDirectory() as d:
        root = Path(d)
        (root / "empty.py").write_text("")
        _, _, base, _ = measure(root / "empty.py")
        print(f"baseline (empty file): {base / 2**20:.0f} MB")
        cases: list[tuple[str, str, Callable[[], str], tuple[str, ...]]] = [
                 ("python", "big.py", lambda: python_file(int(args.python_mb * 2**20)), ()),
                 ("notebook", "big.ipynb", lambda: notebook(args.cells), ()),
                 ("notebook", "compact.ipynb", lambda: notebook(args.big_cells, compact=True), ()),
                 (".env", "big.env", lambda: env_file(int(args.env_mb * 2**20)), ("--max-file-size", str(args.env_mb + 1)))]
        for name, file, make, extra in [] if args.only_growth else cases:
            if args.only and name != args.only:
                continue
            text = make()
            size = len(text.encode())
            # The report first (the file as generated), then --write (which fixes it).
            for how, write in (("report", False), ("--write", True)):
                (root / file).write_text(text)
                secs, cpu, peak, last = measure(root / file, *extra, write=write)
                print(f"{name:9} {how:8} {size / 2**20:6.2f} MB  {secs:6.1f} s ({cpu:5.1f} s CPU)  peak "
                      f"{peak / 2**20:6.0f} MB  (peak - baseline) / size = {(peak - base) / size:5.1f}x  | {last}")
        if args.only:
            return
        _, base_cpu, _, _ = measure(root / "empty.py")
        n = args.functions
        print(f"baseline CPU (empty file): {base_cpu:.2f} s")
        cost: dict[tuple[int, int], float] = {}
        for funcs, fixes in [(n // 4, n // 40), (n // 2, n // 20), (n, n // 40), (n, n // 20), (n, n // 10)]:
            path = root / f"f{funcs}_{fixes}.py"
            path.write_text(functions(funcs, fixes))
            secs, cpu, peak, last = measure(path)
            cost[funcs, fixes] = cpu - base_cpu
            print(f"{funcs:6} functions {fixes:5} fixes {path.stat().st_size / 2**10:6.0f} KB  {secs:6.1f} s "
                  f"({cpu:5.1f} s CPU)  peak {peak / 2**20:5.0f} MB  | {last}")
        # One in ten fixed, the size doubling: the CPU per function stays level if growth is linear.
        for funcs, fixes in [(n // 4, n // 40), (n // 2, n // 20), (n, n // 10)]:
            print(f"size growth: {funcs:6} functions, 1 in 10 fixed: {cost[funcs, fixes] / funcs * 1e3:6.2f} ms CPU "
                  f"a function ({cost[funcs, fixes] / cost[n // 4, n // 40]:4.2f}x the cost at {n // 4})")
        # The same module, more fixes: the cost each added fix adds stays level if growth is linear.
        for (k1, k2) in [(n // 40, n // 20), (n // 20, n // 10)]:
            print(f"fix growth: {n} functions, {k1} -> {k2} fixes: "
                  f"{(cost[n, k2] - cost[n, k1]) / (k2 - k1) * 1e3:6.1f} ms CPU a fix added")
    print(f"load average after: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
