"""The fleet roll-up at scale: `ncclx report` over thousands of repositories' reports.

    python benchmarks/bench_report.py [--repos 5000] [--findings 200] [--jobs 500]

Writes ``--repos`` `ncclx migrate --format json` reports of ``--findings`` findings each (rule
codes, messages, fix kinds and details as the codemod writes them, spread over 40 files per
repository; a CODEOWNERS of 12 rules in each `project` object) and ``--jobs`` doctor reports
(one real `ncclx doctor --level static` report, relabelled; every tenth on legacy NCCL), then
runs `ncclx report FOLDER --format json --html PAGE` once, and again with `--previous` the
first roll-up, in a fresh process each.  Prints a markdown table: input size, wall time, CPU time
of all its processes, peak memory (the main process's, and all its processes' together: the
reports are read by up to min(CPUs, 8) workers; sampled from /proc every 0.1 s, so Linux only)
and output sizes; then the time Chromium takes to draw the page and to answer two
clicks (where Playwright and Debian's chromium are installed).  Targets (issue 26): 5,000 x 200 in under 10 s
and 300 MB.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]

# (code, fix, message, severity-bearing detail) as the codemod words them.
SHAPES = [
    ("NCX101", "unsafe", "TORCH_DIST_USE_NCCL2=0 rolls back to legacy: remove it once on nccl2"),
    ("NCX110", "safe", "isinstance against ProcessGroupNCCL is False under nccl2: test every NCCL class"),
    ("NCX111", "safe", "_set_default_timeout exists only on legacy ProcessGroupNCCL"),
    ("NCX120", "safe", "TORCH_NCCL_TRACE_BUFFER_SIZE is deprecated: add TORCH_FR_BUFFER_SIZE"),
    ("NCX123", "safe", "NCCL_ASYNC_ERROR_HANDLING is deprecated: add TORCH_NCCL_ASYNC_ERROR_HANDLING"),
    ("NCX130", "unsafe", "nccl2 ignores the GPU from LOCAL_RANK (line 12): pass device_id= (hardening)"),
    ("NCX134", "none", "nccl2 ignores the GPU picked on line 40: pass device_id= (maybe a break)"),
    ("NCX201", "unsafe", "TORCH_DIST_USE_NCCL2=0 rolls back to legacy: remove it once on nccl2"),
    ("NCX203", "safe", "TORCH_NCCL_DUMP_ON_TIMEOUT is deprecated: add TORCH_FR_DUMP_ON_TIMEOUT"),
    ("NCX301", "none", "dynamic_cast to legacy ProcessGroupNCCL is null under nccl2: test nccl2 too"),
]
DETAIL = ("Under torch 2.15 the backend named nccl is ProcessGroupNCCL2; the legacy class survives only "
          "as the rollback announced for 2.15 (TORCH_DIST_USE_NCCL2=0 or nccl-legacy). See ncclx explain.")
TEAMS = ["@org/platform", "@org/train", "@org/infra", "@org/data", "@org/eval", "@org/inference"]


def _repo_report(i: int, findings: int, rng: random.Random) -> dict[str, Any]:
    files = [f"{d}/mod{n}.py" for d in ("train", "tools", "launch", "eval", "src/pkg") for n in range(8)]
    rules = [["*", [TEAMS[0]]], ["/train/", [TEAMS[1]]], ["/tools/", [TEAMS[2], TEAMS[0]]], ["*.sh", [TEAMS[2]]],
             ["/eval/", [TEAMS[4]]], ["/src/pkg/", [TEAMS[rng.randrange(len(TEAMS))]]], ["docs/*", ["@org/docs"]],
             ["**/legacy", []], ["/launch/", [f"@org/team-{i % 97}"]], ["/src/pkg/mod0.py", ["@someone"]],
             ["/build/logs/", ["@org/ops"]], ["/launch/mod7.py", []]]
    out = []
    for n in range(findings):
        code, fix, message = SHAPES[rng.randrange(len(SHAPES))]
        out.append({"path": files[n % len(files)], "line": 10 + n, "column": 5, "code": code, "message": message,
                    "detail": DETAIL, "fix": fix, "applied": False, "cell": None})
    return {
        "schema": "ncclx.migrate/1",
        "project": {"name": f"repo-{i:05d}", "directory": f"/ci/work/repo-{i:05d}", "base": ".",
                    "remote": f"https://git.example.invalid/org/repo-{i:05d}.git", "commit": f"{i:040x}",
                    "target_torch": "2.14", "codeowners": {"path": ".github/CODEOWNERS", "rules": rules}},
        "files_scanned": 400, "findings": out, "errors": [],
    }


def _generate(folder: Path, repos: int, findings: int, jobs: int) -> int:
    rng = random.Random(26)
    (folder / "repos").mkdir(parents=True)
    (folder / "jobs").mkdir()
    size = 0
    for i in range(repos):
        text = json.dumps(_repo_report(i, findings, rng), indent=2)
        (folder / "repos" / f"repo-{i:05d}.json").write_text(text)
        size += len(text)
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "NO_COLOR": "1"}
    doctor = json.loads(subprocess.run([sys.executable, "-m", "ncclx_migrate", "doctor", "--level", "static",
                                        "--format", "json"], capture_output=True, text=True, env=env).stdout)
    for j in range(jobs):
        doc = dict(doctor, label=f"node-{j:04d}/slurm-{100000 + j}")
        if j % 10 == 0:
            doc["checks"] = [dict(c, details=dict(c["details"], implementation="nccl-legacy"))
                             if c["id"] == "nccl-resolution" else c for c in doctor["checks"]]
        text = json.dumps(doc)
        (folder / "jobs" / f"job-{j:04d}.json").write_text(text)
        size += len(text)
    return size


def _tree(root: int) -> dict[int, tuple[float, int]]:
    """{pid: (CPU seconds, RSS bytes)} of ``root`` and its descendants, from /proc (Linux)."""
    parents: dict[int, int] = {}
    stats: dict[int, tuple[float, int]] = {}
    tick, page = os.sysconf("SC_CLK_TCK"), os.sysconf("SC_PAGE_SIZE")
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as fh:
                fields = fh.read().rpartition(")")[2].split()
        except OSError:
            continue
        parents[int(entry)] = int(fields[1])
        stats[int(entry)] = ((int(fields[11]) + int(fields[12])) / tick, int(fields[21]) * page)
    out, todo = {}, [root]
    while todo:
        pid = todo.pop()
        if pid in stats:
            out[pid] = stats[pid]
        todo.extend(p for p, parent in parents.items() if parent == pid)
    return out


def _run(args: list[str]) -> tuple[float, dict[str, float], subprocess.CompletedProcess[bytes]]:
    """Wall seconds, CPU seconds and peak RSS (MB: of the main process, of all its processes at
    once) of one `ncclx report` in a fresh process; its process tree is sampled every 0.1 s (the
    workers start from a forkserver, so no rusage of the main process covers them)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "NO_COLOR": "1"}
    start = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "ncclx_migrate", "report", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=env)
    cpu: dict[int, float] = {}
    peak_main = peak_all = 0
    done = threading.Event()

    def sample() -> None:
        nonlocal peak_main, peak_all
        while not done.is_set():
            tree = _tree(proc.pid)
            for pid, (seconds, _) in tree.items():
                cpu[pid] = max(cpu.get(pid, 0.0), seconds)
            peak_main = max(peak_main, tree.get(proc.pid, (0.0, 0))[1])
            peak_all = max(peak_all, sum(rss for _, rss in tree.values()))
            done.wait(0.1)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    out, err = proc.communicate()
    wall = time.perf_counter() - start
    done.set()
    sampler.join()
    assert proc.returncode == 0, err.decode()[-2000:]
    use = {"main": peak_main / 2**20, "all": peak_all / 2**20, "cpu": sum(cpu.values())}
    return wall, use, subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repos", type=int, default=5000)
    ap.add_argument("--findings", type=int, default=200)
    ap.add_argument("--jobs", type=int, default=500)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-report-") as tmp:
        folder = Path(tmp)
        start = time.perf_counter()
        size = _generate(folder / "in", a.repos, a.findings, a.jobs)
        made = time.perf_counter() - start
        print(f"generated {a.repos:,} repository reports x {a.findings} findings and {a.jobs:,} job reports: "
              f"{size / 2**20:,.0f} MB in {made:.0f} s\n")
        print("| run | inputs | wall | CPU (all processes) | peak RSS: main, all processes | roll-up JSON | page |")
        print("|---|---|---|---|---|---|---|")
        rows = [("first", []), ("with --previous", ["--previous", str(folder / "first.json")])]
        for name, extra in rows:
            page = folder / f"{name.split()[0]}.html"
            wall, use, proc = _run([str(folder / "in"), "--format", "json", "--html", str(page), *extra])
            out = folder / ("first.json" if name == "first" else "second.json")
            out.write_bytes(proc.stdout)
            doc = json.loads(proc.stdout)
            assert doc["totals"]["findings"] == a.repos * a.findings, doc["totals"]
            print(f"| {name} | {a.repos:,} x {a.findings} + {a.jobs:,} jobs ({size / 2**20:,.0f} MB) | {wall:.1f} s "
                  f"| {use['cpu']:.1f} s | {use['main']:,.0f} MB, {use['all']:,.0f} MB "
                  f"| {len(proc.stdout) / 2**20:,.1f} MB | {page.stat().st_size / 2**20:,.1f} MB |")
        opened = _in_chromium(folder / "with.html")
        if opened:
            print(f"\nThe page with --previous in Chromium: drawn {opened[0]:.1f} s after opening, the repositories "
                  f"sorted by name {opened[1]:.2f} s after a click, an owner's panel {opened[2]:.2f} s after a click")
        print(f"\n{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at the end")


def _in_chromium(path: Path) -> tuple[float, float, float] | None:
    """Seconds to the page drawn, to the repositories re-sorted, to an owner's panel; None without
    Playwright or Debian's chromium (as in tests/pages)."""
    sys.path.insert(0, str(ROOT))
    from tests.pages.conftest import ARGS, CHROMIUM

    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        return None
    if not Path(CHROMIUM).exists():
        return None
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        start = time.perf_counter()
        page.goto(path.as_uri())
        page.wait_for_selector("body[data-rendered='1']", timeout=120_000)
        drawn = time.perf_counter() - start
        start = time.perf_counter()
        page.click("#repos th[data-key=name]")
        page.wait_for_selector("#repos th.sorted[data-key=name]", timeout=60_000)
        sorted_ = time.perf_counter() - start
        start = time.perf_counter()
        page.locator("#owners tbody tr").first.click()
        page.wait_for_selector("#owner-detail table", timeout=60_000)
        owner = time.perf_counter() - start
        browser.close()
    return drawn, sorted_, owner

if __name__ == "__main__":
    main()
