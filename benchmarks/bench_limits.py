"""Peak memory and time of ``ncclx migrate --write`` on inputs at the resource bounds (issue 18).

    python benchmarks/bench_limits.py [--python-mb MB] [--cells N] [--env-mb MB]

Three generated inputs, each fixed by one ``ncclx migrate --write`` in a subprocess whose peak
RSS (from wait4) and wall time are printed with the ratio of peak memory to the file size:
(1) a Python file at the default parse limit with a get_backend() == "nccl" fix every 4.7 KB
(the density of the issue's 7.8 MB file: 1,670 matches); (2) a notebook of N small code
cells, 1 in 100 with a fix; (3) a .env file of MB megabytes, one NCCL setting every 100 lines.
CPU time is printed beside the wall time (on a loaded machine, what an idle one would take).
The subprocess's baseline (``ncclx migrate`` on an empty file: interpreter, imports) is
printed too, and subtracted in the ratio.
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


def notebook(cells: int, every: int = 100) -> str:
    def cell(i: int) -> dict[str, object]:
        src = ["import torch.distributed as dist\n", "def uses_nccl(pg):\n", '    return dist.get_backend(pg) == "nccl"']
        if i % every:
            src = [f"x{i} = {i}\n", f"print(x{i} * 2)"]
        return {"cell_type": "code", "execution_count": None, "id": f"c{i}", "metadata": {}, "outputs": [],
                "source": src}
    doc = {"cells": [cell(i) for i in range(cells)], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    return json.dumps(doc, indent=1) + "\n"


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


def measure(path: Path, *extra: str) -> tuple[float, float, int, str]:
    """(wall seconds, CPU seconds, peak RSS in bytes, last line of output) of ``ncclx migrate
    --write PATH``.  On a loaded machine the CPU time is what an idle one would take."""
    ncclx = shutil.which("ncclx", path=os.path.dirname(sys.executable)) or "ncclx"
    start = time.monotonic()
    out = subprocess.run([sys.executable, "-c", _PEAK, ncclx, "migrate", "--write", "-q", *extra, path.name],
                         cwd=path.parent, capture_output=True, text=True, check=True).stdout
    usage, last = out.split("\n", 1)
    peak, cpu = usage.split()
    return time.monotonic() - start, float(cpu), int(peak), last.strip()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--python-mb", type=float, default=DEFAULT_MAX_PYTHON_MB)
    ap.add_argument("--cells", type=int, default=10_000)
    ap.add_argument("--env-mb", type=float, default=50)
    args = ap.parse_args()
    print(f"load average before: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    with tempfile.TemporaryDirectory() as d:
        root = Path(d)
        (root / "empty.py").write_text("")
        _, _, base, _ = measure(root / "empty.py")
        print(f"baseline (empty file): {base / 2**20:.0f} MB")
        cases = [("python", "big.py", python_file(int(args.python_mb * 2**20)), ()),
                 ("notebook", "big.ipynb", notebook(args.cells), ()),
                 (".env", "big.env", env_file(int(args.env_mb * 2**20)), ("--max-file-size", str(args.env_mb + 1)))]
        for name, file, text, extra in cases:
            (root / file).write_text(text)
            size = len(text.encode())
            secs, cpu, peak, last = measure(root / file, *extra)
            print(f"{name:9} {size / 2**20:6.2f} MB  {secs:6.1f} s ({cpu:5.1f} s CPU)  peak {peak / 2**20:6.0f} MB  "
                  f"(peak - baseline) / size = {(peak - base) / size:5.1f}x  | {last}")
    print(f"load average after: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
