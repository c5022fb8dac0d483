"""`ncclx doctor merge` over thousands of reports that each differ stays one screen; the JSON
and the page keep every value (issue 18)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from .conftest import run_bounded

N = 2000


@pytest.fixture(scope="module")
def reports(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    d = tmp_path_factory.mktemp("reports")
    paths = []
    for rank in range(N):
        doc = {"schema": "ncclx.doctor/1", "level": "local", "host": f"node-{rank // 8}", "rank": rank,
               "torch": "2.15.0", "summary": {},
               "checks": [{"id": "flight-recorder", "status": "ok", "message": "dumps go to a per-rank path",
                           "remedy": "", "details": {"dump_prefix": f"/scratch/job/rank{rank}/fr_"}}]}
        path = d / f"r{rank}.json"
        path.write_text(json.dumps(doc))
        paths.append(str(path))
    return paths


def test_a_value_per_rank_is_one_screen(reports: list[str]) -> None:
    proc = run_bounded("doctor", "merge", *reports)
    assert proc.returncode in (0, 1), proc.stderr
    lines = proc.stdout.splitlines()
    assert len(lines) <= 40, f"{len(lines)} lines"
    assert "ranks 1-1999 (1999) on 250 hosts dump the flight recorder to 1999 different values" in " ".join(
        line.strip() for line in lines), proc.stdout


def test_the_json_and_the_page_keep_every_value(reports: list[str], tmp_path: Path) -> None:
    page = tmp_path / "fleet.html"
    proc = run_bounded("doctor", "merge", *reports, "--json", "--html", str(page))
    doc = json.loads(proc.stdout)
    check = next(c for c in doc["checks"] if c["id"] == "cluster-consistency")
    minority = check["details"]["divergent"][0]["minority"]
    assert len(minority) == N - 1
    assert {m["value"] for m in minority} == {f"/scratch/job/rank{r}/fr_" for r in range(1, N)}
    html = page.read_text()
    # each value as the text output shows it (no JSON quotes), with who holds it
    assert all(f'<td>/scratch/job/rank{r}/fr_</td><td>rank {r} on node-{r // 8}</td>' in html for r in range(1, N))
