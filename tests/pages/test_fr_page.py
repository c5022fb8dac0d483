"""``ncclx fr analyze --html``: one self-contained page of where every rank stopped."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ncclx_migrate._fr._html import render_page, write_page

from ..conftest import run_ncclx
from ..report.test_other_machines_text import EVIL, RAW, SHOWN
from . import synthetic

browser = pytest.mark.browser


def test_html_option_writes_a_page_and_leaves_the_report_unchanged(tmp_path: Path) -> None:
    dumps = synthetic.write_dumps(tmp_path / "dumps", world=4, culprit=2, entries=3)
    plain = run_ncclx("fr", "analyze", str(dumps))
    page = tmp_path / "hang.html"
    res = run_ncclx("fr", "analyze", str(dumps), "--html", str(page))
    assert res.returncode == plain.returncode == 1
    assert res.stdout == plain.stdout
    assert f"wrote {page}" in res.stderr
    text = page.read_text(encoding="utf-8")
    assert "Culprit: rank 2" in text
    assert "rank 2 never entered broadcast #3 of group default_pg; ranks 0, 1 and 3 waited" in text
    # Self-contained: no external stylesheet, script, image or font.
    assert "<link" not in text and " src=" not in text and "url(http" not in text
    assert "default-src 'none'" in text
    # With --json too, stdout stays exactly one JSON document.
    both = run_ncclx("fr", "analyze", str(dumps), "--json", "--html", str(tmp_path / "b.html"))
    assert json.loads(both.stdout)["groups"][0]["culprit_ranks"] == [2]


def test_html_path_that_cannot_be_written_is_one_line(tmp_path: Path) -> None:
    dumps = synthetic.write_dumps(tmp_path / "dumps", world=2, culprit=1, entries=2)
    bad = tmp_path / "no-such-dir" / "page.html"
    res = run_ncclx("fr", "analyze", str(dumps), "--html", str(bad))
    assert res.returncode == 2
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and str(bad) in lines[0] and "cannot write the page" in lines[0], res.stderr
    assert "Traceback" not in res.stderr


def test_a_1024_rank_page_is_small_and_collapses_ranks_into_ranges() -> None:
    text = render_page(synthetic.report(1024, culprit=700, no_dump=(1000, 1001)))
    assert len(text.encode()) < 5 * 1024 * 1024
    data = json.loads(text.split('<script id="data" type="application/json">')[1].split("</script>")[0])
    labels = [r["label"] for r in data["groups"][0]["rows"]]
    assert labels == [
        "ranks 0-699, 701-999, 1002-1023 (1,021 ranks) · started",
        "rank 700 · never-entered",
        "ranks 1000-1001 · no-dump",
    ]
    assert [r["flag"] for r in data["groups"][0]["rows"]] == [0, 1, 0]
    assert len(data["groups"][0]["ranks"]) == 1024  # every rank is still findable
    # Nothing shared between ranks (every frame names a file of its own): still under 5 MB.
    assert len(render_page(synthetic.report(1024, culprit=700, unique_frames=True)).encode()) < 5 * 1024 * 1024


def _hostile_report() -> dict[str, Any]:
    report = synthetic.report(4, culprit=1)
    evil = "</script><script>alert('x')</script><img src=x onerror=alert(1)>" + EVIL
    report["groups"][0]["group"] = evil
    report["groups"][0]["per_rank"]["0"]["last_entries"][0]["frames"][1]["name"] = evil  # a user frame: shown
    return report


def test_text_from_dumps_cannot_inject_markup_or_script(tmp_path: Path) -> None:
    text = render_page(_hostile_report())
    assert "<script>alert" not in text and "<img src=x" not in text
    for raw in RAW:  # (issue 37 §6: no control character in the page as written, C1 included)
        assert raw not in text, raw


@browser
def test_page_shows_verdict_and_culprit_and_a_click_shows_a_ranks_entries(
    tmp_path: Path, open_page: Any
) -> None:
    page_file = tmp_path / "hang.html"
    write_page(page_file, synthetic.report(1024, culprit=700, no_dump=(1000, 1001)))
    opened = open_page(page_file)
    page = opened.page
    verdict = page.locator("#verdict")
    assert verdict.is_visible()
    assert "Culprit: rank 700" in verdict.inner_text()
    assert "rank 700 never entered" in verdict.inner_text()
    culprit_row = page.locator("#grid-0 .row", has=page.locator("text.culprit"))
    assert culprit_row.count() == 1 and culprit_row.is_visible()
    assert "rank 700" in culprit_row.text_content()
    detail = page.locator("#detail-0")
    # A rank of a collapsed range: pick it by number.
    page.fill("#find-0 input", "5")
    page.click("#find-0 button")
    assert "rank 5: last entries" in detail.inner_text()
    assert "#2000" in detail.locator("tbody tr").first.inner_text()
    assert "started" in detail.locator("tbody tr").first.inner_text()
    culprit_row.click()
    assert "rank 700: last entries" in detail.inner_text()
    assert "culprit" in detail.inner_text() and "never-entered" in detail.inner_text()
    rows = detail.locator("tbody tr")
    assert rows.count() == 5
    first = rows.first.inner_text()  # newest first: the culprit's last completed collective
    assert "#1999" in first and "broadcast" in first and "completed" in first
    assert "[[1024, 4096]]" in first and "Float" in first and "_step_3 at /job/train.py:43" in first
    opened.screenshot(tmp_path, "flight-recorder-page.png")
    opened.offline_and_clean()


@browser
def test_1024_dumps_from_the_cli_render_in_the_browser(tmp_path: Path, open_page: Any) -> None:
    dumps = synthetic.write_dumps(tmp_path / "dumps", world=1024, culprit=700, entries=3)
    page_file = tmp_path / "hang.html"
    res = run_ncclx("fr", "analyze", str(dumps), "--html", str(page_file))
    assert res.returncode == 1, res.stderr
    assert page_file.stat().st_size < 5 * 1024 * 1024
    opened = open_page(page_file)
    page = opened.page
    assert "Culprit: rank 700" in page.locator("#verdict").inner_text()
    assert page.locator("#grid-0 .row").count() == 2  # 1,023 ranks that waited, and the culprit
    assert "1,023 ranks" in page.locator("#grid-0 .row").first.text_content()
    page.locator("#grid-0 .row").nth(1).click()
    assert "rank 700" in page.locator("#detail-0").inner_text()
    opened.offline_and_clean()


@browser
def test_a_click_shows_entries_from_real_dump_files(tmp_path: Path, open_page: Any) -> None:
    dumps = synthetic.write_dumps(tmp_path / "dumps", world=8, culprit=3, entries=4)
    report = json.loads(run_ncclx("fr", "analyze", str(dumps), "--json").stdout)
    if "per_rank" not in report["groups"][0]:
        pytest.skip("this analyzer's report has no per_rank (docs/flight-recorder.md); the page draws without entries")
    page_file = tmp_path / "hang.html"
    run_ncclx("fr", "analyze", str(dumps), "--html", str(page_file))
    opened = open_page(page_file)
    page = opened.page
    page.locator("#grid-0 .row").first.focus()
    page.keyboard.press("Enter")  # rows work from the keyboard too
    detail = page.locator("#detail-0")
    assert "rank 0: last entries" in detail.inner_text()
    newest = detail.locator("tbody tr").first.inner_text()
    assert "#4" in newest and "all_reduce" in newest and "started" in newest
    assert "[[1024, 4096]]" in newest and "_step_0 at /job/train.py:40" in newest
    page.locator("#grid-0 .row", has=page.locator("text.culprit")).click()
    assert "rank 3: last entries" in detail.inner_text()
    assert "#3" in detail.locator("tbody tr").first.inner_text()
    opened.offline_and_clean()


@browser
def test_hostile_text_stays_text_in_the_browser(tmp_path: Path, open_page: Any) -> None:
    page_file = tmp_path / "evil.html"
    write_page(page_file, _hostile_report())
    opened = open_page(page_file)
    opened.page.locator("#grid-0 .row").first.click()
    detail = opened.page.locator("#detail-0").inner_text()
    assert "</script><script>alert('x')</script>" in detail
    assert SHOWN in detail and not any(raw in detail for raw in RAW)  # shown as repr writes it
    opened.offline_and_clean()  # no dialog opened, no request for "x"


def test_rows_past_the_cap_are_summed_up_and_the_culprit_row_is_kept() -> None:
    report = synthetic.report(1000, culprit=999)
    for r, info in report["groups"][0]["per_rank"].items():
        if r != "999":  # every other rank stopped somewhere of its own: 999 distinct rows
            info["last_completed"] = info["last_enqueued"] = 1000 + int(r)
            info["state"] = "completed"
    text = render_page(report)
    data = json.loads(text.split('<script id="data" type="application/json">')[1].split("</script>")[0])
    rows = data["groups"][0]["rows"]
    assert len(rows) == 400 and data["groups"][0]["hidden"] == 600
    assert rows[-1]["label"] == "rank 999 · never-entered" and rows[-1]["flag"] == 1
    assert "600 more rows not drawn" in text
    assert len(data["groups"][0]["ranks"]) == 1000


def test_no_column_for_a_collective_no_rank_reached() -> None:
    report = synthetic.report(8, culprit=3)
    data = json.loads(render_page(report).split('<script id="data" type="application/json">')[1].split("</script>")[0])
    reached = max(int(v["last_enqueued"] or 0) for v in report["groups"][0]["per_rank"].values())
    assert data["groups"][0]["cols"][-1]["label"].split()[0] == f"#{reached}"
    assert all("ne" not in {row["cells"][-1]} or row["flag"] for row in data["groups"][0]["rows"])


@browser
def test_the_verdict_once_and_stacks_that_break_between_frames_not_inside_a_line_number(
    tmp_path: Path, open_page: Any
) -> None:
    page_file = tmp_path / "hang.html"
    write_page(page_file, synthetic.report(8, culprit=3))
    opened = open_page(page_file, width=760)  # narrow: the stack column wraps
    page = opened.page
    body = page.locator("body").inner_text()
    assert body.count("rank 3 never entered") == 1, body  # the verdict, not repeated by its only group
    page.locator("#grid-0 .row").first.click()
    locs = page.locator("#detail-0 td.stack .loc")
    assert locs.count() >= 3
    for i in range(locs.count()):
        loc = locs.nth(i)
        assert loc.evaluate("e => e.getClientRects().length") == 1, loc.inner_text()  # one line box
        assert loc.evaluate("e => /^[^\\/\\s]*:\\d+$/.test(e.textContent)"), loc.inner_text()
    assert "_step_0 at /job/train.py:40\n" in page.locator("#detail-0 td.stack").first.inner_text()
    opened.offline_and_clean()
