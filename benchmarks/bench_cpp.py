"""Throughput of the C++/CUDA scanner against a plain tree-sitter parse of the same files.

    python benchmarks/bench_cpp.py [--root DIR] [--limit N] [--copies N]

Corpora: (1) a real C++ tree, torch's own installed ``include/`` folder (default: the
running interpreter's torch; ~9,600 headers), scanned as ``ncclx migrate`` scans it (the text
pre-check skips files that name neither the legacy class nor ``"nccl"``) and with the
pre-check off (every file parsed, names resolved, every rule run); (2) the C++ fixture cases,
repeated N times (all NCCL-dense). The baseline is ``Parser.parse`` of the same bytes with the
same grammar (tree-sitter-cpp, tree-sitter-cuda for .cu/.cuh), nothing else. It also checks
that the pre-check changes no finding.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from bench_files import _same_findings  # the same check, for this corpus

from ncclx_migrate._migrate._files import file_kind, scan
from ncclx_migrate._migrate._files._cpp._parse import parse_snippet
from ncclx_migrate._migrate._model import Options

ROOT = Path(__file__).resolve().parents[1]


def _torch_include() -> str:
    import importlib.util

    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("torch is not installed: pass --root DIR (a C++ tree)")
    return os.path.join(next(iter(spec.submodule_search_locations)), "include")


def _collect(root: str, limit: int | None) -> list[tuple[str, str]]:
    out = []
    for dp, dn, fn in os.walk(root):
        dn.sort()
        for f in sorted(fn):
            p = os.path.join(dp, f)
            if file_kind(p) != "cpp" or os.path.islink(p) or os.path.getsize(p) > 8 * 2**20:
                continue
            try:
                out.append((p, Path(p).read_text(encoding="utf-8")))
            except (OSError, UnicodeDecodeError):
                continue
    return out[:limit] if limit else out


def _measure(files: list[tuple[str, str]], label: str, precheck: bool) -> float:
    data = [(p, t, t.encode("utf-8")) for p, t in files]
    mb = sum(len(b) for _, _, b in data) / 1e6
    t0 = time.perf_counter()
    for p, _, b in data:
        parse_snippet(p, b)
    base = time.perf_counter() - t0
    options = Options()
    t0 = time.perf_counter()
    found = errors = 0
    for p, t, _ in data:
        r = scan(p, t, options, precheck=precheck)
        found += len(r.findings) if r else 0
        errors += 1 if r and r.error else 0
    ours = time.perf_counter() - t0
    n = len(data)
    print(f"| {label} | {n} | {mb:.1f} | {n / base:,.0f} files/s | {n / ours:,.0f} files/s "
          f"| {ours / base:.2f}x | {found} | {errors} |")
    return ours / base


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", default=None)
    ap.add_argument("--limit", type=int, default=None)
    ap.add_argument("--copies", type=int, default=50)
    args = ap.parse_args()
    root = args.root or _torch_include()
    real = _collect(root, args.limit)
    fixtures = [(str(p), p.read_text(encoding="utf-8"))
                for p in sorted((ROOT / "tests" / "fixtures" / "files" / "cpp").glob("*.in.*"))]
    dense = [(f"{i}/{p}", t) for i in range(args.copies) for p, t in fixtures]
    print(f"C++ tree: {root}")
    print("| corpus | files | MB | tree-sitter parse | ncclx C++ scan | time vs parse | findings | errors |")
    print("|---|---|---|---|---|---|---|---|")
    _measure(real, "torch include/, as scanned (pre-check)", True)
    _measure(real, "torch include/, pre-check off (all parsed)", False)
    _measure(dense, f"C++ fixtures x{args.copies} (all parsed)", False)
    ok = _same_findings([(p, "cpp", t) for p, t in real])
    print(f"findings identical with the pre-check off: {ok}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
