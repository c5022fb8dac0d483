"""The roll-up on a terminal: one screen, the worst first; the JSON and the page hold it all."""

from __future__ import annotations

from typing import Any

from .._migrate._rules import SEVERITIES

__all__ = ["render_text"]

TOP = 10  # rows per table on a terminal


def _n(n: int, noun: str, plural: str | None = None) -> str:
    return f"{n:,} {noun if n == 1 else plural or noun + 's'}"


def _names(names: list[str], limit: int = 5) -> str:
    shown = ", ".join(names[:limit])
    return shown + (f" and {len(names) - limit:,} more" if len(names) > limit else "")


def render_text(doc: dict[str, Any]) -> str:
    t = doc["totals"]
    sev = t["severity"]
    out = [f"ncclx report: {_n(t['repositories'], 'repository', 'repositories')} "
           f"({_n(t['findings'], 'open finding')}), {_n(t['jobs'], 'job')}"]
    if t["repositories"]:
        out.append("  " + ", ".join(f"{s} {sev[s]:,}" for s in SEVERITIES))
        out.append(f"  fixable: {t['write']:,} with --write, {t['unsafe']:,} more with --unsafe-fixes; "
                   f"{_n(t['cpp'], 'C++ finding')}")
    rb = doc["rollback"]
    out.append("")
    out.append("Before the rollback goes (torch 2.16):")
    lines = []
    if rb["toggles"]:
        lines.append(f"{_n(rb['toggles'], 'rollback toggle')} still set in "
                     f"{_n(len(rb['repositories_with_toggles']), 'repository', 'repositories')}: "
                     f"{_names(rb['repositories_with_toggles'])}")
    if rb["breaks"]:
        lines.append(f"{_n(rb['breaks'], 'break')} in "
                     f"{_n(len(rb['repositories_with_breaks']), 'repository', 'repositories')}")
    if rb["jobs_legacy"]:
        lines.append(f"{_n(len(rb['jobs_legacy']), 'job')} still build legacy NCCL: {_names(rb['jobs_legacy'])}")
    if rb["legacy_extensions"]:
        lines.append(f"extensions built for legacy only: {_names(rb['legacy_extensions'])}")
    out += [f"  {line}" for line in lines] or ["  nothing: no toggle, no break, no job on legacy NCCL"]
    away = doc["one_write_away"]
    if away:
        out.append(f"  one `ncclx migrate --write` from clean: {_n(len(away), 'repository', 'repositories')} "
                   f"({_names(away)})")
    trend = doc.get("trend")
    if trend:
        since = f" since {trend['previous']}" if trend.get("previous") else ""
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
            out.append(f"{r['name'][:32]:<32} {s['break']:>7,} {s['maybe a break']:>7,} {s['hardening']:>7,} "
                       f"{s['deprecated']:>7,} {r['write']:>7,} {r['toggles']:>7,}")
        if len(repos) > TOP:
            out.append(f"  ... {_n(len(repos) - TOP, 'more repository', 'more repositories')} "
                       "(--format json or --html for all)")
    owners = [o for o in doc["owners"] if o["findings"]]
    if owners:
        out.append("")
        out.append(f"{'Owner':<32} {'break':>7} {'open':>7} {'repos':>7}")
        for o in owners[:TOP]:
            out.append(f"{o['owner'][:32]:<32} {o['severity']['break']:>7,} {o['findings']:>7,} "
                       f"{o['repositories']:>7,}")
        if len(owners) > TOP:
            out.append(f"  ... {_n(len(owners) - TOP, 'more owner')}")
    if doc["jobs"]:
        rows = [(j["label"][:40], ", ".join(j["builds"]) or "?", ", ".join(j["nccl"] or j["rccl"]) or "?",
                 ", ".join(j["legacy_extensions"]) or "-") for j in doc["jobs"][:TOP]]
        head = ("Job", "builds", "NCCL", "legacy-only extensions")
        widths = [max(len(r[i]) for r in [head, *rows]) for i in range(3)]
        out.append("")
        for r in [head, *rows]:
            out.append("  ".join(f"{r[i]:<{widths[i]}}" for i in range(3)) + f"  {r[3]}")
        if len(doc["jobs"]) > TOP:
            out.append(f"  ... {_n(len(doc['jobs']) - TOP, 'more job')}")
    return "\n".join(out) + "\n"
