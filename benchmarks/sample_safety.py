"""What `ncclx migrate --write` does to a sample of public repositories, measured per repository.

    python benchmarks/sample_safety.py DIR [--repo NAME ...] [--labels FILE] [--list] [--sites]

DIR holds one checked-out repository per folder (a `.git` in each lets `.gitignore` and the
project root work as they do for their maintainers). Every repository is copied to a temporary
folder per mode, so DIR is never written. For each repository:

- the report (``ncclx migrate --format json``) and, per mode, ``--write`` (safe fixes),
  ``--write --unsafe-fixes``, and ``--write --use-shim`` when the report has an NCX110/NCX111
  finding (the rules the shim changes), each on a fresh copy;
- labels: a finding the report labels safe (``[*]``) is applied by ``--write``, a safe or unsafe
  one by ``--write --unsafe-fixes``, nothing else (``labels`` counts findings where it differs);
- every changed Python file still parses (``parse``) and gains no pyflakes message (ruff's ``F``
  rules, else ``python -m pyflakes``, else not checked: ``flakes`` is ``-``);
- lines a fix added that exceed the line length the project's formatter governs, read with the
  tool's own ``line_length`` (``long``; a line whose replaced line was already as long is not
  counted); added lines black (at that length) would change where it leaves the lines they
  replace alone (``black``; ``-``: black absent or unable to parse the file);
- the fixed point: a second ``--write`` in the same mode changes nothing (``again``: files it
  changed) and applies nothing;
- files changed that had no applied finding (``unasked``) and files the run could not handle
  (``errors``, with stderr's first line for a crash).

Comments within 3 lines of a changed line that mention NCCL, legacy, rollback, nccl2 or noqa are
printed as stale-comment candidates, for labelling by hand; ``--list`` prints every finding and
``--sites`` every ``init_process_group`` call of non-test code with the findings on its line, for
labelling precision and device-binding recall. ``--labels FILE`` (a JSON object mapping
``"repo:path:line:code"`` to ``"right"`` or ``"wrong"``) adds the site precision of the report;
an unlabelled finding is listed. A measurement tool, not a test: it asserts nothing.
"""

from __future__ import annotations

import argparse
import ast
import difflib
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ncclx_migrate._migrate._python._layout import line_length

MODES: dict[str, list[str]] = {
    "safe": ["--write"],
    "unsafe": ["--write", "--unsafe-fixes"],
    "shim": ["--write", "--use-shim"],
}
STALE = re.compile(r"nccl|legacy|roll.?back|noqa", re.IGNORECASE)
SKIP_DIRS = {".git", ".ncclx_cache"}


@dataclass
class ModeResult:
    applied: int = 0
    files: int = 0
    parse: int = 0
    flakes: int | None = 0
    long: int = 0
    black: int | None = 0  # added lines black would change at the governing length (None: not checked)
    again: int = 0
    again_applied: int = 0
    labels: int = 0
    unasked: int = 0
    errors: int = 0
    notes: list[str] = field(default_factory=list)


SELECT: list[str] = []  # --select: only these rules (a cheaper run over large trees)


def ncclx(root: Path, *args: str, jobs: int) -> tuple[dict[str, Any], str]:
    cmd = [sys.executable, "-m", "ncclx_migrate", "migrate", "--format", "json", "--no-cache",
           "-q", "-j", str(jobs), *(["--select", ",".join(SELECT)] if SELECT else []), *args, "."]
    proc = subprocess.run(cmd, cwd=root, capture_output=True, text=True, check=False)
    try:
        return json.loads(proc.stdout), proc.stderr
    except json.JSONDecodeError:
        return {"findings": [], "errors": [{"path": ".", "message": proc.stderr.strip()[-400:]}]}, proc.stderr


def snapshot(root: Path) -> dict[str, str]:
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d not in SKIP_DIRS]
        for name in filenames:
            p = Path(dirpath, name)
            if p.is_symlink() or not p.is_file():
                continue
            out[str(p.relative_to(root))] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def changed(before: dict[str, str], after: dict[str, str]) -> list[str]:
    return sorted(k for k in after.keys() | before.keys() if before.get(k) != after.get(k))


def key(f: dict[str, Any]) -> tuple[str, int, int, str]:
    return (f["path"], f["line"], f["column"], f["code"])


def flake_messages(root: Path, paths: list[str]) -> Counter[tuple[str, str, str]] | None:
    """(path, code, message) of pyflakes' messages on ``paths`` under ``root``; None: no checker."""
    if not paths:
        return Counter()
    ruff = subprocess.run([sys.executable, "-m", "ruff", "check", "--isolated", "--no-cache",
                           "--select", "F", "--output-format", "json", "--exit-zero", *paths],
                          cwd=root, capture_output=True, text=True, check=False)
    if ruff.returncode == 0:
        return Counter((str(Path(m["filename"]).relative_to(root.resolve())), m["code"], m["message"])
                       for m in json.loads(ruff.stdout))
    flakes = subprocess.run([sys.executable, "-m", "pyflakes", *paths], cwd=root,
                            capture_output=True, text=True, check=False)
    if "No module named pyflakes" in flakes.stderr:
        return None
    out: Counter[tuple[str, str, str]] = Counter()
    for line in flakes.stdout.splitlines():
        path, _, rest = line.partition(":")
        out[(path, "F", re.sub(r"^\d+:(\d+:)?\s*", "", rest))] += 1
    return out


def read_lines(path: Path) -> list[str]:
    try:
        return path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return []


def black_touched(lines: list[str], limit: int) -> set[int] | None:
    """Indices of the lines black (at ``limit``) would change in a file; None: black cannot
    format it (not installed, or code it does not parse)."""
    try:
        import black
    except ImportError:
        return None
    text = "\n".join(lines) + "\n"
    try:
        out = black.format_str(text, mode=black.Mode(line_length=limit))
    except Exception:  # black's own parse errors (a Python 2 file, a syntax it lacks)
        return None
    matcher = difflib.SequenceMatcher(None, lines, out.splitlines(), autojunk=False)
    return {i for tag, i1, i2, _, _ in matcher.get_opcodes() if tag != "equal" for i in range(i1, max(i2, i1 + 1))}


def check_diff(rel: str, old: list[str], new: list[str], limit: int, result: ModeResult,
               stale: list[str], mode: str) -> None:
    """Over-long added lines, added lines black would change (where it leaves the lines they
    replace, and the two around them, alone) and stale-comment candidates of one changed file."""
    matcher = difflib.SequenceMatcher(None, old, new, autojunk=False)
    touched_new = black_touched(new, limit) if rel.endswith(".py") else None
    touched_old = black_touched(old, limit) if touched_new else None
    if rel.endswith(".py") and touched_new is None:
        result.notes.append(f"black cannot format {rel}: its added lines not checked")
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            continue
        if touched_new and touched_old is not None and not any(i in touched_old for i in range(i1 - 2, i2 + 2)):
            for j in range(j1, j2):
                if j in touched_new and result.black is not None:
                    result.black += 1
                    result.notes.append(f"black {rel}:{j + 1} (at {limit}): {new[j].strip()}")
        was = max((len(x) for x in old[i1:i2]), default=0)
        if rel.endswith(".py"):
            for j in range(j1, j2):
                if len(new[j]) > limit and len(new[j]) > was:
                    result.long += 1
                    result.notes.append(f"long {rel}:{j + 1} ({len(new[j])} > {limit}): {new[j].strip()}")
        for j in range(max(0, j1 - 3), min(len(new), j2 + 3)):
            text = new[j]
            hash_at = text.find("#")
            if hash_at >= 0 and STALE.search(text[hash_at:]):
                stale.append(f"[{mode}] {rel}:{j + 1}: {text.strip()}")


def run_mode(repo: Path, mode: str, report: dict[str, Any], base: dict[str, str], jobs: int,
             stale: list[str], keep: Path | None) -> ModeResult:
    result = ModeResult()
    fixable = {"safe"} if mode != "unsafe" else {"safe", "unsafe"}
    labelled = {key(f) for f in report["findings"] if f["fix"] in fixable}
    with tempfile.TemporaryDirectory(prefix=f"sample-{repo.name}-{mode}-") as tmp:
        copy = Path(tmp) / repo.name
        shutil.copytree(repo, copy, symlinks=True)
        written, stderr = ncclx(copy, *MODES[mode], jobs=jobs)
        if "Traceback" in stderr:
            result.notes.append("crash: " + stderr.strip().splitlines()[-1])
        result.errors = len(written.get("errors", []))
        result.notes += [f"error {e.get('path')}: {e.get('message')}" for e in written.get("errors", [])]
        applied = {key(f) for f in written["findings"] if f.get("applied")}
        result.applied = len(applied)
        result.labels = len(applied ^ labelled)
        result.notes += [f"label mismatch {k}" for k in sorted(applied ^ labelled)]
        after = snapshot(copy)
        files = changed(base, after)
        result.files = len(files)
        with_fix = {k[0] for k in applied}
        result.unasked = len([f for f in files if f not in with_fix])
        result.notes += [f"changed without an applied finding: {f}" for f in files if f not in with_fix]
        py = [f for f in files if f.endswith(".py") and f in base and f in after]
        for rel in py:
            try:
                ast.parse((copy / rel).read_bytes(), rel)
            except SyntaxError as e:
                result.parse += 1
                result.notes.append(f"does not parse: {rel}: {e}")
        before_msgs = flake_messages(repo, py)
        after_msgs = flake_messages(copy, py)
        if before_msgs is None or after_msgs is None:
            result.flakes = None
        else:
            added = after_msgs - before_msgs
            result.flakes = sum(added.values())
            result.notes += [f"pyflakes added {p}: {c} {m}" for (p, c, m) in added]
        for rel in files:
            if rel in base and rel in after:
                check_diff(rel, read_lines(repo / rel), read_lines(copy / rel),
                           line_length(str(copy / rel)), result, stale, mode)
        if files:
            again, _ = ncclx(copy, *MODES[mode], jobs=jobs)
            result.again_applied = sum(1 for f in again["findings"] if f.get("applied"))
            result.again = len(changed(after, snapshot(copy)))
        if keep is not None and files:
            dest = keep / mode / repo.name
            dest.mkdir(parents=True, exist_ok=True)
            for rel in files:
                (dest / rel).parent.mkdir(parents=True, exist_ok=True)
                if (copy / rel).exists():
                    shutil.copy2(copy / rel, dest / rel)
    return result


def is_test(path: str) -> bool:
    parts = Path(path).parts
    return any(p in ("test", "tests", "testing", "unit_tests", "functional_tests") for p in parts) \
        or Path(path).name.startswith("test_") or Path(path).name.endswith("_test.py")


def init_sites(repo: Path, findings: list[dict[str, Any]]) -> list[str]:
    """Every init_process_group call of non-test code, with the device findings on its line."""
    device = {(f["path"], f["line"]): f["code"] for f in findings if f["code"] in ("NCX130", "NCX134")}
    out = []
    for dirpath, dirnames, filenames in os.walk(repo):
        dirnames[:] = [d for d in dirnames if d not in SKIP_DIRS]
        for name in filenames:
            if not name.endswith(".py"):
                continue
            path = Path(dirpath, name)
            rel = str(path.relative_to(repo))
            if is_test(rel):
                continue
            text = path.read_text(encoding="utf-8", errors="replace")
            if "init_process_group" not in text:
                continue
            try:
                tree = ast.parse(text)
            except SyntaxError:
                continue
            for node in ast.walk(tree):
                if isinstance(node, ast.Call):
                    fn = node.func
                    name_ = fn.attr if isinstance(fn, ast.Attribute) else getattr(fn, "id", "")
                    if name_ == "init_process_group":
                        kws = {k.arg for k in node.keywords}
                        tag = "device_id" if "device_id" in kws else ("**" if None in kws else "-")
                        out.append(f"{repo.name}:{rel}:{node.lineno} [{tag}] "
                                   f"{device.get((rel, node.lineno), '')}")
    return sorted(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dir", type=Path)
    ap.add_argument("--repo", action="append", default=[], help="only these folders of DIR")
    ap.add_argument("--mode", action="append", choices=list(MODES), help="only these write modes")
    ap.add_argument("--labels", type=Path, help="JSON: {'repo:path:line:code': 'right'|'wrong'}")
    ap.add_argument("--list", action="store_true", help="print every finding of the report")
    ap.add_argument("--sites", action="store_true", help="print every init_process_group site")
    ap.add_argument("--keep", type=Path, help="copy each mode's changed files here")
    ap.add_argument("-j", "--jobs", type=int, default=2)
    ap.add_argument("--select", action="append", default=[], help="only these rule codes (ncclx --select)")
    args = ap.parse_args(argv)
    SELECT[:] = args.select
    labels: dict[str, str] = json.loads(args.labels.read_text()) if args.labels else {}
    repos = sorted(p for p in args.dir.iterdir() if p.is_dir() and (not args.repo or p.name in args.repo))
    cols = ["applied", "files", "parse", "flakes", "long", "black", "again", "labels", "unasked", "errors"]
    rows: list[tuple[str, str, ModeResult]] = []
    stale: list[str] = []
    found = right = 0
    unlabelled: list[str] = []
    for repo in repos:
        report, stderr = ncclx(repo, jobs=args.jobs)
        if "Traceback" in stderr:
            print(f"{repo.name}: report crashed: {stderr.strip().splitlines()[-1]}")
        kinds = Counter(f["fix"] for f in report["findings"])
        print(f"\n== {repo.name}: {report.get('files_scanned', 0)} files, {len(report['findings'])} findings "
              f"({kinds['safe']} safe, {kinds['unsafe']} unsafe fixes), "
              f"{len(report.get('errors', []))} errors", flush=True)
        for e in report.get("errors", []):
            print(f"   error {e.get('path')}: {e.get('message')}")
        for f in report["findings"]:
            label_key = f"{repo.name}:{f['path']}:{f['line']}:{f['code']}"
            found += 1
            right += labels.get(label_key) == "right"
            if args.labels and label_key not in labels:
                unlabelled.append(label_key)
            if args.list:
                print(f"   {f['path']}:{f['line']}:{f['column']} {f['code']} [{f['fix']}] {f['message']}")
        if args.sites:
            for site in init_sites(repo, report["findings"]):
                print(f"   site {site}")
        base = snapshot(repo)
        shim = any(f["code"] in ("NCX110", "NCX111") for f in report["findings"])
        for mode in args.mode or list(MODES):
            if mode == "shim" and not shim:
                continue
            mode_report = report
            if mode == "shim":
                mode_report, _ = ncclx(repo, "--use-shim", jobs=args.jobs)
            r = run_mode(repo, mode, mode_report, base, args.jobs, stale, args.keep)
            rows.append((repo.name, mode, r))
            for note in r.notes:
                print(f"   [{mode}] {note}")
    print("\nrepo                 mode    " + " ".join(f"{c:>7}" for c in cols))
    totals: Counter[str] = Counter()
    for name, mode, r in rows:
        values = [getattr(r, c) for c in cols]
        print(f"{name:<20} {mode:<7} " + " ".join(f"{'-' if v is None else v:>7}" for v in values))
        for c, v in zip(cols, values, strict=True):
            totals[f"{mode}:{c}"] += v or 0
    for mode in MODES:
        if any(m == mode for _, m, _ in rows):
            print(f"{'TOTAL':<20} {mode:<7} " + " ".join(f"{totals[f'{mode}:{c}']:>7}" for c in cols))
    print(f"\nstale-comment candidates ({len(stale)}):")
    for line in stale:
        print(f"   {line}")
    if args.labels:
        print(f"\nsite precision: {right}/{found} findings labelled right")
        for k in unlabelled:
            print(f"   unlabelled {k}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
