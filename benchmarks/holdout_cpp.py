"""Recall, precision and file errors of the C++ scanner on the labelled hold-out.

    python benchmarks/holdout_cpp.py [--dir DIR] [--json]

The hold-out (``tests/fixtures/cpp_holdout/``) is public extension code from nine projects,
rewritten in the same shapes, and ``labels.json`` beside it says, site by site and before the
tool ran, what a maintainer would report: a code the site must get (at one of its lines), or
nothing. One run of the real CLI, ``ncclx migrate --format json --target-torch 2.15 DIR``
(report mode, the whole folder at once so cross-file bindings count), is scored:

- recall: labelled breaks found with one of their codes / labelled breaks;
- precision: findings on a labelled break / all findings, where a finding a site lists under
  ``also_ok`` (the ``Options`` line of a construction) counts as neither;
- file errors: files the scanner could not read (each loses all its findings).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
HOLDOUT = ROOT / "tests" / "fixtures" / "cpp_holdout"


@dataclass
class Score:
    sites: list[dict[str, Any]]
    found: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # positive site id -> findings
    false_positives: list[dict[str, Any]] = field(default_factory=list)  # finding + the site it fell on
    tolerated: list[dict[str, Any]] = field(default_factory=list)
    errors: list[dict[str, Any]] = field(default_factory=list)

    @property
    def positives(self) -> list[dict[str, Any]]:
        return [s for s in self.sites if s["codes"]]

    @property
    def missed(self) -> list[dict[str, Any]]:
        return [s for s in self.positives if s["id"] not in self.found]

    @property
    def recall(self) -> float:
        return 1 - len(self.missed) / len(self.positives) if self.positives else 1.0

    @property
    def precision(self) -> float:
        right = sum(len(v) for v in self.found.values())
        total = right + len(self.false_positives)
        return right / total if total else 1.0

    def flagged(self, site_id: str) -> list[dict[str, Any]]:
        """False positives that fell on a labelled no-finding site."""
        return [fp for fp in self.false_positives if fp.get("site") == site_id]

    def to_json(self) -> dict[str, Any]:
        return {
            "recall": round(self.recall, 4), "precision": round(self.precision, 4),
            "positives": len(self.positives), "sites": len(self.sites),
            "found": sorted(self.found), "missed": [s["id"] for s in self.missed],
            "false_positives": self.false_positives, "tolerated": len(self.tolerated),
            "file_errors": self.errors,
        }


def _places(site: dict[str, Any]) -> list[tuple[str, list[int]]]:
    return [(site["file"], site["lines"])] + [(a["file"], a["lines"]) for a in site.get("also_at", [])]


def score(report: dict[str, Any], labels: dict[str, Any], root: Path) -> Score:
    """Match ``ncclx migrate`` JSON findings (paths under ``root``) to the labelled sites."""
    result = Score(labels["sites"])
    for f in report["findings"]:
        rel = Path(os.path.relpath(Path(f["path"]).resolve(), root.resolve())).as_posix()
        hit = next((s for s in result.positives for file, lines in _places(s)
                    if file == rel and f["line"] in lines and f["code"] in s["codes"]), None)
        if hit is not None:
            result.found.setdefault(hit["id"], []).append(f)
            continue
        ok = any(s["file"] == rel and f["line"] in extra["lines"] and f["code"] in extra["codes"]
                 for s in result.sites for extra in s.get("also_ok", []))
        if ok:
            result.tolerated.append(f)
            continue
        on = next((s["id"] for s in result.sites for file, lines in _places(s) if file == rel and f["line"] in lines),
                  None)
        result.false_positives.append({"path": rel, "line": f["line"], "code": f["code"], "site": on,
                                       "message": f["message"]})
    for e in report.get("errors", []):
        result.errors.append(e)
    return result


def run(root: Path = HOLDOUT, python: str = sys.executable) -> Score:
    """One `ncclx migrate` over the hold-out, scored against its labels.json."""
    labels = json.loads((root / "labels.json").read_text(encoding="utf-8"))
    proc = subprocess.run(
        [python, "-m", "ncclx_migrate", "migrate", "--format", "json", "--target-torch", "2.15", str(root)],
        capture_output=True, text=True, timeout=300, cwd=root,
    )
    if proc.returncode not in (0, 1) or not proc.stdout.strip():
        raise SystemExit(f"ncclx migrate failed (exit {proc.returncode}): {proc.stderr.strip()[-2000:]}")
    return score(json.loads(proc.stdout), labels, root)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", type=Path, default=HOLDOUT, help="a hold-out folder with labels.json")
    parser.add_argument("--json", action="store_true", help="print the score as JSON")
    args = parser.parse_args(argv)
    result = run(args.dir)
    if args.json:
        print(json.dumps(result.to_json(), indent=2))
        return 0
    print(f"sites labelled: {len(result.sites)} ({len(result.positives)} to find)")
    print(f"recall:    {result.recall:.1%} ({len(result.positives) - len(result.missed)}/{len(result.positives)})")
    right = sum(len(v) for v in result.found.values())
    print(f"precision: {result.precision:.1%} ({right}/{right + len(result.false_positives)} findings;"
          f" {len(result.tolerated)} tolerated)")
    print(f"file errors: {len(result.errors)}")
    for s in result.missed:
        print(f"  missed {s['id']}: {s['file']}:{s['lines'][0]} wants {'/'.join(s['codes'])} ({s['kind']})")
    for fp in result.false_positives:
        where = f"on labelled site {fp['site']}" if fp["site"] else "unlabelled"
        print(f"  false positive {fp['code']} at {fp['path']}:{fp['line']} ({where}): {fp['message']}")
    for e in result.errors:
        print(f"  file error: {e}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
