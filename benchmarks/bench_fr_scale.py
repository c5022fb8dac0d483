"""`ncclx fr analyze` at scale, against torch's torchfrtrace and the floor, on the same folders.

    python benchmarks/bench_fr_scale.py [--ranks 64,256,1024,4096] [--entries 2000]
        [--formats pickle,json] [--tft-max 1024] [--jobs N] [--work /tmp/frscale]
        [--plot docs/fr-scale.png]

Synthetic torch 2.10-format dumps (tests/fr/synthetic.py: one culprit that never entered
the last all_reduce), written once per size under --work.  Each tool runs in its own
process; wall time, and peak memory summed over the process and its workers (RSS sampled
every 20 ms from /proc).  The floor: one process reading and decoding every file once
(pickle.loads / json.loads), nothing else.  torchfrtrace reads pickles only and runs up
to --tft-max ranks (its time and memory grow with every entry).  Culprit and missing
ranks must agree (the script exits 1 otherwise).  Prints a markdown table; draws the plot
with matplotlib (the `bench` extra).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.fr.synthetic import PREFIX, write_job  # noqa: E402
from tests.fr.torchfrtrace import _DRIVER  # noqa: E402

PY = sys.executable
CULPRIT = 5

_FLOOR = (
    "import json, os, pickle, sys\n"
    "d = sys.argv[1]\n"
    "for n in sorted(os.listdir(d)):\n"
    "    if not n.startswith(sys.argv[2]): continue\n"
    "    b = open(os.path.join(d, n), 'rb').read()\n"
    "    json.loads(b) if b[:1] == b'{' else pickle.loads(b)\n"
)


def _tree_rss(pid: int) -> int:
    total, todo = 0, [pid]
    while todo:
        p = todo.pop()
        try:
            with open(f"/proc/{p}/statm") as f:
                total += int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
            with open(f"/proc/{p}/task/{p}/children") as f:
                todo += [int(c) for c in f.read().split()]
        except (OSError, ValueError):
            continue
    return total


def measure(cmd: list[str], timeout: float = 1800) -> tuple[float, int, str, int]:
    """(wall s, peak RSS bytes of the process tree, output, return code)."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")]))
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env)
    peak = [0]

    def sample() -> None:
        while proc.poll() is None:
            peak[0] = max(peak[0], _tree_rss(proc.pid))
            time.sleep(0.02)

    t = threading.Thread(target=sample, daemon=True)
    t.start()
    out, _ = proc.communicate(timeout=timeout)
    wall = time.perf_counter() - start
    t.join()
    return wall, peak[0], out.decode(errors="replace"), proc.returncode


def _folder(work: Path, ranks: int, entries: int, fmt: str) -> Path:
    folder = work / f"{fmt}-{ranks}x{entries}"
    done = folder / ".complete"
    if not done.exists():
        write_job(folder, world=ranks, entries=entries, culprit=CULPRIT, fmt=fmt)
        done.write_text("")
    return folder


def _size(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.iterdir() if p.name.startswith(PREFIX))


def run(ranks: int, entries: int, fmt: str, tft_max: int, jobs: int, work: Path) -> dict[str, object]:
    folder = _folder(work, ranks, entries, fmt)
    row: dict[str, object] = {"ranks": ranks, "entries": entries, "format": fmt, "mb": _size(folder) / 1e6}
    wall, peak, out, code = measure([PY, "-m", "ncclx_migrate", "fr", "analyze", str(folder), "--json",
                                     "--jobs", str(jobs)])
    report = json.loads(out[out.index("{"):])
    g = report["groups"][0]
    row.update(ours_s=wall, ours_mb=peak / 2**20, ours_missing=g["first_incomplete"]["missing_ranks"],
               ours_culprits=g["culprit_ranks"], ours_rc=code)
    wall, peak, out, code = measure([PY, "-c", _FLOOR, str(folder), PREFIX])
    assert code == 0, out[-2000:]
    row.update(floor_s=wall, floor_mb=peak / 2**20)
    if fmt != "pickle":
        row["tft_skip"] = "torchfrtrace reads pickles only"
    elif ranks > tft_max:
        row["tft_skip"] = f"skipped above {tft_max} ranks (its memory and time grow with every entry)"
    else:
        wall, peak, out, _ = measure([PY, "-c", _DRIVER, str(folder), "-p", PREFIX])
        import re

        missing = sorted({int(x) for m in re.findall(r"missing ranks: \{([^}]*)\}", out)
                          for x in re.findall(r"\d+", m)})
        row.update(tft_s=wall, tft_mb=peak / 2**20, tft_missing=missing)
        row["agree"] = missing == row["ours_missing"] == [CULPRIT]
    return row


def table(rows: list[dict[str, object]], jobs: int) -> str:
    lines = [
        f"jobs={jobs}, {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at the end\n",
        "| ranks x entries | format | dumps MB | ncclx time | ncclx peak MB | floor time | ncclx / floor "
        "| torchfrtrace time | torchfrtrace peak MB | speed-up | verdicts agree |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        tft = (f"{r['tft_s']:.1f} s | {r['tft_mb']:.0f} | {float(r['tft_s']) / float(r['ours_s']):.1f}x | "  # type: ignore[arg-type]
               f"{'yes' if r['agree'] else 'NO'}") if "tft_s" in r else f"({r['tft_skip']}) | | | culprit {r['ours_culprits']}"
        lines.append(
            f"| {r['ranks']} x {r['entries']} | {r['format']} | {r['mb']:.0f} | {r['ours_s']:.1f} s | "
            f"{r['ours_mb']:.0f} | {r['floor_s']:.1f} s | {float(r['ours_s']) / float(r['floor_s']):.2f}x | {tft} |"  # type: ignore[arg-type]
        )
    return "\n".join(lines)


def plot(rows: list[dict[str, object]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax_t, ax_m) = plt.subplots(1, 2, figsize=(11, 4.2))
    styles = {"ours": ("ncclx fr analyze", "o-"), "tft": ("torchfrtrace", "s--"), "floor": ("floor (read + decode once)", ":")}
    for fmt in sorted({str(r["format"]) for r in rows}):
        sel = [r for r in rows if r["format"] == fmt]
        for key, (label, style) in styles.items():
            pts = [(r["ranks"], r[f"{key}_s"], r[f"{key}_mb"]) for r in sel if f"{key}_s" in r]
            if not pts:
                continue
            xs = [p[0] for p in pts]
            ax_t.plot(xs, [p[1] for p in pts], style, label=f"{label}, {fmt}")
            ax_m.plot(xs, [p[2] for p in pts], style, label=f"{label}, {fmt}")
    for ax, title, unit in ((ax_t, "wall time", "seconds"), (ax_m, "peak memory (process + workers)", "MB")):
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel(f"ranks ({rows[0]['entries']} entries each)")
        ax.set_ylabel(unit)
        ax.set_title(title)
        ax.grid(True, which="both", alpha=0.3)
    ax_m.axhline(500, color="grey", lw=0.8)
    ax_m.text(64, 520, "500 MB target", fontsize=8, color="grey")
    ax_t.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--ranks", default="64,256,1024,4096")
    ap.add_argument("--entries", type=int, default=2000)
    ap.add_argument("--formats", default="pickle,json")
    ap.add_argument("--json-max", type=int, default=1024, help="largest JSON folder (1 GB at 4,096 ranks)")
    ap.add_argument("--tft-max", type=int, default=1024)
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--work", type=Path, default=Path("/tmp/ncclx-frscale"))
    ap.add_argument("--plot", type=Path, default=ROOT / "docs" / "fr-scale.png")
    ap.add_argument("--results", type=Path, default=None, help="also write the rows as JSON here")
    args = ap.parse_args()
    rows: list[dict[str, object]] = []
    for fmt in args.formats.split(","):
        for ranks in (int(x) for x in args.ranks.split(",")):
            if fmt == "json" and ranks > args.json_max:
                continue
            row = run(ranks, args.entries, fmt, args.tft_max, args.jobs, args.work)
            print(json.dumps(row), flush=True)
            rows.append(row)
            if args.results:
                args.results.write_text(json.dumps(rows, indent=1))
    print(table(rows, args.jobs))
    plot(rows, args.plot)
    print(f"plot: {args.plot}")
    if any(r.get("agree") is False or r["ours_culprits"] != [CULPRIT] for r in rows):
        sys.exit(1)


if __name__ == "__main__":
    main()
