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
