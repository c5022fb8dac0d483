"""``ncclx compare --html``: one busbw plot per collective, both arms, in Chromium."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from ..compare.test_collectives import HEAVY, parity  # noqa: F401  (the shared gloo-against-gloo run)

pytestmark = [pytest.mark.browser, *HEAVY]


def test_compare_page_plots_both_arms_per_collective(parity: dict[str, Any], open_page: Any,  # noqa: F811
                                                     tmp_path: Path) -> None:
    assert parity["rc"] == 0
    opened = open_page(Path(parity["page"]))
    page = opened.page
    assert page.locator("#verdict").inner_text().startswith("the arms agree: 42 cases")
    plots = page.locator("section.plot")
    assert plots.count() == 7
    assert [plots.nth(i).get_attribute("data-collective") for i in range(7)] == [
        "all_reduce_sum", "all_reduce_max", "all_gather", "reduce_scatter", "all_to_all", "broadcast", "sendrecv"]
    # The text's "could have been detected: all_reduce_sum N%, ..." is what each plot's heading says.
    said = " ".join(parity["out"][parity["out"].index("could have been detected"):].split())
    detected = dict(re.findall(r"(\w+) (\d+)%", said[:said.index("result: ")]))
    for i in range(7):  # per collective: both arms, each point with its interval, the detectable size
        plot = plots.nth(i)
        assert plot.locator("polyline.a").count() == 1 and plot.locator("polyline.b").count() == 1
        assert plot.locator("circle.a.pt").count() == 2 and plot.locator("circle.b.pt").count() == 2  # 2 sizes
        assert plot.locator("line.bar.a").count() == 2 and plot.locator("line.bar.b").count() == 2
        det = re.fullmatch(r"could not detect a slowdown of B smaller than (\d+)% here", plot.locator("p.det").inner_text())
        assert det, plot.locator("p.det").inner_text()
        assert abs(int(det.group(1)) - int(detected[str(plot.get_attribute("data-collective"))])) <= 1
    first = plots.nth(0)
    first.locator("circle.b.pt").first.hover()  # B is drawn over A
    tip = page.locator("#tip").inner_text()
    # Both arms' time and busbw with its 95% interval, then B against A with its interval.
    number = r"[0-9.]+"
    arm = rf"{number} us, {number} GB/s \({number} to {number}\) \(ok\)"
    assert re.fullmatch(rf"all_reduce_sum 64B fp32: A {arm}; B {arm}; B vs A -?{number}% \[-?\d+% to -?\d+%\]",
                        tip), tip
    page.locator(".chips button[data-t='int32']").click()
    assert page.locator(".chips button.on").inner_text() == "int32"
    opened.screenshot(tmp_path, "compare-page.png")
    opened.offline_and_clean()
