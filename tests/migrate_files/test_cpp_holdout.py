"""The labelled C++ hold-out (tests/fixtures/cpp_holdout, labels.json): public extension code
from nine projects rewritten in the same shapes, each site labelled by hand before the scanner
ran. One real `ncclx migrate --format json` over the folder (benchmarks/holdout_cpp.py scores
it); one test per labelled site, so a failure names the site and what a maintainer expects.

The labels are the truth and are never edited to match the scanner. A site the scanner does not
meet yet is listed in GAPS, a strict xfail with the reason: fixing it turns the xfail into an
error until its line here is removed.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
HOLDOUT = ROOT / "tests" / "fixtures" / "cpp_holdout"
sys.path.insert(0, str(ROOT / "benchmarks"))

from holdout_cpp import Score, run  # noqa: E402

LABELS = json.loads((HOLDOUT / "labels.json").read_text(encoding="utf-8"))

# site id -> why the scanner does not meet its label yet (measured; see docs/migrate.md).
GAPS: dict[str, str] = {}


def _param(site: dict[str, Any]) -> Any:
    marks = [pytest.mark.xfail(strict=True, reason=GAPS[site["id"]])] if site["id"] in GAPS else []
    return pytest.param(site, id=site["id"], marks=marks)


@pytest.fixture(scope="module")
def scored() -> Score:
    return run(HOLDOUT)


def test_labels_cover_eight_projects_and_25_sites() -> None:
    sites = LABELS["sites"]
    assert len(sites) >= 25 and len(LABELS["projects"]) >= 8
    assert {s["file"].split("/", 1)[0] for s in sites} == set(LABELS["projects"])
    for s in sites:
        for file, _ in [(s["file"], s["lines"])] + [(a["file"], a["lines"]) for a in s.get("also_at", [])]:
            assert (HOLDOUT / file).is_file(), file


def test_no_file_fails_whole(scored: Score) -> None:
    assert scored.errors == []


@pytest.mark.parametrize("site", [_param(s) for s in LABELS["sites"] if s["codes"]])
def test_break_is_found(scored: Score, site: dict[str, Any]) -> None:
    assert site["id"] in scored.found, f"{site['file']}:{site['lines'][0]} wants {site['codes']}: {site['why']}"


@pytest.mark.parametrize("site", [_param(s) for s in LABELS["sites"] if not s["codes"]])
def test_no_finding_where_none_is_due(scored: Score, site: dict[str, Any]) -> None:
    assert scored.flagged(site["id"]) == [], site["why"]


def test_no_finding_off_the_labelled_sites(scored: Score) -> None:
    assert [fp for fp in scored.false_positives if fp["site"] is None] == []


def test_the_real_tree_labels_name_their_trees() -> None:
    """The real-tree hold-out's data files (benchmarks/holdout_cpp_*.tsv) agree: every
    labelled site is in a listed tree, every tree has sites, a site's label and codes are
    known, and the trees span at least 10 projects, 3 of them at two or more commits."""
    from holdout_cpp import read_sites, read_trees

    trees = read_trees()
    sites = read_sites()
    named = {(t.repo, t.commit) for t in trees}
    assert len(named) == len(trees)
    assert {(s.repo, s.commit) for s in sites} == named
    assert all(s.label in ("break", "not-a-break", "tolerated") and s.reason for s in sites)
    assert all(c.startswith("NCX3") and len(c) == 6 for s in sites for c in s.codes)
    assert all(len(t.commit) == 40 and t.folders for t in trees)
    per_project: dict[str, int] = {}
    for t in trees:
        per_project[t.repo] = per_project.get(t.repo, 0) + 1
    assert len(per_project) >= 10 and sum(n >= 2 for n in per_project.values()) >= 3
