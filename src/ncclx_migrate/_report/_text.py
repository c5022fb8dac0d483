"""The roll-up on a terminal: one screen, the worst first; the JSON and the page hold it all."""

from __future__ import annotations

from typing import Any

from .._migrate._rule_table import SEVERITIES
from .._shown import shown, shown_lines
from .._words import count, verb

__all__ = ["render_text"]

TOP = 10  # rows per table on a terminal


def _names(names: list[str], limit: int = 5) -> str:
    # Names come from other repositories' and jobs' reports: shown, never sent to the terminal.
    text = ", ".join(shown(n) for n in names[:limit])
    return text + (f" and {len(names) - limit:,} more" if len(names) > limit else "")


def render_text(doc: dict[str, Any]) -> str:
    t = doc["totals"]
    sev = t["severity"]
    out = [f"ncclx report: {count(t['repositories'], 'repository', 'repositories')} "
           f"({count(t['findings'], 'open finding')}), {count(t['jobs'], 'job')}"]
    if t["repositories"]:
        out.append("  " + ", ".join(f"{s} {sev[s]:,}" for s in SEVERITIES))
        out.append(f"  fixable: {t['write']:,} with --write, {t['unsafe']:,} more with --unsafe-fixes; "
                   f"{count(t['cpp'], 'C++ finding')}")
    rb = doc["rollback"]
    out.append("")
    out.append("Before the rollback goes (torch 2.16):")
    lines = []
    if rb["toggles"]:
        lines.append(f"{count(rb['toggles'], 'rollback toggle')} still set in "
                     f"{count(len(rb['repositories_with_toggles']), 'repository', 'repositories')}: "
                     f"{_names(rb['repositories_with_toggles'])}")
    if rb["breaks"]:
        lines.append(f"{count(rb['breaks'], 'break')} in "
                     f"{count(len(rb['repositories_with_breaks']), 'repository', 'repositories')}")
    if rb["jobs_legacy"]:
        n = len(rb["jobs_legacy"])
        lines.append(f"{count(n, 'job')} still {verb(n, 'builds', 'build')} legacy NCCL: {_names(rb['jobs_legacy'])}")
    if rb["legacy_extensions"]:
        lines.append(f"extensions built for legacy only: {_names(rb['legacy_extensions'])}")
    out += [f"  {line}" for line in lines] or ["  nothing: no toggle, no break, no job on legacy NCCL"]
    away = doc["one_write_away"]
    if away:
        out.append(f"  one `ncclx migrate --write` from clean: {count(len(away), 'repository', 'repositories')} "
                   f"({_names(away)})")
    trend = doc.get("trend")
    if trend:
        since = f" since {shown(trend['previous'])}" if trend.get("previous") else ""
        before = trend.get("findings_before")
        move = f" (open: {before:,} -> {t['findings']:,})" if isinstance(before, int) else ""
        out.append("")
        out.append(f"Trend{since}: {trend['fixed']:,} fixed, {trend['new']:,} new{move}")
        if trend["repositories_not_reported"]:
            out.append(f"  not reported this time: {_names(trend['repositories_not_reported'])}")
    repos = [r for r in doc["repositories"] if r["findings"] or r["errors"]]
    if repos:
        out.append("")
        out.append(f"{'Repository':<32} {'break':>7} {'maybe':>7} {'harden':>7} {'deprec':>7} "
                   f"{'--write':>7} {'toggles':>7}")
        for r in repos[:TOP]:
            s = r["severity"]
            out.append(f"{shown(r['name'])[:32]:<32} {s['break']:>7,} {s['maybe a break']:>7,} {s['hardening']:>7,} "
                       f"{s['deprecated']:>7,} {r['write']:>7,} {r['toggles']:>7,}")
        if len(repos) > TOP:
            out.append(f"  ... {count(len(repos) - TOP, 'more repository', 'more repositories')} "
                       "(--format json or --html for all)")
    owners = [o for o in doc["owners"] if o["findings"]]
    if owners:
        out.append("")
        out.append(f"{'Owner':<32} {'break':>7} {'open':>7} {'repos':>7}")
        for o in owners[:TOP]:
            out.append(f"{shown(o['owner'])[:32]:<32} {o['severity']['break']:>7,} {o['findings']:>7,} "
                       f"{o['repositories']:>7,}")
        if len(owners) > TOP:
            out.append(f"  ... {count(len(owners) - TOP, 'more owner')}")
    if doc["jobs"]:
        rows = [(shown(j["label"])[:40], _names(j["builds"], 99) or "?", _names(j["nccl"] or j["rccl"], 99) or "?",
                 _names(j["legacy_extensions"], 99) or "-") for j in doc["jobs"][:TOP]]
        head = ("Job", "builds", "NCCL", "legacy-only extensions")
        widths = [max(len(r[i]) for r in [head, *rows]) for i in range(3)]
        out.append("")
        for r in [head, *rows]:
            out.append("  ".join(f"{r[i]:<{widths[i]}}" for i in range(3)) + f"  {r[3]}")
        if len(doc["jobs"]) > TOP:
            out.append(f"  ... {count(len(doc['jobs']) - TOP, 'more job')}")
    return shown_lines("\n".join(out)) + "\n"
