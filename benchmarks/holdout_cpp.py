"""Recall, precision and file errors of the C++ scanner on the labelled hold-outs.

    python benchmarks/holdout_cpp.py [--dir DIR] [--json]
    python benchmarks/holdout_cpp.py --trees DIR [--extract GITDIRS] [--json]

``--trees``: the real-tree hold-out. ``holdout_cpp_trees.tsv`` names each tree (repository,
commit, the folders taken), ``holdout_cpp_labels.tsv`` each site, labelled by reading the real
code before the scanner ran. The trees are public code and stay out of this repository: get each
repository as a bare git directory (``git clone --bare https://github.com/OWNER/NAME
GITDIRS/OWNER+NAME``), and ``--extract GITDIRS`` writes ``DIR/OWNER+NAME@COMMIT10`` with
``git archive COMMIT -- FOLDERS``. Each tree is one run of ``ncclx migrate --format json
--target-torch 2.15 --select NCX3`` (a project-wide index per tree), and the score is printed
per project: breaks found, findings right (a finding on no labelled site is wrong), file errors.

The fixture hold-out (``--dir``, the default):

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


# --- the real-tree hold-out ---
TREES = ROOT / "benchmarks" / "holdout_cpp_trees.tsv"
TREE_LABELS = ROOT / "benchmarks" / "holdout_cpp_labels.tsv"


@dataclass(frozen=True)
class Tree:
    repo: str  # OWNER/NAME
    commit: str
    folders: tuple[str, ...]

    @property
    def name(self) -> str:
        return f"{self.repo.replace('/', '+')}@{self.commit[:10]}"


@dataclass(frozen=True)
class Site:
    repo: str
    commit: str
    places: tuple[tuple[str, frozenset[int]], ...]  # (path in the tree, its lines)
    label: str  # break, not-a-break, tolerated
    codes: tuple[str, ...]
    reason: str
    where: str  # as written in the labels

    def on(self, path: str, line: int) -> bool:
        return any(p == path and line in lines for p, lines in self.places)


def _rows(path: Path) -> list[list[str]]:
    lines = [ln for ln in path.read_text(encoding="utf-8").splitlines() if ln.strip() and not ln.startswith("#")]
    return [ln.split("\t") for ln in lines[1:]]  # the first is the header


def read_trees(path: Path = TREES) -> list[Tree]:
    return [Tree(r[0], r[1], tuple(r[2].split())) for r in _rows(path)]


def _place(text: str) -> tuple[str, frozenset[int]]:
    file, _, span = text.rpartition(":")
    first, _, last = span.partition("-")
    return file, frozenset(range(int(first), int(last or first) + 1))


def read_sites(path: Path = TREE_LABELS) -> list[Site]:
    return [Site(r[0], r[1], tuple(_place(p) for p in r[2].split(";")), r[3], tuple(r[4].split("|")), r[5], r[2])
            for r in _rows(path)]


@dataclass
class TreeScore:
    tree: Tree
    sites: list[Site]
    found: set[str] = field(default_factory=set)  # where of the breaks found
    right: int = 0
    wrong: list[dict[str, Any]] = field(default_factory=list)
    tolerated: int = 0
    errors: list[str] = field(default_factory=list)

    @property
    def breaks(self) -> list[Site]:
        return [s for s in self.sites if s.label == "break"]


def score_tree(tree: Tree, sites: list[Site], report: dict[str, Any], root: Path) -> TreeScore:
    result = TreeScore(tree, sites)
    for f in report["findings"]:
        rel = Path(os.path.relpath((root / f["path"]).resolve(), root.resolve())).as_posix()
        on = [s for s in sites if s.on(rel, f["line"])]
        hit = next((s for s in on if s.label == "break" and f["code"] in s.codes), None)
        if hit is not None:
            result.found.add(hit.where)
            result.right += 1
        elif any(s.label == "tolerated" and f["code"] in s.codes for s in on):
            result.tolerated += 1
        else:
            result.wrong.append({"path": rel, "line": f["line"], "code": f["code"], "message": f["message"],
                                 "site": on[0].where if on else None})
    result.errors = [str(e) for e in report.get("errors", [])]
    return result


def extract(tree: Tree, gitdirs: Path, into: Path) -> None:
    """``into/tree.name`` from the bare git dir of its repository (``git archive``)."""
    name = tree.repo.replace("/", "+")
    gitdir = next((d for d in (gitdirs / name / "repo", gitdirs / name) if (d / "HEAD").is_file()), None)
    if gitdir is None:
        raise SystemExit(f"{gitdirs / name}: no bare git dir; get it with "
                         f"`git clone --bare https://github.com/{tree.repo} {gitdirs / name}`")
    out = into / tree.name
    out.mkdir(parents=True)
    archive = subprocess.run(["git", f"--git-dir={gitdir}", "archive", tree.commit, "--", *tree.folders],
                             capture_output=True, check=True)
    subprocess.run(["tar", "-x", "-C", str(out)], input=archive.stdout, check=True)


def run_trees(trees_dir: Path, gitdirs: Path | None = None, python: str = sys.executable) -> list[TreeScore]:
    sites = read_sites()
    out = []
    for tree in read_trees():
        root = trees_dir / tree.name
        if not root.is_dir():
            if gitdirs is None:
                raise SystemExit(f"{root}: missing; fetch {tree.repo} at {tree.commit} and run with --extract GITDIRS")
            extract(tree, gitdirs, trees_dir)
        proc = subprocess.run(
            [python, "-m", "ncclx_migrate", "migrate", "--format", "json", "--target-torch", "2.15", "--select", "NCX3",
             "--no-cache", "-q", "--ignore-unknown", "."],
            capture_output=True, text=True, timeout=900, cwd=root)
        if proc.returncode not in (0, 1, 2) or not proc.stdout.strip():
            raise SystemExit(f"ncclx migrate failed on {root} (exit {proc.returncode}): {proc.stderr.strip()[-2000:]}")
        mine = [s for s in sites if s.repo == tree.repo and s.commit == tree.commit]
        out.append(score_tree(tree, mine, json.loads(proc.stdout), root))
    return out


def _ratio(a: int, b: int) -> str:
    return f"{a / b:.1%} ({a}/{b})" if b else "- (0/0)"


def main_trees(trees_dir: Path, gitdirs: Path | None, as_json: bool) -> int:
    scores = run_trees(trees_dir, gitdirs)
    projects: dict[str, list[TreeScore]] = {}
    for t in scores:
        projects.setdefault(t.tree.repo, []).append(t)
    found = sum(len(t.found) for t in scores)
    breaks = sum(len(t.breaks) for t in scores)
    right = sum(t.right for t in scores)
    total = right + sum(len(t.wrong) for t in scores)
    if as_json:
        print(json.dumps({
            "recall": found / breaks if breaks else 1.0, "precision": right / total if total else 1.0,
            "breaks": breaks, "found": found, "findings": total, "right": right,
            "file_errors": sum(len(t.errors) for t in scores),
            "trees": [{"tree": t.tree.name, "missed": [s.where for s in t.breaks if s.where not in t.found],
                       "wrong": t.wrong, "errors": t.errors} for t in scores]}, indent=2))
        return 0
    print(f"{'project':28} {'trees':>5} {'recall':>14} {'precision':>14} {'file errors':>11}")
    for repo, ts in projects.items():
        f = sum(len(t.found) for t in ts)
        b = sum(len(t.breaks) for t in ts)
        r = sum(t.right for t in ts)
        w = sum(len(t.wrong) for t in ts)
        print(f"{repo:28} {len(ts):5} {_ratio(f, b):>14} {_ratio(r, r + w):>14} {sum(len(t.errors) for t in ts):11}")
    print(f"{'all':28} {len(scores):5} {_ratio(found, breaks):>14} {_ratio(right, total):>14} "
          f"{sum(len(t.errors) for t in scores):11}")
    print(f"sites labelled: {sum(len(t.sites) for t in scores)} ({breaks} breaks); "
          f"tolerated findings: {sum(t.tolerated for t in scores)}")
    for t in scores:
        for s in t.breaks:
            if s.where not in t.found:
                print(f"  missed {t.tree.name} {s.where} wants {'/'.join(s.codes)}: {s.reason}")
        for fp in t.wrong:
            where = f"on labelled site {fp['site']}" if fp["site"] else "unlabelled"
            print(f"  wrong {fp['code']} {t.tree.name} {fp['path']}:{fp['line']} ({where}): {fp['message']}")
        for e in t.errors:
            print(f"  file error {t.tree.name}: {e}")
    return 0


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", type=Path, default=HOLDOUT, help="a hold-out folder with labels.json")
    parser.add_argument("--trees", type=Path, help="score the real trees under DIR (holdout_cpp_trees.tsv)")
    parser.add_argument("--extract", type=Path, metavar="GITDIRS",
                        help="with --trees: first write the missing trees from bare git dirs GITDIRS/OWNER+NAME")
    parser.add_argument("--json", action="store_true", help="print the score as JSON")
    args = parser.parse_args(argv)
    if args.trees is not None:
        return main_trees(args.trees, args.extract, args.json)
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
