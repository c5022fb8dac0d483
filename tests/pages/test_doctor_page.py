"""``ncclx doctor --html`` and ``ncclx doctor merge --html``: the fleet as hosts or ranks x checks."""

from __future__ import annotations

import json
import os
import socket
import subprocess
from pathlib import Path
from typing import Any

import pytest

from ..conftest import ncclx_exe, run_ncclx
from . import synthetic

browser = pytest.mark.browser


def _fleet(tmp_path: Path, ranks: int = 256, toggle_on: int | None = None) -> list[str]:
    """One real static report as every rank of a job would save it (synthetic.doctor_fleet);
    ``toggle_on``: that rank also has TORCH_DIST_USE_NCCL2=0 (the others leave it unset)."""
    proc = run_ncclx("doctor", "--level", "static", "--json")
    paths = []
    for report in synthetic.doctor_fleet(json.loads(proc.stdout), ranks):
        if report["rank"] == toggle_on:
            next(c for c in report["checks"] if c["id"] == "legacy-toggle")["details"]["value"] = "0"
        path = tmp_path / f"rank{report['rank']}.json"
        path.write_text(json.dumps(report))
        paths.append(str(path))
    return paths


def test_merge_html_groups_identical_results_odd_ones_first(tmp_path: Path) -> None:
    page = tmp_path / "fleet.html"
    res = run_ncclx("doctor", "merge", *_fleet(tmp_path), "--html", str(page))
    assert res.returncode == 1
    assert f"wrote {page}" in res.stderr
    text = page.read_text(encoding="utf-8")
    data = json.loads(text.split('<script id="data" type="application/json">')[1].split("</script>")[0])
    labels = [r["label"] for r in data["rows"]]
    assert labels == ["rank 77 on node-009", "ranks 40-47 on node-005", "ranks 0-39, 48-76, 78-255 (247 ranks) on 31 hosts"]
    assert [r["flag"] for r in data["rows"]] == [1, 1, 0]
    nccl = [c["label"] for c in data["cols"]].index("nccl-version")
    assert data["rows"][1]["marks"] == [nccl] and data["rows"][1]["cells"][nccl] == "fail"
    assert "nccl-version: fail on ranks 40-47 on node-005: loaded NCCL 2.28.3" in text
    assert "<link" not in text and " src=" not in text


def test_local_level_html_and_unwritable_path(tmp_path: Path) -> None:
    page = tmp_path / "one.html"
    res = run_ncclx("doctor", "--level", "static", "--html", str(page))
    assert page.exists() and "ncclx doctor" in page.read_text(encoding="utf-8")
    assert res.stdout.startswith("ncclx doctor: level static")  # the text report is unchanged
    bad = tmp_path / "missing" / "x.html"
    res = run_ncclx("doctor", "merge", str(tmp_path / "none.json"), "--html", str(bad))
    assert res.returncode == 2 and "Traceback" not in res.stderr
    report = run_ncclx("doctor", "--level", "static", "--json").stdout
    (tmp_path / "r.json").write_text(report)
    res = run_ncclx("doctor", "merge", str(tmp_path / "r.json"), "--html", str(bad))
    assert res.returncode == 2
    assert res.stderr.strip().splitlines() == [
        f"ncclx doctor: error: {bad}: cannot write the page there (No such file or directory)"]


@browser
def test_fleet_page_in_the_browser(tmp_path: Path, open_page: Any) -> None:
    page_file = tmp_path / "fleet.html"
    run_ncclx("doctor", "merge", *_fleet(tmp_path, ranks=512, toggle_on=77), "--html", str(page_file))
    opened = open_page(page_file, height=760)
    page = opened.page
    verdict = page.locator("#verdict").inner_text()
    assert verdict.startswith("FAIL: 2 checks failed")
    assert "ranks 40-47 on node-005" in verdict
    rows = page.locator("#grid-0 .row")
    assert rows.count() == 3
    assert "rank 77 on node-009" in (rows.first.text_content() or "")
    rows.nth(1).click()
    detail = page.locator("#detail-0").inner_text()
    assert "ranks 40-47 on node-005" in detail and "odd one out" in detail
    assert "load NCCL >= 2.29" in detail and "majority:" in detail
    opened.screenshot(tmp_path, "doctor-page.png")
    # Values as the text output shows them: no JSON (null, quoted strings), verbs, counts.
    rows.first.click()
    agreement = page.locator("#detail-0 tr", has_text="cluster-consistency").inner_text()
    assert "has TORCH_DIST_USE_NCCL2 = 0 (the others unset)" in agreement, agreement
    values = page.locator("#divergent")
    assert "511 reports have TORCH_DIST_USE_NCCL2 = unset; 1 other value" in values.inner_text()
    assert "504 reports run NCCL 2.30.7; 1 other value" in values.inner_text()
    values.locator("summary", has_text="TORCH_DIST_USE_NCCL2").click()
    assert "0\trank 77 on node-009" in values.inner_text()
    assert "2.28.3\tranks 40-47 on node-005" not in values.inner_text()  # still folded
    shown = page.locator("body").inner_text()
    assert "null" not in shown and '"2.30.7"' not in shown and "the majority null" not in shown
    assert "(all 512 ranks)" in page.locator("#verdict").inner_text()  # gpu-binding, the same everywhere
    opened.offline_and_clean()


@pytest.mark.torch
@pytest.mark.slow
def test_cluster_level_html_is_written_by_rank_0(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = str(s.getsockname()[1])
    pages = [tmp_path / f"rank{r}.html" for r in range(2)]
    base = {k: v for k, v in os.environ.items() if not k.startswith(("TORCH_", "NCCL", "NCCLX_"))}
    procs = [
        subprocess.Popen(
            [ncclx_exe(), "doctor", "--level", "cluster", "--timeout", "60", "--html", str(pages[r])],
            env={**base, "NO_COLOR": "1", "RANK": str(r), "WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1",
                 "MASTER_PORT": port, "SLURM_JOB_ID": "4243",
                 **({"TORCH_FR_BUFFER_SIZE": "0"} if r == 1 else {})},
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        for r in range(2)
    ]
    for p in procs:
        p.communicate(timeout=180)
    assert not pages[1].exists()  # only rank 0 speaks for the job
    text = pages[0].read_text(encoding="utf-8")
    data = json.loads(text.split('<script id="data" type="application/json">')[1].split("</script>")[0])
    host = socket.gethostname()
    assert [r["label"] for r in data["rows"]] == [f"rank 1 on {host}", f"rank 0 on {host}"]
    fr = [c["label"] for c in data["cols"]].index("flight-recorder")
    # A tie: rank 0's results count as the majority (as in cluster-consistency), rank 1 is marked.
    assert (data["rows"][0]["marks"], data["rows"][1]["marks"]) == ([fr], [])
    assert "level cluster" in text
