"""The pages as a new user reads them (issue 19): on the doctor's fleet page every check that
fails has a column, so the red FAIL heading has a red cell under it; the fr page of a real
watchdog hang (the run tests/fr/test_first_read.py shares) says where, in the user's code."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ..conftest import run_ncclx
from ..fr.conftest import scenario  # noqa: F401  (the shared real runs)
from ..fr.scenarios import WORKER, Run
from ..fr.test_first_read import CALL_LINE, hung  # noqa: F401
from .test_doctor_page import _fleet


@pytest.mark.browser
def test_every_failing_check_has_a_red_cell(tmp_path: Path, open_page: Any) -> None:
    reports = _fleet(tmp_path, ranks=64)  # host 5 loads an old NCCL: nccl-version and cluster-consistency fail
    merged = json.loads(run_ncclx("doctor", "merge", *reports, "--format", "json").stdout)
    failing = [c["id"] for c in merged["checks"] if c["status"] == "fail"]
    assert "cluster-consistency" in failing and "nccl-version" in failing
    page_file = tmp_path / "fleet.html"
    run_ncclx("doctor", "merge", *reports, "--html", str(page_file))
    opened = open_page(page_file)
    page = opened.page
    heading = page.locator("#verdict .big").inner_text()
    assert heading.startswith(f"FAIL: {len(failing)} checks failed") and " 0 " not in heading
    red = page.locator("#grid-0 rect.c-fail title").all_text_contents()
    for cid in failing:
        assert any(f"· {cid}: FAIL" in t for t in red), (cid, red)
    page.locator("#grid-0 .row").first.click()  # host 5's ranks: the agreement cell says what differs
    detail = page.locator("#detail-0").inner_text()
    assert "runs NCCL 2.28.3 (the others 2.30.7)" in detail and '"2.28.3"' not in detail
    opened.offline_and_clean()


@pytest.mark.browser
@pytest.mark.torch
@pytest.mark.slow
def test_the_page_shows_where_folds_torch_frames_and_agrees_on_colours(
        hung: Run, tmp_path: Path, open_page: Any) -> None:  # noqa: F811
    page_file = tmp_path / "hang.html"
    run_ncclx("fr", "analyze", str(hung.folder), "--html", str(page_file))
    opened = open_page(page_file)
    page = opened.page
    verdict = page.locator("#verdict").inner_text()
    assert f"the waiting ranks called it from _collective_3 at {WORKER}:{CALL_LINE}" in verdict
    assert f"rank 1 was at main at {WORKER}:" in verdict
    # Rotated column labels stay clear of the culprit column's outline.
    label = page.locator("#grid-0 text.hd.hl").bounding_box()
    outline = page.locator("#grid-0 rect.hl").bounding_box()
    assert label and outline and label["y"] + label["height"] <= outline["y"] + 1, (label, outline)
    page.locator("#grid-0 .row").first.click()  # rank 0, which waited in #3
    detail = page.locator("#detail-0")
    newest = detail.locator("tbody tr").first
    stack = newest.locator("td").last
    assert stack.inner_text().startswith(f"_collective_3 at {WORKER}:{CALL_LINE}")
    assert "2 torch frames" in stack.inner_text() and "distributed_c10d.py" not in stack.inner_text()
    stack.locator("summary").click()
    assert "distributed_c10d.py" in stack.inner_text() and "c10d_logger.py" in stack.inner_text()
    # An entry gloo retired is "completed" in the grid: the table paints it the same green.
    retired = detail.locator("span.tag", has_text="scheduled (retired)").first
    green = retired.evaluate("e => getComputedStyle(e).backgroundColor")
    cell = page.locator("#grid-0 rect.c-c").first.evaluate("e => getComputedStyle(e).fill")
    assert green == cell, (green, cell)
    opened.screenshot(tmp_path, "fr-first-read.png")
    opened.offline_and_clean()
