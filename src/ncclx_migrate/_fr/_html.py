"""``ncclx fr analyze --html``: where every rank stopped, as one self-contained page.

Renders from the ``--json`` report (schema ``ncclx.fr/1``), the stable contract, so the page
draws whatever any analyzer version wrote.  Per group it uses ``per_rank`` (each member's
state, last enqueued and completed sequence numbers, last entries); a report without it
still draws, with states derived from ``last_completed``, ``first_incomplete`` and
``missing_dumps`` and no entries.

Each group is a grid: rows are sets of ranks that stopped in the same place (collapsed into
ranges, so 16k ranks stay a handful of rows), columns the collective sequence numbers around
the first incomplete one, cells coloured by state.  Culprit rows and mismatching cells are
marked and the verdict is written in words at the top.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .._htmlpage import count, esc, page, ranges, rank_text, spans, write_atomic
from ._frames import is_user

__all__ = ["render_page", "write_page"]

_MAX_COLS = 32  # sequence numbers shown per group, around the first incomplete one
_MAX_ROWS = 400  # rows past this are summed up in one line (ranks still findable by number)
_MAX_CHIPS = 64
_MAX_VERDICT_LINES = 8  # the rest is under each group
_CELL = {"completed": "c", "started": "st", "scheduled": "sc"}
_NAMES = {
    "c": "completed",
    "st": "started (not completed)",
    "sc": "scheduled (not completed)",
    "ne": "never enqueued",
    "nd": "no dump",
}
_STATE_WORDS = {
    "completed": "completed all it enqueued",
    "started": "stuck in a started collective",
    "scheduled": "stuck in a scheduled collective",
    "never-entered": "never entered the first incomplete collective",
    "no-dump": "left no dump",
}


def _text(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value)  # "[[1024, 4096]]": wraps at the spaces in a narrow column


def _frame(f: Any) -> str:
    if isinstance(f, dict):
        return f"{f.get('name', '')} at {f.get('filename', '')}:{f.get('line', 0)}"
    if isinstance(f, (list, tuple)) and len(f) == 3:
        return f"{f[0]} at {f[1]}:{f[2]}"
    return str(f)


def _user_frame(f: Any) -> bool:
    """A frame of the user's code, not torch's own (shown first; torch's fold behind a toggle)."""
    return is_user(str(f.get("filename", ""))) if isinstance(f, dict) else True


def _derived_per_rank(group: dict[str, Any]) -> dict[int, dict[str, Any]]:
    """States from the report's older keys, for a report written without ``per_rank``."""
    inc = group.get("first_incomplete") or {}
    missing = set(inc.get("missing_ranks") or [])
    no_dump = set(group.get("missing_dumps") or []) | set(inc.get("no_dump_ranks") or [])
    done = {int(k): int(v) for k, v in (group.get("last_completed") or {}).items()}
    busy = "scheduled" if group.get("recorder") == "gloo" else "started"
    seq = int(inc["seq"]) if inc else 0
    out: dict[int, dict[str, Any]] = {}
    for r in group.get("ranks") or []:
        if r in no_dump or r not in done:
            out[r] = {"state": "no-dump", "last_enqueued": None, "last_completed": None}
        elif r in missing:
            out[r] = {"state": "never-entered", "last_enqueued": seq - 1, "last_completed": done[r]}
        elif seq and done[r] < seq:
            out[r] = {"state": busy, "last_enqueued": seq, "last_completed": done[r]}
        else:
            out[r] = {"state": "completed", "last_enqueued": done[r], "last_completed": done[r]}
    return out


class _Strings:
    """A string table: the page ships each op, size list, dtype list and frame once."""

    def __init__(self) -> None:
        self.items: list[str] = []
        self._index: dict[str, int] = {}

    def __call__(self, text: str) -> int:
        i = self._index.get(text)
        if i is None:
            i = self._index[text] = len(self.items)
            self.items.append(text)
        return i


class _Entries:
    """An entry table: ranks that recorded the same entry share one row."""

    def __init__(self, strings: _Strings) -> None:
        self.s = strings
        self.items: list[list[Any]] = []
        self._index: dict[tuple[Any, ...], int] = {}

    def __call__(self, e: dict[str, Any]) -> int:
        frames = [f for f in e.get("frames") or [] if f]
        key = (e.get("seq"), e.get("op"), e.get("state"), e.get("retired"), repr(e.get("input_sizes")),
               repr(e.get("input_dtypes")), repr(e.get("output_sizes")), repr(e.get("output_dtypes")),
               repr(frames))
        i = self._index.get(key)
        if i is None:
            state = str(e.get("state", ""))
            # The grid's colour for this entry: a retired entry is done there (green) whatever
            # state torch recorded (gloo leaves every entry "scheduled").
            cls = "c" if e.get("retired") or state == "completed" else _CELL.get(state, "")
            if e.get("retired") and state != "completed":
                state += " (retired)"
            mine = [f for f in frames if _user_frame(f)]
            theirs = [f for f in frames if not _user_frame(f)]
            i = self._index[key] = len(self.items)
            self.items.append([
                e.get("seq"),
                self.s(str(e.get("op", ""))),
                self.s(state),
                self.s(_text(e.get("input_sizes", ""))),
                self.s(_text(e.get("input_dtypes", ""))),
                self.s(_text(e.get("output_sizes", ""))),
                self.s(_text(e.get("output_dtypes", ""))),
                [self.s(_frame(f)) for f in mine],
                [self.s(_frame(f)) for f in theirs],
                cls,
            ])
        return i


def _columns(per_rank: dict[int, dict[str, Any]], first: int | None) -> list[int]:
    have = [v for v in per_rank.values() if v.get("state") != "no-dump"]
    enq = [int(v.get("last_enqueued") or 0) for v in have]
    done = [int(v.get("last_completed") or 0) for v in have]
    top = max([*enq, first or 0], default=0)
    if top == 0:
        return []
    hi = top  # no column for a collective no rank reached: it would be empty
    lo = max(1, min([*(d + 1 for d in done), first or hi]) - 3)
    if hi - lo + 1 > _MAX_COLS:
        lo = hi - _MAX_COLS + 1
        if first and first < lo:  # keep the first incomplete collective in view
            lo = max(1, first - 3)
            hi = lo + _MAX_COLS - 1
    return list(range(lo, hi + 1))


def _cells(info: dict[str, Any], cols: list[int]) -> list[str]:
    state = str(info.get("state"))
    if state == "no-dump":
        return ["nd"] * len(cols)
    enq = int(info.get("last_enqueued") or 0)
    done = int(info.get("last_completed") or 0)
    at = {e.get("seq"): str(e.get("state")) for e in info.get("last_entries") or []}
    busy = _CELL.get(state, "sc")
    out = []
    for s in cols:
        if s <= done:
            out.append("c")
        elif s <= enq:
            out.append(_CELL.get(at.get(s, ""), busy if busy != "c" else "sc"))
        else:
            out.append("ne")
    return out


def _incomplete_line(g: dict[str, Any]) -> list[str]:
    inc = g.get("first_incomplete")
    if not inc:
        return []
    what = f"{inc['op']} #{inc['seq']} of group {g['group']}"
    no_dump = inc.get("no_dump_ranks") or []
    if inc["why"] == "never-entered":
        lines = [f"{rank_text(inc['missing_ranks'])} never entered {what}; "
                 f"{rank_text(inc['entered_ranks'])} waited"]
    elif inc["why"] == "not-completed":
        lines = [f"every rank with a dump entered {what} and it never completed"]
    else:
        lines = [f"the last collective {rank_text(inc['entered_ranks'])} entered was {what}; "
                 f"{rank_text(no_dump)} left no dump (exited or crashed?)"]
    if no_dump and inc["why"] != "no-dump":
        lines.append(f"{rank_text(no_dump)} left no dump: unknown whether they entered it")
    return lines


def _mismatch_line(g: dict[str, Any], m: dict[str, Any]) -> str:
    found = " / ".join(sorted(set(map(str, (m.get("found") or {}).values()))))
    who = rank_text(m["culprit_ranks"])
    if m["field"] == "op":
        return (f"{who} called {found} as collective #{m['seq']} of group {g['group']} "
                f"where the other ranks called {m['expected']}")
    label = {"input_sizes": "input sizes", "input_dtypes": "input dtypes"}.get(m["field"], m["field"])
    return (f"{who} passed {label} {found} to {m['op']} #{m['seq']} of group {g['group']} "
            f"where the other ranks passed {m['expected']}")


def _where_lines(g: dict[str, Any]) -> list[str]:
    """Where the waiting ranks called the stuck collective, and where each culprit was."""
    lines = []
    called = g.get("called_from")
    if isinstance(called, dict):
        lines.append(f"the waiting ranks called it from {_frame(called)}")
    for r, f in (g.get("stuck_at") or {}).items():
        lines.append(f"rank {r} was at {_frame(f)} when it dumped")
    return lines


def _group_lines(g: dict[str, Any]) -> list[str]:
    return _incomplete_line(g) + [_mismatch_line(g, m) for m in g.get("mismatches") or []] + _where_lines(g)


def _verdict(report: dict[str, Any]) -> tuple[str, str, list[str]]:
    groups = report.get("groups") or []
    culprits = sorted({r for g in groups for r in g.get("culprit_ranks") or []})
    lines = [line for g in groups for line in _group_lines(g)]
    missing = report.get("missing_dumps") or []
    if missing:  # said once: a group's line may already have named these ranks
        named = {r for g in groups for r in (g.get("first_incomplete") or {}).get("no_dump_ranks") or []}
        lines.append("to get a dump from every rank, turn on the watchdog (NCCLX_HANG_DUMP=SECONDS)"
                     if named >= set(missing) else f"{rank_text(missing)} left no dump: turn on the watchdog "
                     "(NCCLX_HANG_DUMP=SECONDS) so every rank dumps on a hang")
    if len(lines) > _MAX_VERDICT_LINES:
        more = len(lines) - _MAX_VERDICT_LINES + 1
        lines = [*lines[: _MAX_VERDICT_LINES - 1], f"and {more} more findings: see the groups below"]
    if culprits:
        head = f"Culprit: {rank_text(culprits)}"
        return "bad", head, lines
    if report.get("problem"):
        return "warn", "Problem found, no single culprit", lines
    return "good", "No hang or mismatch found", lines


def _group_data(g: dict[str, Any], strings: _Strings, entries: _Entries) -> dict[str, Any]:
    raw = g.get("per_rank")
    if isinstance(raw, dict) and raw:
        per_rank = {int(k): v for k, v in raw.items()}
        derived = False
    else:
        per_rank = _derived_per_rank(g)
        derived = True
    inc = g.get("first_incomplete") or {}
    first = int(inc["seq"]) if inc else None
    cols = _columns(per_rank, first)
    culprits = set(g.get("culprit_ranks") or [])
    marks: dict[int, list[int]] = {}
    notes: dict[int, list[str]] = {}
    for m in g.get("mismatches") or []:
        for r in m.get("culprit_ranks") or []:
            if m["seq"] in cols:
                marks.setdefault(r, []).append(cols.index(m["seq"]))
            value = (m.get("found") or {}).get(str(r), "?")
            notes.setdefault(r, []).append(f"#{m['seq']} {m['field']} {value} (others {m['expected']})")
    keyed: dict[tuple[Any, ...], list[int]] = {}
    rows_info: dict[tuple[Any, ...], dict[str, Any]] = {}
    ranks_out: dict[str, list[Any]] = {}
    for r in sorted(per_rank):
        info = per_rank[r]
        cells = _cells(info, cols)
        state = str(info.get("state"))
        key = (tuple(cells), state, r in culprits, tuple(marks.get(r, ())), tuple(notes.get(r, ())),
               info.get("last_enqueued"), info.get("last_completed"))
        keyed.setdefault(key, []).append(r)
        rows_info.setdefault(key, {"cells": cells, "state": state, "culprit": r in culprits,
                                   "marks": marks.get(r, []), "notes": notes.get(r, []),
                                   "enq": info.get("last_enqueued"), "done": info.get("last_completed")})
        ranks_out[str(r)] = [strings(state), info.get("last_enqueued"), info.get("last_completed"),
                             [entries(e) for e in info.get("last_entries") or []]]
    rows = []
    for key, members in sorted(keyed.items(), key=lambda kv: kv[1][0]):
        ri = rows_info[key]
        who = rank_text(members, limit=4)
        label = f"{who} · {ri['state']}"
        tip = f"{rank_text(members, limit=40)}: {_STATE_WORDS.get(ri['state'], ri['state'])}"
        if ri["enq"] is not None:
            tip += f"; last enqueued #{ri['enq']}, last completed #{ri['done']}"
        if ri["culprit"]:
            tip += "; CULPRIT"
        rows.append({"label": label, "tip": tip, "cells": ri["cells"], "marks": ri["marks"],
                     "flag": 1 if ri["culprit"] else 0, "spans": spans(members), "n": len(members),
                     "state": ri["state"], "enq": ri["enq"], "done": ri["done"], "notes": ri["notes"]})
    hidden = 0
    if len(rows) > _MAX_ROWS:
        keep = [r for r in rows if r["flag"] or r["marks"]]
        rest = [r for r in rows if not (r["flag"] or r["marks"])]
        shown = sorted((keep + rest)[:_MAX_ROWS], key=lambda r: r["spans"][0][0])
        hidden = len(rows) - len(shown)
        rows = shown
    col_specs = []
    for s in cols:
        spec: dict[str, Any] = {"label": f"#{s}", "tip": f"collective #{s}"}
        if s == first:
            spec.update(hl=1, label=f"#{s} {inc.get('op', '')}",
                        tip=f"collective #{s} ({inc.get('op', '')}): the first one not every rank completed")
        col_specs.append(spec)
    return {"cols": col_specs, "rows": rows, "ranks": ranks_out, "derived": derived, "hidden": hidden}


_SCRIPT = r"""
const S=DATA.S,E=DATA.E;
legend(document.getElementById("legend"),DATA.legend);
function entryRows(ids){
  if(!ids.length)return '<p class="hint">No entries for this rank in this group.</p>';
  const h=['<table><thead><tr><th>seq (newest first)</th><th>op</th><th>state</th><th>input sizes</th><th>input dtypes</th><th>output sizes</th><th>output dtypes</th><th>stack (your code first, innermost first)</th></tr></thead><tbody>'];
  // A frame breaks at spaces and after a "/" inside a path, never inside "file.py:123".
  const frame=s=>{const m=/^(.*?)([^\/\s]*:\d+)$/.exec(s);const head=m?m[1]:s;
    return esc(head).replace(/(\S)\//g,"$1/<wbr>")+(m?`<span class="loc">${esc(m[2])}</span>`:"")};
  const stack=e=>{const mine=e[7].map(i=>frame(S[i])).join("<br>"),n=e[8].length;
    if(!mine&&!n)return '<span class="hint">no stack traces in the dump</span>';
    return mine+(n?`<details class="torch"><summary>${n} torch frame${n>1?"s":""}</summary>${e[8].map(i=>frame(S[i])).join("<br>")}</details>`:"")};
  for(const id of ids.slice().reverse()){const e=E[id];
    h.push(`<tr><td>#${esc(e[0])}</td><td>${esc(S[e[1]])}</td><td><span class="tag ${esc(e[9])}">${esc(S[e[2]])}</span></td>`+
      `<td class="mono">${esc(S[e[3]])}</td><td class="mono">${esc(S[e[4]])}</td><td class="mono">${esc(S[e[5]])}</td><td class="mono">${esc(S[e[6]])}</td>`+
      `<td class="mono stack">${stack(e)}</td></tr>`)}
  h.push("</tbody></table>");return h.join("")}
DATA.groups.forEach((g,gi)=>{
  if(!g.cols.length)return;
  const det=document.getElementById("detail-"+gi),grid=document.getElementById("grid-"+gi);
  let current=-1;
  const show=(ri,pinned,rank)=>{
    const row=g.rows[ri];current=ri;
    if(rank===undefined)rank=row.spans[0][0];
    const rec=g.ranks[String(rank)];
    const chips=[];let n=0;
    for(const [a,b] of row.spans){for(let r=a;r<=b&&n<DATA.chips;r++,n++)chips.push(`<button data-rank="${r}" class="${r===rank?"on":""}">${r}</button>`);if(n>=DATA.chips)break}
    if(row.n>n)chips.push(`<span class="hint">\u2026 ${(row.n-n).toLocaleString()} more: type a rank above</span>`);
    const st=rec?S[rec[0]]:row.state;
    det.innerHTML=`<h3>${esc(row.tip.split(":")[0])}</h3>`+
      `<div>${row.flag?'<span class="tag culprit">culprit</span> ':""}<span class="tag ${esc(st)}">${esc(st)}</span>`+
      (row.enq!==null?` last enqueued #${esc(row.enq)}, last completed #${esc(row.done)}`:"")+`</div>`+
      row.notes.map(t=>`<div><b>mismatch:</b> ${esc(t)}</div>`).join("")+
      `<div class="chips">${chips.join("")}</div>`+
      `<h3 class="rank-title">rank ${esc(rank)}: last entries${pinned?"":" (click to pin)"}</h3>`+
      (g.derived?'<p class="hint">This report has no per-rank entries (written by an analyzer without per_rank).</p>':entryRows(rec?rec[3]:[]));
    det.querySelectorAll("button[data-rank]").forEach(b=>b.addEventListener("click",()=>show(ri,true,+b.dataset.rank)));
  };
  drawGrid(grid,{cols:g.cols,rows:g.rows,names:DATA.names,labelWidth:320,headHeight:112,headClip:18},show);
  const form=document.getElementById("find-"+gi);
  form.addEventListener("submit",ev=>{ev.preventDefault();
    const r=+form.querySelector("input").value,msg=form.querySelector(".msg");
    const ri=g.rows.findIndex(row=>row.spans.some(([a,b])=>a<=r&&r<=b));
    if(ri<0){msg.textContent=` rank ${r} is not a member of this group`;return}
    msg.textContent="";grid.querySelectorAll(".row").forEach(x=>x.classList.toggle("sel",+x.dataset.row===ri));show(ri,true,r)});
});
document.body.dataset.rendered="1";
"""


def render_page(report: dict[str, Any]) -> str:
    """The page for one ``ncclx.fr/1`` report dict."""
    strings = _Strings()
    entries = _Entries(strings)
    mood, head, lines = _verdict(report)
    groups = report.get("groups") or []
    data_groups = [_group_data(g, strings, entries) for g in groups]
    dumps = report.get("dumps") or []
    ranks = sorted({d["rank"] for d in dumps})
    recs = sorted({d.get("recorder", "") for d in dumps})
    fmts = sorted({f"{d.get('version', '')} {d.get('format', '')}" for d in dumps})
    meta = esc(
        f"{count(len(dumps), 'dump')} from ranks {ranges(ranks, 6) or 'none'} in {report.get('folder', '')} "
        f"(prefix {report.get('prefix', '')!r}; recorder {', '.join(recs)}; format {', '.join(fmts)})"
    )
    body = [f'<section id="verdict" class="verdict {mood}"><p class="big">{esc(head)}</p>']
    if lines:
        body.append("<ul>" + "".join(f"<li>{esc(x)}</li>" for x in lines) + "</ul>")
    body.append("</section>")
    body += [f"<p class=\"hint\">repaired: {esc(r)}</p>" for r in report.get("repairs") or []]
    body.append('<div class="legend" id="legend"></div>')
    for gi, (g, d) in enumerate(zip(groups, data_groups, strict=True)):
        n = len(g.get("ranks") or [])
        head = f"group {g['group']} (pg {g.get('pg_name', '')}, {g.get('recorder', '')}, {count(n, 'rank')})"
        culprit = g.get("culprit_ranks") or []
        tag = f' <span class="tag culprit">culprit {esc(rank_text(culprit))}</span>' if culprit else ""
        glines = _group_lines(g) or ["every collective that any rank enqueued completed on all ranks with dumps"]
        if len(groups) == 1 and all(x in lines for x in glines):
            glines = []  # the verdict above says it all already: not twice
        hidden = (f"<p class=\"hint\">{d['hidden']:,} more rows not drawn (no culprit or mismatch in them); "
                  "find their ranks by number.</p>") if d["hidden"] else ""
        grid = (f'<div class="grid" id="grid-{gi}"></div>' if d["cols"]
                else f'<div class="grid" id="grid-{gi}"><p class="hint">no collectives recorded</p></div>')
        body.append(
            f'<section class="block" id="group-{gi}"><h2>{esc(head)}{tag}</h2>'
            + (f'<p class="lines">{"<br>".join(esc(x) for x in glines)}</p>' if glines else "") +
            f'<form id="find-{gi}" class="find">show rank <input type="number" min="0" size="7">'
            f' <button type="submit">show</button><span class="msg"></span></form>{hidden}'
            f'<div class="pair">{grid}'
            f'<div class="detail" id="detail-{gi}"><p class="hint">Hover over a row for its ranks and last '
            "entries; click to pin it.</p></div></div></section>"
        )
        if not d["cols"]:
            d["rows"], d["cols"] = [], []
    data = {
        "S": strings.items,
        "E": entries.items,
        "groups": data_groups,
        "names": _NAMES,
        "legend": list(_NAMES.items()),
        "chips": _MAX_CHIPS,
    }
    return page("ncclx fr analyze", meta, "".join(body), data, _SCRIPT)


def write_page(path: Path, report: dict[str, Any]) -> None:
    """Write the page atomically (a half-written page is never left behind)."""
    write_atomic(path, render_page(report))
