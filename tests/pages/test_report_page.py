"""``ncclx report --html``: the fleet's roll-up page, in Chromium."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import run_ncclx
from tests.report.conftest import fleet  # noqa: F401  (the session's fleet of real reports)


@pytest.mark.browser
def test_rollup_page_in_the_browser(fleet: tuple[Path, dict[str, Any]], tmp_path: Path,  # noqa: F811
                                    open_page: Any) -> None:
    folder, _ = fleet
    inputs = [str(folder / "reports"), str(folder / "merged.json"), str(tmp_path / "missing.json")]
    first = run_ncclx("report", *inputs, "--format", "json")
    (tmp_path / "first.json").write_text(first.stdout)
    page_file = tmp_path / "fleet.html"
    res = run_ncclx("report", *inputs, "--previous", str(tmp_path / "first.json"), "--html", str(page_file))
    assert res.returncode == 0 and f"ncclx report: wrote {page_file}" in res.stderr
    assert "<link" not in page_file.read_text(encoding="utf-8")
    opened = open_page(page_file, height=1100)
    page = opened.page
    opened.screenshot(tmp_path, "report-page.png")  # as opened: what is left, the trend, the repositories
    verdict = page.locator("#verdict").inner_text()
    assert verdict.startswith("Before the rollback goes: 2 rollback toggles still set in 1 repository; 3 breaks")
    assert "2 jobs still build legacy NCCL" in verdict and "one ncclx migrate --write from clean: 1 repository (beta)" in verdict
    repos = page.locator("#repos tbody tr")
    assert repos.count() == 2
    assert repos.first.locator("td").first.inner_text().startswith("alpha")
    assert "one --write away" in repos.nth(1).inner_text()
    page.fill("#repos-filter", "bet")
    assert repos.count() == 1 and page.locator("#repos-count").inner_text() == "1 of 2"
    page.fill("#repos-filter", "")
    def names() -> list[str]:
        return [repos.nth(i).locator("td").first.inner_text().split()[0] for i in range(repos.count())]

    page.click("#repos th[data-key=name]")  # by name: A to Z, then Z to A
    assert names() == ["alpha", "beta"]
    page.click("#repos th[data-key=name]")
    assert names() == ["beta", "alpha"]
    page.locator("#owners tbody tr", has_text="@org/train").click()
    detail = page.locator("#owner-detail").inner_text()
    assert detail.startswith("@org/train: 3 open in 1 file") and "train/run.py" in detail
    assert page.locator("#owner-detail tbody tr").first.inner_text().split() == ["alpha", "2", "1", "3"]
    jobs = page.locator("#jobs tbody tr")
    assert jobs.count() == 3
    assert page.locator("#jobs .tag.fail").count() == 2  # "builds legacy NCCL"
    assert page.locator("#trend").inner_text().startswith("Trend since")
    assert page.locator("#burndown circle").count() == 2
    page.click("#skipped summary")
    assert "missing.json" in page.locator("#skipped").inner_text()
    opened.offline_and_clean()
    data = json.loads(page_file.read_text(encoding="utf-8").split('<script id="data" type="application/json">')[1]
                      .split("</script>")[0])
    assert "fingerprints" not in data["repositories"][0]  # the trend's fingerprints stay in the JSON


@pytest.mark.browser
def test_a_large_fleet_draws_the_first_rows_and_filters_the_rest(fleet: tuple[Path, dict[str, Any]],  # noqa: F811
                                                                 tmp_path: Path, open_page: Any) -> None:
    from ncclx_migrate._report._html import render_page

    folder, _ = fleet
    doc = json.loads(run_ncclx("report", str(folder / "reports"), "--format", "json").stdout)
    alpha = doc["repositories"][0]
    doc["repositories"] = [dict(alpha, name=f"repo-{i:04d}", key=f"k{i}") for i in range(1200)]
    doc["totals"]["repositories"] = 1200
    page_file = tmp_path / "large.html"
    page_file.write_text(render_page(doc), encoding="utf-8")
    page = open_page(page_file).page
    assert page.locator("#repos tbody tr").count() == 1000
    assert page.locator("#repos-count").inner_text() == "the first 1,000 of 1,200 (filter or sort for the others)"
    page.fill("#repos-filter", "repo-1150")
    assert page.locator("#repos tbody tr").count() == 1 and page.locator("#repos-count").inner_text() == "1 of 1,200"


@pytest.mark.browser
def test_owners_fit_with_their_panel_open_and_a_one_day_trend_shows_times(  # issue 37
        fleet: tuple[Path, dict[str, Any]], tmp_path: Path, open_page: Any) -> None:  # noqa: F811
    from ncclx_migrate._report._html import render_page

    folder, _ = fleet
    first = run_ncclx("report", str(folder / "reports"), "--format", "json")
    (tmp_path / "first.json").write_text(first.stdout)
    doc = json.loads(run_ncclx("report", str(folder / "reports"), "--previous", str(tmp_path / "first.json"),
                               "--format", "json").stdout)
    owner = doc["owners"][0]
    big = {"break": 12345, "maybe a break": 23456, "hardening": 34567, "deprecated": 45678}
    doc["owners"] = [dict(owner, owner=f"@bigcorp/distributed-training-infrastructure-team-{i:02d}",
                          findings=123456 - i, severity=big, write=98765, toggles=8765, repositories=1234)
                     for i in range(40)]
    doc["history"] = [dict(doc["history"][0], at="2026-12-03T09:15:00+00:00"),
                      dict(doc["history"][-1], at="2026-12-03T12:09:05+00:00")]
    page_file = tmp_path / "wide.html"
    page_file.write_text(render_page(doc), encoding="utf-8")
    opened = open_page(page_file, width=1400, height=1400)
    page = opened.page
    opened.screenshot(tmp_path, "report-owners-1400.png")
    width, shown = page.evaluate("()=>{const s=document.querySelector('#owners');return [s.scrollWidth,s.clientWidth]}")
    assert width <= shown, (width, shown)  # every column in view, no sideways scroll
    head = page.locator("#owners thead th")
    assert [head.nth(i).inner_text().rstrip(" \u25be") for i in range(head.count())][-2:] == ["repositories", "open"]
    assert page.locator("#owners th").last.is_visible()
    # The panel holds the worst owner at once, without a click.
    assert page.locator("#owner-detail h3").inner_text().startswith(
        "@bigcorp/distributed-training-infrastructure-team-00: 123,456 open")
    ends = page.evaluate("()=>[...document.querySelectorAll('#burndown text')].map(t=>t.textContent)")[-2:]
    assert ends == ["2026-12-03 09:15", "2026-12-03 12:09"], ends
