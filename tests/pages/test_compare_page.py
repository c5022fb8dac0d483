"""``ncclx compare --html``: one busbw plot per collective, both arms, in Chromium."""

from __future__ import annotations

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
    first = plots.nth(0)
    assert first.locator("polyline.a").count() == 1 and first.locator("polyline.b").count() == 1
    assert first.locator("circle.pt").count() == 4  # 2 sizes x 2 arms
    assert first.locator("line.bar").count() == 4  # each point's 95% interval
    assert first.locator("p.det").inner_text().startswith("could not detect a slowdown of B smaller than ")
    first.locator("circle.b.pt").first.hover()  # B is drawn over A
    tip = page.locator("#tip").inner_text()
    assert tip.startswith("all_reduce_sum 64B fp32: A ") and "; B vs A " in tip and "% to " in tip
    page.locator(".chips button[data-t='int32']").click()
    assert page.locator(".chips button.on").inner_text() == "int32"
    opened.screenshot(tmp_path, "compare-page.png")
    opened.offline_and_clean()
