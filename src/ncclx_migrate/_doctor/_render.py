"""Human output: one line per check with its mark and finding, then ``fix:`` with the remedy."""

from __future__ import annotations

import os
import sys
from typing import TextIO

from ._model import Report, Status

__all__ = ["render", "use_color"]

_MARK = {
    Status.OK: ("ok", "32"),
    Status.WARN: ("warn", "33"),
    Status.FAIL: ("FAIL", "31;1"),
    Status.SKIP: ("skip", "2"),
    Status.ERROR: ("ERROR", "35;1"),
}


def use_color(stream: TextIO | None = None) -> bool:
    """Colour only on a terminal, never with NO_COLOR (https://no-color.org) or TERM=dumb."""
    stream = stream or sys.stdout
    if os.environ.get("NO_COLOR") or os.environ.get("TERM") == "dumb":
        return False
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def _paint(text: str, code: str, color: bool) -> str:
    return f"\x1b[{code}m{text}\x1b[0m" if color else text


def render(report: Report, color: bool = False) -> str:
    width = max((len(c.id) for c in report.checks), default=10)
    rank = f", rank {report.rank}" if report.rank is not None else ""
    lines = [
        f"ncclx doctor: level {report.level}, host {report.host}{rank}, "
        f"torch {report.torch or 'not installed'}"
    ]
    for c in report.checks:
        mark, code = _MARK[c.status]
        lines.append(f"  {_paint(mark.ljust(5), code, color)} {c.id.ljust(width)}  {c.message}")
        if c.remedy and c.status in (Status.WARN, Status.FAIL, Status.ERROR):
            lines.append(f"  {' ' * 5} {' ' * width}  fix: {c.remedy}")
    s = report.summary()
    tail = ", ".join(f"{s[k.value]} {k.value}" for k in Status)
    verdict = "FAIL" if s["fail"] or s["error"] else "WARN" if s["warn"] else "OK"
    code = {"FAIL": "31;1", "WARN": "33", "OK": "32"}[verdict]
    lines.append(f"{_paint(verdict, code, color)}: {tail}")
    return "\n".join(lines)
