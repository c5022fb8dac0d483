"""The doctor's fleet page as a new user reads it (issue 19): every check that fails has a
column, so the red FAIL heading has a red cell under it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ..conftest import run_ncclx
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
    assert 'nccl-version.runtime is "2.28.3"' in detail
    opened.offline_and_clean()
