"""ncclx migrate throughput vs a plain libcst parse of every file, in the same run.

    python benchmarks/bench_migrate.py [--root DIR] [--jobs N]

Default root: the installed torch package (a real codebase nobody here wrote).  Prints
files/s and MB/s for (1) ``libcst.parse_module`` of every .py file, one process (the
baseline), (2) ``ncclx migrate``'s runner (read, precheck, parse+rules where needed, --jobs
processes), (3) the whole command as a user runs it, ``ncclx migrate --format json ROOT``
in a fresh process (start-up, discovery, the runner and the JSON report), and both ratios;
then (4) the same rules with the precheck off, and asserts the findings are identical (the
precheck only skips files where no rule can fire).  Exits 1 when a ratio misses the 10x
target or a file errors.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import os
import resource
import subprocess
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import libcst as cst

from ncclx_migrate._migrate._model import Options
from ncclx_migrate._migrate._python._engine import transform_source
from ncclx_migrate._migrate._runner import Mode, run
from ncclx_migrate._migrate._xref import Indexer


def _parse(path: str) -> int:
    try:
        cst.parse_module(Path(path).read_text(encoding="utf-8"))
    except Exception:
        pass
    return 1


def _full(path: str, options: Options) -> list[tuple[str, int, int, str]]:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return []
    r = transform_source(text, path, options, precheck=False)
    return [(f.path, f.line, f.column, f.code) for f in r.findings]


def _command() -> list[str]:
    """``ncclx`` as installed next to this interpreter (the console script a user runs)."""
    exe = Path(sys.executable).parent / "ncclx"
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "ncclx_migrate"]


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _end_to_end(root: str, jobs: int) -> tuple[float, float, int, int]:
    """Wall and CPU time (user + sys, the process and its workers) of ``ncclx migrate --no-cache
    --format json ROOT`` (a fresh process; every file scanned, as on a first run: bench_cache.py
    measures the cache), its findings and files."""
    t0, c0 = time.perf_counter(), _children_cpu()
    proc = subprocess.run([*_command(), "migrate", "--no-cache", "--format", "json", "--jobs", str(jobs), root],
                          capture_output=True, text=True)
    took, cpu = time.perf_counter() - t0, _children_cpu() - c0
    if proc.returncode not in (0, 1):
        sys.exit(f"ncclx migrate failed ({proc.returncode}): {proc.stderr[-2000:]}")
    doc = json.loads(proc.stdout)
    return took, cpu, len(doc["findings"]), int(doc.get("files_scanned", -1))


def main() -> int:
    ap = argparse.ArgumentParser()
    default_root = None
    try:
        import torch

        default_root = str(Path(torch.__file__).parent)
    except ImportError:
        pass
    ap.add_argument("--root", default=default_root)
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--skip-check", action="store_true", help="skip the (slow) no-precheck comparison")
    args = ap.parse_args()
    if not args.root:
        sys.exit("no --root and torch is not installed")
    files = sorted(str(p) for p in Path(args.root).rglob("*.py"))
    mb = sum(os.path.getsize(f) for f in files) / 1e6
    options = Options()

    t0, c0 = time.perf_counter(), time.process_time()
    for f in files:
        _parse(f)
    base, base_cpu = time.perf_counter() - t0, time.process_time() - c0

    t0 = time.perf_counter()
    report = run(files, options, Mode(), jobs=args.jobs)
    ours = time.perf_counter() - t0
    found = sorted((f.path, f.line, f.column, f.code) for r in report.results for f in r.findings)
    errors = [r for r in report.results if r.error]

    print(f"files: {len(files)}  size: {mb:.1f} MB  jobs: {args.jobs}  cpus: {os.cpu_count()}")
    print(f"libcst.parse_module, 1 process : {base:7.2f} s  {len(files) / base:8.1f} files/s  {mb / base:6.2f} MB/s")
    print(f"ncclx migrate (runner)         : {ours:7.2f} s  {len(files) / ours:8.1f} files/s  {mb / ours:6.2f} MB/s")
    ratio = base / ours
    print(f"speed-up: {ratio:.1f}x (target >= 10x: {'met' if ratio >= 10 else 'MISSED'})   "
          f"findings: {len(found)}   errors: {len(errors)}")
    e2e, e2e_cpu, e2e_found, e2e_files = _end_to_end(args.root, args.jobs)
    e2e_ratio = base / e2e
    print(f"ncclx migrate --format json (whole command, fresh process): {e2e:7.2f} s  "
          f"{len(files) / e2e:8.1f} files/s  findings: {e2e_found}  files scanned: {e2e_files}")
    print(f"end-to-end speed-up: {e2e_ratio:.1f}x (target >= 10x: {'met' if e2e_ratio >= 10 else 'MISSED'})")
    # On a shared machine wall time moves with the others' load; CPU time much less.  With
    # --jobs 1 the command runs on one core, so on an idle one the two agree.
    print(f"CPU (user + sys): baseline {base_cpu:.2f} s, whole command {e2e_cpu:.2f} s: "
          f"{base_cpu / e2e_cpu:.1f}x")
    t0 = time.perf_counter()
    index = Indexer()
    for f in files:
        index.add(f, Path(f).read_bytes())
    helpers = index.build(lambda f: Path(f).read_bytes())
    print(f"cross-file helper index (in both runs above): {time.perf_counter() - t0:.2f} s, "
          f"{len(helpers.table)} helpers, {len(helpers.setters)} that pick a GPU")
    if not args.skip_check:
        options = dataclasses.replace(options, helpers=helpers)  # what the runner's pre-pass gives its workers
        t0 = time.perf_counter()
        with ProcessPoolExecutor(args.jobs) as pool:
            full = sorted(x for xs in pool.map(functools.partial(_full, options=options), files, chunksize=8) for x in xs)
        print(f"no precheck (all rules on every file, {args.jobs} processes): {time.perf_counter() - t0:.1f} s, findings: {len(full)}")
        assert full == found, f"precheck changed findings: {set(full) ^ set(found)}"
        print("findings identical with and without the precheck")
    return 0 if ratio >= 10 and e2e_ratio >= 10 and not errors else 1


if __name__ == "__main__":
    raise SystemExit(main())
