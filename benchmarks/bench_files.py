"""Throughput of the non-Python scanners (shell, Dockerfile, YAML, .env, notebooks).

    python benchmarks/bench_files.py [--root DIR ...] [--copies N]

Two corpora, each measured against a baseline parse of the same files in the same run:
(1) real files: every shell/YAML/Dockerfile/.env/notebook under the roots (default: this
interpreter's prefix, where installed packages ship their YAML and scripts) - mostly
files without NCCL settings, where the text pre-check decides; (2) NCCL-dense files: the
test fixtures under tests/fixtures/files, repeated N times, where every file is parsed.
Baselines: PyYAML ``safe_load_all`` for YAML, ``shlex`` tokenisation for shell and
Dockerfiles, ``json.loads`` plus ``libcst.parse_module`` of every code cell for notebooks
(what any libcst codemod of the cells has to do). It also
checks that the pre-check changes no finding (the same files scanned with it off).
C++ and CUDA sources have their own benchmark (benchmarks/bench_cpp.py) and are left out here.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
import time
from pathlib import Path

import libcst
import yaml

from ncclx_migrate._migrate._files import file_kind, scan
from ncclx_migrate._migrate._model import Options

ROOT = Path(__file__).resolve().parents[1]


def _baseline(kind: str, text: str) -> None:
    try:
        if kind == "yaml":
            list(yaml.safe_load_all(text))
        elif kind == "notebook":
            nb = json.loads(text)
            for cell in nb.get("cells", []):
                if cell.get("cell_type") == "code":
                    src = cell.get("source", "")
                    src = "".join(src) if isinstance(src, list) else src
                    lines = [ln for ln in src.splitlines() if not ln.lstrip().startswith(("!", "%"))]
                    libcst.parse_module("\n".join(lines) + "\n")
        else:
            lex = shlex.shlex(text, posix=True, punctuation_chars=True)
            lex.whitespace_split = True
            lex.commenters = "#"
            list(lex)
    except Exception:
        pass


def _collect(roots: list[str]) -> list[tuple[str, str, str]]:
    out = []
    for root in roots:
        for dp, dn, fn in os.walk(root):
            dn[:] = [d for d in dn if d not in (".git", "node_modules", "__pycache__")]
            for f in fn:
                p = os.path.join(dp, f)
                if os.path.islink(p) or not os.path.isfile(p) or os.path.getsize(p) > 2_000_000:
                    continue
                try:
                    text = Path(p).read_text(encoding="utf-8")
                except (OSError, UnicodeDecodeError):
                    continue
                kind = file_kind(p, text)
                if kind is not None and kind != "cpp":
                    out.append((p, kind, text))
    return out


def _measure(files: list[tuple[str, str, str]], label: str) -> dict[str, float]:
    options = Options()
    mb = sum(len(t.encode()) for _, _, t in files) / 1e6
    t0 = time.perf_counter()
    for _, kind, text in files:
        _baseline(kind, text)
    base = time.perf_counter() - t0
    t0 = time.perf_counter()
    found = 0
    for path, _, text in files:
        r = scan(path, text, options)
        found += len(r.findings) if r else 0
    ours = time.perf_counter() - t0
    n = len(files)
    print(f"| {label} | {n} | {mb:.1f} | {n / base:,.0f} files/s, {mb / base:.1f} MB/s "
          f"| {n / ours:,.0f} files/s, {mb / ours:.1f} MB/s | {base / ours:.1f}x | {found} |")
    return {"base": base, "ours": ours}


def _same_findings(files: list[tuple[str, str, str]]) -> bool:
    options = Options()
    for path, _, text in files:
        a = scan(path, text, options)
        b = scan(path, text, options, precheck=False)
        fa = [(f.line, f.column, f.code) for f in a.findings] if a else []
        fb = [(f.line, f.column, f.code) for f in b.findings] if b else []
        if fa != fb:
            print(f"pre-check changed the findings of {path}", file=sys.stderr)
            return False
    return True


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", action="append", default=None)
    ap.add_argument("--copies", type=int, default=200)
    args = ap.parse_args()
    roots = args.root or [r for r in (sys.prefix, "/usr/share", "/etc") if os.path.isdir(r)]
    real = _collect(roots)
    fixtures = [(str(p), file_kind(str(p)) or "", p.read_text(encoding="utf-8"))
                for p in sorted((ROOT / "tests" / "fixtures" / "files").glob("*/*.in.*")) if p.parent.name != "cpp"]
    dense = [(f"{i}/{p}", k, t) for i in range(args.copies) for p, k, t in fixtures]
    kinds: dict[str, int] = {}
    for _, k, _ in real:
        kinds[k] = kinds.get(k, 0) + 1
    print(f"real corpus under {roots}: {kinds}")
    print("| corpus | files | MB | baseline parse | ncclx scanners | ratio | findings |")
    print("|---|---|---|---|---|---|---|")
    _measure(real, "real files (pre-check decides)")
    _measure(dense, f"NCCL-dense fixtures x{args.copies} (all parsed)")
    for kind in sorted({k for _, k, _ in dense}):
        _measure([f for f in dense if f[1] == kind], f"  of which {kind}")
    ok = _same_findings(real) and _same_findings(fixtures)
    print(f"findings identical with the pre-check off: {ok}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
