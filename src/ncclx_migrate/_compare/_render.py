"""The text report of ``ncclx compare``: one table per collective, then the findings."""

from __future__ import annotations

from typing import Any

from .._words import count
from ._spec import human_size

__all__ = ["render_text"]


def _time(arm: dict[str, Any]) -> str:
    if "median_us" not in arm:
        return "-"
    return f"{arm['median_us']:,.1f} ±{arm['spread'] / 2:.0%}"


def _bw(arm: dict[str, Any]) -> str:
    return f"{arm['busbw_gbps']:.3f}" if "busbw_gbps" in arm else "-"


def render_text(report: dict[str, Any]) -> str:
    arms = report["arms"]
    st = report["settings"]
    a, b = arms[0]["label"], arms[-1]["label"]
    lines = [f"ncclx compare: {report['world']} ranks on {report['device']}, torch {report['torch'] or '?'}"]
    for n, arm in enumerate(arms):
        built = f"built {arm['built']}" if arm["built"] else "built nothing"
        env = ", ".join(f"{k}={v}" if v is not None else f"{k} unset" for k, v in arm["env"].items())
        lines.append(f"  arm {arm['label']}{' (baseline)' if n == 0 else ''}: \"{arm['backend']}\""
                     + (f" with {env}" if env else "") + f": {built}, {arm['seconds']:.1f} s")
    lines.append(f"  {st['warmup']} warm-up and {st['iters']} timed iterations per case; time = median over "
                 "iterations of the mean over ranks (± half the interquartile range), busbw in GB/s")
    head = ("size", "dtype", f"{a} time us", f"{a} busbw", f"{b} time us", f"{b} busbw", f"{b} vs {a}", "check")
    coll = None
    table: list[tuple[str, ...]] = []

    def flush() -> None:
        if not table:
            return
        widths = [max(len(r[i]) for r in (head, *table)) for i in range(len(head))]
        for r in (head, *table):
            lines.append("  " + "  ".join(c.rjust(w) if 1 < i < 7 else c.ljust(w)
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
        delta = row.get("delta")
        mark = {"regression": " slower", "improvement": " faster", "unreadable": " noise?"}.get(row.get("timing", ""), "")
        checks = [f"{arm['label']}: {arm['check']}" for arm in row["arms"] if arm["check"] != "ok"]
        table.append((human_size(row["bytes"]), row["dtype"], _time(x), _bw(x), _time(y), _bw(y),
                      (f"{delta:+.1%}" + mark) if delta is not None else "-", "; ".join(checks) or "ok"))
    flush()
    lines.append("")
    for note in report["notes"]:
        lines.append(f"note: {note}")
    for text in report["problems"]:
        lines.append(f"hang: {text}")
    for arm in arms:
        if arm["flight_recorder"] and arm["hung"]:
            fr = arm["flight_recorder"]
            lines.append(f"flight recorder of arm {arm['label']} ({fr['folder']}):")
            lines.extend("  " + t for t in str(fr.get("text", fr.get("note", ""))).strip().splitlines())
        for rank, err in arm["init_errors"].items():
            lines.append(f"arm {arm['label']}: rank {rank} could not start: {err}")
    for text in report["mismatch_text"]:
        lines.append(f"mismatch: {text}")
    for text in report["regression_text"]:
        lines.append(f"regression: {text}")
    if report["improvements"]:
        lines.append(f"faster: {count(len(report['improvements']), 'case')} where {b} beats {a} beyond the threshold")
    if report["unreadable"]:
        worst = max(u["spread"] for u in report["unreadable"])
        lines.append(f"unreadable: {count(len(report['unreadable']), 'case')} differ by more than the threshold, but the "
                     f"arms' spreads overlap (up to {worst:.0%}): raise --iters or quiet the node to tell")
    lines.append(f"result: {report['verdict']}")
    return "\n".join(lines)
