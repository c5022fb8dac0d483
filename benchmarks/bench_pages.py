"""Size and render time of the HTML pages (`ncclx fr analyze --html`, `ncclx doctor merge --html`).

    python benchmarks/bench_pages.py [--ranks 1024,4096,16384]

For each rank count: the flight-recorder page of a job where one rank never entered the last
collective and two left no dump (per_rank with 5 entries of 4 frames per rank, as the analyzer
reports it; again with every rank's frames naming files of their own, so nothing is shared), and the doctor page of as many per-rank reports (one real `doctor --level static`
report, one host with an old NCCL, one rank with a deprecated variable).  Prints a markdown
table: page size, Python render time, and Chromium's time from opening the file to the page
drawn (headless Debian chromium through Playwright; skipped without them), then from a click
on the culprit's row (the doctor page: the first row) to its entries shown, pinned.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "src"))

from ncclx_migrate._doctor import _html as doctor_html  # noqa: E402
from ncclx_migrate._doctor._merge import Source, merge_reports  # noqa: E402
from ncclx_migrate._doctor._model import Report  # noqa: E402
from ncclx_migrate._fr import _html as fr_html  # noqa: E402
from tests.pages import synthetic  # noqa: E402
from tests.pages.conftest import ARGS, CHROMIUM  # noqa: E402


def _doctor_sources(ranks: int) -> list[Source]:
    out = subprocess.run([sys.executable, "-m", "ncclx_migrate", "doctor", "--level", "static", "--json"],
                         capture_output=True, text=True, env={"PYTHONPATH": str(ROOT / "src"), "NO_COLOR": "1"})
    return [Source(Report.from_json(rep), "") for rep in synthetic.doctor_fleet(json.loads(out.stdout), ranks)]


def _job(n: int) -> tuple[int, tuple[int, int]]:
    """The culprit and the two ranks that left no dump: three distinct members for any n >= 3.

    The rows are ordered by first rank, so which row is the culprit's depends on n: the
    benchmark clicks the row marked culprit, never a row by position (a no-dump row has no
    entries to show).
    """
    culprit = n * 2 // 3
    low, high = [r for r in range(n) if r != culprit][-2:]
    return culprit, (low, high)


def _browser_times(browser: Any, path: Path, click: str, shown: list[str]) -> tuple[float, float]:
    """Seconds from opening the file to drawn, and from a click on ``click`` to every ``shown``."""
    page = browser.new_page(viewport={"width": 1400, "height": 900})
    start = time.perf_counter()
    page.goto(path.as_uri())
    page.wait_for_selector("body[data-rendered='1']", timeout=60_000)
    drawn = time.perf_counter() - start
    start = time.perf_counter()
    page.locator(click).first.click()
    for selector in shown:
        page.wait_for_selector(selector, timeout=60_000)
    clicked = time.perf_counter() - start
    page.close()
    return drawn, clicked


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--ranks", default="1024,4096,16384")
    args = ap.parse_args()
    counts = [int(x) for x in args.ranks.split(",")]
    if min(counts) < 3:
        ap.error("--ranks: at least 3 (a culprit and two ranks without a dump)")
    browser: Any = None
    pw: Any = None
    try:
        from playwright.sync_api import sync_playwright

        if Path(CHROMIUM).exists():
            pw = sync_playwright().start()
            browser = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS)
    except ImportError:
        pass
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for n in counts:
            culprit, no_dump = _job(n)
            click = "#grid-0 .row:has(text.culprit)"
            entries_shown = [f'#detail-0 h3.rank-title:text-is("rank {culprit}: last entries")', "#detail-0 table"]
            report = synthetic.report(n, culprit=culprit, no_dump=no_dump)
            start = time.perf_counter()
            text = fr_html.render_page(report)
            py = time.perf_counter() - start
            path = Path(tmp) / f"fr{n}.html"
            path.write_text(text, encoding="utf-8")
            times = _browser_times(browser, path, click, entries_shown) if browser else None
            rows.append(("fr analyze", n, len(text.encode()), py, times))
            report = synthetic.report(n, culprit=culprit, unique_frames=True)
            start = time.perf_counter()
            text = fr_html.render_page(report)
            py = time.perf_counter() - start
            path.write_text(text, encoding="utf-8")
            times = _browser_times(browser, path, click, entries_shown) if browser else None
            rows.append(("fr analyze, no frame shared", n, len(text.encode()), py, times))

            sources = _doctor_sources(n)
            merged = merge_reports(sources)
            start = time.perf_counter()
            text = doctor_html.render_page(sources, merged)
            py = time.perf_counter() - start
            path = Path(tmp) / f"doctor{n}.html"
            path.write_text(text, encoding="utf-8")
            times = _browser_times(browser, path, "#grid-0 .row", ["#detail-0 table"]) if browser else None
            rows.append(("doctor merge", n, len(text.encode()), py, times))
    if browser:
        browser.close()
        pw.stop()
    print("| page | ranks | size | Python render | Chromium: open to drawn | click to entries shown |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, n, size, py, times in rows:
        shown = (f"{times[0]:.2f} s", f"{times[1] * 1000:.0f} ms") if times else ("no browser", "")
        print(f"| {name} | {n:,} | {size / 1024:,.0f} KiB | {py:.2f} s | {shown[0]} | {shown[1]} |")


if __name__ == "__main__":
    main()
