"""A real browser for the pages' tests: headless Debian Chromium driven by Playwright.

Never downloads a browser (these machines have no network): Playwright launches
``/usr/bin/chromium`` (``NCCLX_CHROMIUM`` overrides).  Where Playwright or Chromium is missing
the browser tests skip with the reason; in CI (``CI=true``) they fail instead, since
scripts/bootstrap.sh installs both there.  ``NCCLX_SCREENSHOT_DIR=docs`` also writes the
screenshots the docs show.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = os.environ.get("NCCLX_CHROMIUM", "/usr/bin/chromium")
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run"]


def _unavailable(reason: str) -> None:
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"browser tests must run in CI: {reason} (scripts/bootstrap.sh installs it)")
    pytest.skip(reason)


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _unavailable("playwright is not installed (pip install -e '.[test]' or scripts/bootstrap.sh)")
    if not Path(CHROMIUM).exists():
        _unavailable(f"{CHROMIUM} is missing (as root: apt-get install chromium; scripts/bootstrap.sh does)")
    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield b
        b.close()


class Opened:
    """A page opened from a file, with every request and script error it caused."""

    def __init__(self, browser: Any, path: Path, width: int = 1400, height: int = 900) -> None:
        self.requests: list[str] = []
        self.errors: list[str] = []
        self.page = browser.new_page(viewport={"width": width, "height": height})
        self.page.on("request", lambda r: self.requests.append(r.url))
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))
        self.page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)
        self.page.on("dialog", lambda d: (self.errors.append(f"dialog: {d.message}"), d.dismiss()))
        self.page.goto(path.resolve().as_uri())
        self.page.wait_for_selector("body[data-rendered='1']", timeout=30_000)

    def offline_and_clean(self) -> None:
        """Nothing but the file itself was requested, and no script error or dialog happened."""
        assert all(u.startswith("file:") for u in self.requests), self.requests
        assert not self.errors, self.errors

    def screenshot(self, tmp_path: Path, name: str) -> Path:
        out = Path(os.environ.get("NCCLX_SCREENSHOT_DIR") or tmp_path) / name
        self.page.screenshot(path=str(out))
        assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        return out

    def close(self) -> None:
        self.page.close()


@pytest.fixture
def open_page(browser: Any) -> Iterator[Any]:
    opened: list[Opened] = []

    def go(path: Path, **kw: int) -> Opened:
        opened.append(Opened(browser, path, **kw))
        return opened[-1]

    yield go
    for o in opened:
        o.close()
