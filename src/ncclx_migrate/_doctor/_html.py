"""``ncclx doctor --html`` / ``ncclx doctor merge --html``: the fleet as one self-contained page.

Rows are hosts or ranks that got identical results on every check (so a 16k-rank job with
one odd node is two rows), columns the checks, cells coloured by status.  The odd ones out
come first (smallest groups first); cells that differ from the largest group are marked.
Ranks that never reported are a row of their own.  The verdict is written at the top.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .._htmlpage import count, esc, page, rank_text, write_atomic
from ._merge import FINGERPRINT, Source, _fmt_pair, everyone, who
from ._model import CheckResult, Report, Status

CLUSTER_ID = "cluster-consistency"

__all__ = ["render_page", "write_page"]

_ORDER = [Status.ERROR, Status.FAIL, Status.WARN, Status.OK, Status.SKIP]
_NAMES = {"ok": "ok", "warn": "warning", "fail": "FAIL", "error": "ERROR", "skip": "skipped",
          "none": "no report / not run"}
_CLIP = 600


def _clip(text: str, n: int = _CLIP) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"


def _label(members: Sequence[Source]) -> tuple[str, str]:
    hosts = sorted({s.report.host for s in members})
    ranks = [s.report.rank for s in members if s.report.rank is not None]
    full = _clip(who(members), 2000)
    if len(hosts) <= 1:
        return _clip(full, 120), full
    if len(ranks) == len(members):
        return f"{rank_text(ranks, limit=3)} on {count(len(hosts), 'host')}", full
    return f"{count(len(members), 'report')} from {count(len(hosts), 'host')}", full


def _agreement(source: Source, consistency: CheckResult) -> tuple[str, str, str]:
    """This report's cell of the cluster-consistency column: where it differs from the majority."""
    severity = {f"{cid}.{key}": status for _, _, cid, key, status in FINGERPRINT}
    verb = {f"{cid}.{key}": one for one, _, cid, key, _ in FINGERPRINT}
    odd: list[tuple[Status, str]] = []
    for d in consistency.details.get("divergent") or []:
        if not isinstance(d, dict) or not isinstance(d.get("fact"), str):
            continue
        cid, _, key = d["fact"].partition(".")
        check = source.report.get(cid)
        if check is None or key not in check.details:
            continue
        if json.dumps(check.details[key], sort_keys=True) != json.dumps(d.get("majority"), sort_keys=True):
            mine, theirs = _fmt_pair(check.details[key], d.get("majority"))  # as the text output shows them
            odd.append((severity.get(d["fact"], Status.WARN),
                        f"{verb.get(d['fact'], d['fact'] + ' is')} {mine} (the others {theirs})"))
    if not odd:
        return Status.OK.value, "agrees with the majority", ""
    worst = min(odd, key=lambda t: _ORDER.index(t[0]))[0]
    return worst.value, "; ".join(text for _, text in odd), consistency.remedy


def _verdict(summary: Report, ids: list[str],
             rows: Sequence[tuple[tuple[tuple[str, str, str], ...], list[Source]]]) -> tuple[str, str, list[str]]:
    """Headline from the merged report; one line per check that is not ok, naming row groups."""
    s = summary.summary()
    bad = [c for c in summary.checks if c.status in (Status.FAIL, Status.ERROR)]
    warn = [c for c in summary.checks if c.status is Status.WARN]
    lines: list[tuple[int, str]] = []
    for c in bad + warn:
        if c.id not in ids or c.id == CLUSTER_ID:  # its message names only the minorities
            lines.append((_ORDER.index(c.status), f"{c.id}: {_clip(c.message)}"))
            continue
        j = ids.index(c.id)
        same: dict[tuple[str, str], list[Source]] = {}
        for sig, members in rows:
            if sig[j][0] in ("fail", "error", "warn"):
                same.setdefault(sig[j][:2], []).extend(members)
        hits = sorted(same.items(), key=lambda kv: (_ORDER.index(Status(kv[0][0])), len(kv[1])))
        if len(hits) == 1 and len(hits[0][1]) == sum(len(m) for _, m in rows):
            members = hits[0][1]
            noun = "rank" if all(m.report.rank is not None for m in members) else "report"
            lines.append((_ORDER.index(c.status),
                          f"{c.id}: {_clip(hits[0][0][1])} {everyone(len(members), len(members), noun)}"))
        else:
            parts = [f"{st} on {_label(m)[0]}: {_clip(msg, 300)}" for (st, msg), m in hits[:4]]
            if len(hits) > 4:
                parts.append(f"and {len(hits) - 4} more groups")
            lines.append((_ORDER.index(c.status), f"{c.id}: " + " | ".join(parts)))
    lines.sort(key=lambda t: t[0])
    tail = ", ".join(f"{s[k.value]} {k.value}" for k in Status if s[k.value])
    out = [line for _, line in lines]
    if bad:
        return "bad", f"FAIL: {count(len(bad), 'check')} failed ({tail})", out
    if warn:
        return "warn", f"WARN: {count(len(warn), 'check')} with warnings ({tail})", out
    return "good", f"OK: every check passed ({tail})", out


_SCRIPT = r"""
legend(document.getElementById("legend"),DATA.legend);
const det=document.getElementById("detail-0"),grid=document.getElementById("grid-0");
const show=(ri,pinned)=>{const row=DATA.rows[ri];
  const h=[`<h3>${esc(row.tip)}</h3><div>${row.flag?'<span class="tag fail">odd one out</span> ':""}${esc(row.n.toLocaleString())} ${row.n===1?"member":"members"}${pinned?"":" (click to pin)"}</div>`,
    '<table><thead><tr><th>check</th><th>status</th><th>finding</th></tr></thead><tbody>'];
  row.cells.forEach((k,j)=>{const r=row.results[j];
    const odd=row.marks.includes(j)?`<div><b>majority:</b> ${esc(DATA.majority[j])}</div>`:"";
    h.push(`<tr><td>${esc(DATA.cols[j].label)}</td><td><span class="tag ${esc(k)}">${esc(DATA.names[k]||k)}</span></td>`+
      `<td>${esc(r[0])}${r[1]?`<div><b>fix:</b> ${esc(r[1])}</div>`:""}${odd}</td></tr>`)});
  h.push("</tbody></table>");det.innerHTML=h.join("")};
drawGrid(grid,{cols:DATA.cols,rows:DATA.rows,names:DATA.names,labelWidth:340,headHeight:130,headClip:22},show);
document.body.dataset.rendered="1";
"""


def render_page(sources: Sequence[Source], summary: Report, expected_ranks: Sequence[int] = ()) -> str:
    """The page for the reports in ``sources``; ``summary`` (the merged report) gives the verdict."""
    ids: list[str] = []
    for s in sources:
        for c in s.report.checks:
            if c.id not in ids and c.id != CLUSTER_ID:
                ids.append(c.id)
    consistency = summary.get(CLUSTER_ID)
    groups: dict[tuple[tuple[str, str, str], ...], list[Source]] = {}
    for s in sources:
        results: list[tuple[str, str, str]] = []
        for cid in ids:
            got = s.report.get(cid)
            results.append(("none", "not run in this report", "") if got is None
                           else (got.status.value, got.message, got.remedy))
        if consistency is not None:
            results.append(_agreement(s, consistency))
        groups.setdefault(tuple(results), []).append(s)
    plain = len(ids)  # columns of the reports' own checks; cluster-consistency comes after them
    if consistency is not None:  # a failing check gets a column like any other
        ids.append(CLUSTER_ID)
    majority = max(groups.items(), key=lambda kv: len(kv[1]))[0] if groups else ()

    def worst(sig: tuple[tuple[str, str, str], ...]) -> int:
        found = [_ORDER.index(Status(st)) for st, _, _ in sig if st != "none"]
        return min(found, default=len(_ORDER))

    # Odd ones out first: the majority (ties: the lowest rank's, as cluster-consistency) last.
    ordered = sorted(groups.items(),
                     key=lambda kv: (kv[0] == majority, len(kv[1]), worst(kv[0]), sources.index(kv[1][0])))
    rows: list[dict[str, Any]] = []
    reported = {s.report.rank for s in sources if s.report.rank is not None}
    missing = sorted(set(expected_ranks) - reported)
    if missing:
        text = f"{rank_text(missing, limit=6)} did not report"
        cells = ["none"] * plain + ["fail"] * (len(ids) - plain)  # not reporting fails the agreement
        rows.append({"label": text, "tip": text, "cells": cells, "marks": [], "flag": 1,
                     "n": len(missing), "results": [["no report", ""]] * len(ids)})
    for sig, members in ordered:
        label, tip = _label(members)
        # The agreement column is itself the difference: only the checks' own cells are marked.
        marks = [j for j, cell in enumerate(sig[:plain]) if len(groups) > 1 and cell[:2] != majority[j][:2]]
        rows.append({"label": label, "tip": tip, "cells": [st for st, _, _ in sig], "marks": marks,
                     "flag": 1 if sig != majority else 0, "n": len(members),
                     "results": [[_clip(m), _clip(r)] for _, m, r in sig]})
    mood, head, lines = _verdict(summary, ids, ordered)
    hosts = sorted({s.report.host for s in sources})
    torches = sorted({s.report.torch or "not installed" for s in sources})
    meta = esc(f"level {summary.level}; {count(len(sources), 'report')} from {count(len(hosts), 'host')}; "
               f"torch {', '.join(torches)}")
    body = [f'<section id="verdict" class="verdict {mood}"><p class="big">{esc(head)}</p>']
    if lines:
        body.append("<ul>" + "".join(f"<li>{esc(x)}</li>" for x in lines) + "</ul>")
    body.append('</section><div class="legend" id="legend"></div>')
    groups_text = (f"{count(len(groups), 'group')} of identical results, odd ones out first"
                   if len(groups) > 1 else "every report has the same results")
    body.append(
        f'<section class="block" id="group-0"><h2>{esc(count(len(sources), "report"))} x '
        f'{esc(count(len(ids), "check"))}: {esc(groups_text)}</h2>'
        '<div class="pair"><div class="grid" id="grid-0"></div><div class="detail" id="detail-0">'
        '<p class="hint">Hover over a row for its results; click to pin it.</p></div></div></section>'
    )
    body.append(_divergent(summary))
    data = {
        "cols": [{"label": cid, "tip": cid} for cid in ids],
        "rows": rows,
        "majority": [_clip(m) for _, m, _ in majority] if majority else [],
        "names": _NAMES,
        "legend": [[k, v] for k, v in _NAMES.items()],
    }
    return page("ncclx doctor", meta, "".join(body), data, _SCRIPT)


def _divergent(summary: Report) -> str:
    """Every value of every fact the ranks disagree on, with who holds it: the text report
    counts them past a few (one screen), the page keeps them all (folded)."""
    check = summary.get("cluster-consistency")
    facts = check.details.get("divergent") if check else None
    if not isinstance(facts, list) or not facts:
        return ""
    out = ['<section class="block" id="divergent"><h2>Values that differ between ranks</h2>']
    verbs = {f"{cid}.{key}": (one, many) for one, many, cid, key, _ in FINGERPRINT}
    for fact in facts:
        minority = fact.get("minority") or []
        majority = fact.get("majority")
        # Values as the text output shows them (unset, not null; a variable set as NAME=value).
        rows = "".join(f"<tr><td>{esc(_fmt_pair(m.get('value'), majority)[0])}</td><td>{esc(str(m.get('who')))}</td></tr>"
                       for m in minority)
        n = int(fact.get("majority_count") or 0)
        one, many = verbs.get(str(fact.get("fact")), (f"{fact.get('fact')} is", f"{fact.get('fact')} are"))
        shown = (", ".join(f"{k}={v}" for k, v in sorted(majority.items())) or "nothing set"
                 if isinstance(majority, dict) else _fmt_pair(majority, majority)[0])
        out.append(f"<details><summary>{esc(count(n, 'report'))} {esc(one if n == 1 else many)} {esc(shown)}; "
                   f"{esc(count(len(minority), 'other value'))}</summary>"
                   f"<table><thead><tr><th>value</th><th>held by</th></tr></thead><tbody>{rows}</tbody></table>"
                   "</details>")
    out.append("</section>")
    return "".join(out)


def write_page(path: Path, sources: Sequence[Source], summary: Report, expected_ranks: Sequence[int] = ()) -> None:
    """Write the page atomically; OSError propagates for the caller's one-line error."""
    write_atomic(path, render_page(sources, summary, expected_ranks))
