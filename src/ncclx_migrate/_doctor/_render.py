"""Human output, flutter-doctor style: one line per check, then one bullet per problem with its fix.

Wrapped to the terminal width (``COLUMNS``, else the terminal's size, else 80).  :class:`Progress`
prints the same text check by check as the checks complete; on a terminal it also keeps one
transient status line ("probe: 2 ranks, all_reduce...") for the slow steps.
"""

from __future__ import annotations

import os
import re
import sys
import textwrap
from collections.abc import Sequence
from typing import Any, TextIO

from .._shown import shown
from ._merge import EVERYONE_RE
from ._model import CheckResult, Report, Status

__all__ = ["Progress", "render", "terminal_width"]

_MARK = {
    Status.OK: ("ok", "32"),
    Status.WARN: ("warn", "33"),
    Status.FAIL: ("FAIL", "31;1"),
    Status.SKIP: ("skip", "2"),
    Status.ERROR: ("ERROR", "35;1"),
}
_BAD = (Status.WARN, Status.FAIL, Status.ERROR)
_ID_WIDTH = 19  # the longest check id (cluster-consistency), so streamed lines align
MIN_WIDTH = 40
MAX_GROUPS = 8  # bullets per merged check before the rest is counted


def terminal_width(stream: TextIO | None = None) -> int:
    """``COLUMNS`` when it is a positive integer, else the terminal's width, else 80."""
    raw = os.environ.get("COLUMNS", "").strip()
    if raw.isdigit() and int(raw) > 0:
        return max(int(raw), MIN_WIDTH)
    stream = stream or sys.stdout
    try:
        if stream.isatty():
            columns = os.get_terminal_size(stream.fileno()).columns
            if columns > 0:  # a pseudo-terminal nobody sized reports 0
                return max(columns, MIN_WIDTH)
    except (AttributeError, ValueError, OSError):
        pass
    return 80


def _paint(text: str, code: str, color: bool) -> str:
    return f"\x1b[{code}m{text}\x1b[0m" if color else text


def _wrap(text: str, width: int, first: str, rest: str) -> list[str]:
    # Messages carry other ranks' and hosts' text (hostnames, env values): shown, never sent.
    return textwrap.wrap(shown(text), width, initial_indent=first, subsequent_indent=rest,
                         break_long_words=False, break_on_hyphens=False) or [first.rstrip()]


def _problems(c: CheckResult) -> list[tuple[str, str]]:
    """(finding, fix) per problem: a merged check's groups, a check's own list, or its message."""
    groups = c.details.get("groups")
    if isinstance(groups, list) and len(groups) > 1 and all(isinstance(g, dict) for g in groups):
        # Odd ones out first: the smallest groups, then by severity.
        order = ["error", "fail", "warn", "ok", "skip"]

        def key(g: dict[str, Any]) -> tuple[int, int]:
            status = g.get("status")
            return int(g.get("count") or 0), order.index(status) if status in order else len(order)

        ordered = sorted(groups, key=key)
        shown = ordered if len(ordered) <= MAX_GROUPS else ordered[:MAX_GROUPS - 1]
        out = [(f"{g.get('label') or g.get('who')}: {g.get('status')}: {g.get('message')}",
                str(g.get("remedy") or "") if g.get("status") in ("warn", "fail", "error") else "")
               for g in shown]
        rest = ordered[len(shown):]
        if rest:  # results that differ rank by rank: stay one screen, the JSON has them all
            n = sum(int(g.get("count") or 0) for g in rest)
            out.append((f"{len(rest)} more distinct results on {n} more ranks/reports (--format json lists them)", ""))
        return out
    listed = c.details.get("problems")
    if isinstance(listed, list) and listed and all(isinstance(p, dict) for p in listed):
        return [(str(p.get("message", "")), str(p.get("remedy") or "")) for p in listed if _is_problem(p)]
    return [(c.message, c.remedy)]


def _is_problem(p: dict[str, Any]) -> bool:
    """A listed item that is a problem; one with status "ok" is information (see _notes)."""
    return p.get("status") in (None, "warn", "fail", "error")


def _notes(c: CheckResult) -> list[str]:
    """A check's informational items ("NCCL settings: ..."): shown under its problems, never as one."""
    listed = c.details.get("problems")
    if not isinstance(listed, list) or not all(isinstance(p, dict) for p in listed):
        return []
    return [str(p.get("message", "")) for p in listed if not _is_problem(p)]


def _title(check_id: str) -> str:
    from .checks import by_id

    check = by_id(check_id)
    return check.title if check else ""


def header_text(report: Report) -> str:
    rank = f", rank {report.rank}" if report.rank is not None else ""
    return (f"ncclx doctor: level {report.level}, host {shown(report.host)}{rank}, "
            f"torch {shown(report.torch or 'not installed')}")


def header_lines(report: Report, width: int) -> list[str]:
    from ._facts import BEFORE_TORCH_WHY

    judged = report.backend or report.backend_why == BEFORE_TORCH_WHY
    return [header_text(report)] + (_wrap(backend_text(report), width, "", "  ") if judged else [])


def backend_text(report: Report) -> str:
    """Which backend the checks judged and why; on a node without a GPU, how to judge the GPU job."""
    from ._facts import NO_GPU_WHY

    if report.backend is None:
        return report.backend_why
    if report.backend_why == NO_GPU_WHY:
        return (f"judged as a {report.backend} job: this node has no GPU (see gpu-binding); "
                "judge the GPU job with --backend nccl")
    return f"judged as a {report.backend} job: {report.backend_why}"


def check_lines(c: CheckResult, width: int, color: bool = False) -> list[str]:
    mark, code = _MARK[c.status]
    lead = f"  {mark.ljust(5)} {shown(c.id).ljust(_ID_WIDTH)}  "
    # Messages start in the column after the id; on a narrow terminal under the mark instead.
    col = " " * (len(lead) if len(lead) <= width // 2 else 8)
    problems = _problems(c)
    groups = c.details.get("groups")
    grouped = isinstance(groups, list) and len(groups) > 1  # a merged check whose inputs differ
    if not grouped and (c.status not in _BAD or (len(problems) == 1 and not problems[0][1])):
        out = _wrap(c.message, width, lead, col)
    else:
        title = _title(c.id)
        # A merged check that is the same everywhere says so once, on its heading.
        everyone = re.search(EVERYONE_RE, c.message)
        if everyone and not any(everyone.group(0) in finding for finding, _ in problems):
            title += everyone.group(0)
        out = _wrap(title, width, lead, col)
        for n, (finding, fix) in enumerate(problems):
            out += _wrap(finding, width, "        - ", " " * 10)
            # A fix shared by the problems that follow is printed once, under the last of them.
            if fix and not any(later == fix for _, later in problems[n + 1:]):
                out += _wrap(fix, width, "          fix: ", " " * 15)
        for note in _notes(c):
            out += _wrap(note, width, "        note: ", " " * 14)
    if color:
        out[0] = f"  {_paint(mark.ljust(5), code, color)}{out[0][7:]}"
    return out


def summary_text(report: Report, color: bool = False) -> str:
    s = report.summary()
    tail = ", ".join(f"{s[k.value]} {k.value}" for k in Status if s[k.value])  # no "0 fail"
    verdict = "FAIL" if s["fail"] or s["error"] else "WARN" if s["warn"] else "OK"
    code = {"FAIL": "31;1", "WARN": "33", "OK": "32"}[verdict]
    return f"{_paint(verdict, code, color)}: {tail}"


def render(report: Report, color: bool = False, width: int = 80) -> str:
    lines = header_lines(report, width)
    for c in report.checks:
        lines += check_lines(c, width, color)
    lines.append(summary_text(report, color))
    return "\n".join(lines)


class Progress:
    """Streams the report to ``stream`` as the checks complete.

    ``live`` (a terminal, text output): a transient status line names the step under way;
    it is erased before the next real line, so a pipe or a log sees only the report.
    """

    def __init__(self, stream: TextIO, color: bool, width: int, live: bool) -> None:
        self.stream, self.color, self.width, self.live = stream, color, width, live
        self._shown = 0  # length of the status line on screen

    def _write(self, text: str) -> None:
        self.stream.write(text)
        self.stream.flush()

    def _clear(self) -> None:
        if self._shown:
            # Without colour (NO_COLOR, TERM=dumb) no escape sequence either: blank it out.
            self._write("\r\x1b[K" if self.color else "\r" + " " * self._shown + "\r")
            self._shown = 0

    def status(self, text: str) -> None:
        if not self.live:
            return
        self._clear()
        text = shown(text)[: self.width - 1]
        self._write(text)
        self._shown = len(text)

    def lines(self, lines: Sequence[str]) -> None:
        self._clear()
        if lines:
            self._write("\n".join(lines) + "\n")

    def header(self, report: Report) -> None:
        self.lines(header_lines(report, self.width))

    def check(self, c: CheckResult) -> None:
        self.lines(check_lines(c, self.width, self.color))

    def summary(self, report: Report) -> None:
        self.lines([summary_text(report, self.color)])

    def done(self) -> None:
        self._clear()


