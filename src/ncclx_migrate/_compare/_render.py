"""The text report of ``ncclx compare``: one table per collective, then the findings, wrapped
to the terminal's width as ``ncclx doctor`` wraps (``COLUMNS``, else the terminal, else 80)."""

from __future__ import annotations

import textwrap
from typing import Any

from .._doctor._render import terminal_width
from .._words import count
from ._spec import human_size
from ._verdict import span_text

__all__ = ["render_text"]


def _time(arm: dict[str, Any]) -> str:
    return f"{arm['median_us']:,.1f}" if "median_us" in arm else "-"


def _bw(arm: dict[str, Any]) -> str:
    return f"{arm['busbw_gbps']:.3f}" if "busbw_gbps" in arm else "-"


_MARK = {"regression": "slower", "improvement": "faster", "unconfirmed": "not confirmed", "unclear": "unclear"}


def _versus(row: dict[str, Any]) -> str:
    """B against A: the median ratio, the interval that decided it, and the outcome."""
    if row.get("delta") is None:
        return "-"
    span = row.get("decided_by") or row.get("interval")
    lo_hi = f"{span[0] * 100:+.0f}..{span[1] * 100:+.0f}%" if span else "?"
    mark = _MARK.get(row.get("timing", ""), "")
    return f"{row['delta'] * 100:+.1f}% [{lo_hi}]" + (f" {mark}" if mark else "")


def _say(lines: list[str], text: str, width: int, first: str = "", rest: str = "  ") -> None:
    lines.extend(textwrap.wrap(text, width, initial_indent=first, subsequent_indent=rest,
                               break_long_words=False, break_on_hyphens=False) or [first.rstrip()])


def render_text(report: dict[str, Any], width: int | None = None) -> str:
    width = width or terminal_width()
    arms = report["arms"]
    st = report["settings"]
    a, b = arms[0]["label"], arms[-1]["label"]
    lines: list[str] = []
    _say(lines, f"ncclx compare: {report['world']} ranks on {report['device']}, torch {report['torch'] or '?'}", width)
    for n, arm in enumerate(arms):
        built = f"built {arm['built']}" if arm["built"] else "built nothing"
        env = ", ".join(f"{k}={v}" if v is not None else f"{k} unset" for k, v in arm["env"].items())
        _say(lines, f"arm {arm['label']}{' (baseline)' if n == 0 else ''}: \"{arm['backend']}\""
             + (f" with {env}" if env else "") + f": {built}, ready in {arm.get('startup_s', 0):.1f} s, {arm['seconds']:.1f} s in its blocks", width, "  ", "    ")
    _say(lines, f"{st['rounds']} paired rounds per case, the arms alternating ABBA; per round and arm "
         f"{count(st['block_iters'], 'timed call')} ({count(st['warmup'], 'warm-up call')} first); time = median of the "
         f"mean over ranks, busbw in GB/s; {b} vs {a} = the median ratio of the rounds' block times "
         f"[its interval]", width, "  ", "  ")
    head = ("size", "dtype", f"{a} us", f"{a} busbw", f"{b} us", f"{b} busbw", f"{b} vs {a}", "check")
    coll = None
    table: list[tuple[str, ...]] = []

    def flush() -> None:
        if not table:
            return
        widths = [max(len(r[i]) for r in (head, *table)) for i in range(len(head))]
        for r in (head, *table):
            lines.append("  " + "  ".join(c.rjust(w) if 1 < i < 6 else c.ljust(w)
                                          for i, (c, w) in enumerate(zip(r, widths, strict=True))).rstrip())
        table.clear()

    for row in report["rows"]:
        if row["collective"] != coll:
            flush()
            coll = row["collective"]
            lines.extend(["", coll])
        if "skip" in row:
            table.append((human_size(row["bytes"]), row["dtype"], "-", "-", "-", "-", "", f"skipped: {row['skip']}"))
            continue
        x, y = row["arms"][0], row["arms"][-1]
        checks = [f"{arm['label']}: {arm['check']}" for arm in row["arms"] if arm["check"] != "ok"]
        table.append((human_size(row["bytes"]), row["dtype"], _time(x), _bw(x), _time(y), _bw(y),
                      _versus(row), "; ".join(checks) or "ok"))
    flush()
    lines.append("")
    for note in report["notes"]:
        _say(lines, f"note: {note}", width)
    for text in report["problems"]:
        _say(lines, f"hang: {text}", width)
    for arm in arms:
        if arm["flight_recorder"] and arm["hung"]:
            fr = arm["flight_recorder"]
            lines.append(f"flight recorder of arm {arm['label']} ({fr['folder']}):")
            lines.extend("  " + t for t in str(fr.get("text", fr.get("note", ""))).strip().splitlines())
        for rank, err in arm["init_errors"].items():
            _say(lines, f"arm {arm['label']}: rank {rank} could not start: {err}", width)
    for text in report["mismatch_text"]:
        _say(lines, f"mismatch: {text}", width)
    for text in report["regression_text"]:
        _say(lines, f"slower: {text}", width)
    for text in report.get("improvement_text", []):
        _say(lines, f"faster: {text}", width)
    if report.get("unconfirmed"):
        _say(lines, f"not confirmed: {count(len(report['unconfirmed']), 'case')} looked different in the sweep but "
             "not when measured again: "
             + ", ".join(f"{u['collective']} {human_size(u['bytes'])} {u['dtype']} ({span_text(u['remeasured'])})"
                         for u in report["unconfirmed"]), width)
    sens = report.get("sensitivity", [])
    if sens:
        _say(lines, "could have been detected (a steady slowdown of B this large would have been named in a "
             "typical case): " + ", ".join(
                 f"{x['collective']} {x['detectable']:.0%}" if x["detectable"] is not None
                 else f"{x['collective']} none with {count(x['rounds'], 'round')}" for x in sens), width)
    _say(lines, f"result: {report['verdict']}", width)
    return "\n".join(lines)
