"""``ncclx report --html``: the roll-up as one self-contained page (see ``_htmlpage``).

What is left before the rollback goes comes first; then one table per view, each sortable by
any column and filterable: repositories, owners (click one for its files), jobs; and the
burn-down when the roll-up continues an earlier one (``--previous``).
"""

from __future__ import annotations

from typing import Any

from .._htmlpage import count, esc, page
from .._migrate._rule_table import SEVERITIES
from .._words import verb

__all__ = ["render_page"]


def _repos(n: int) -> str:
    return count(n, "repository", "repositories")

_CSS = """<style>
table.rows{border-collapse:collapse;width:100%;font-size:12.5px}
table.rows th,table.rows td{border-bottom:1px solid var(--line);padding:3px 8px;text-align:right;white-space:nowrap}
table.rows th{cursor:pointer;user-select:none;color:var(--mute);font-weight:600;position:sticky;top:0;background:#fff}
table.rows th.sorted::after{content:" \\25BE"}table.rows th.sorted.up::after{content:" \\25B4"}
table.rows td.l,table.rows th.l{text-align:left;white-space:normal}
table.rows tr.pick{cursor:pointer}table.rows tr.pick:hover td,table.rows tr.sel td{background:#e8eefc}
table.rows td.z{color:#b7bcc6}table.rows td.brk{color:var(--fail);font-weight:700}
.scroll{max-height:60vh;overflow:auto}
input.filter{font:13px system-ui,sans-serif;padding:3px 8px;margin:0 0 6px;width:320px;border:1px solid var(--line);border-radius:4px}
.count{color:var(--mute);font-size:12px;margin-left:8px}
section.block>p.hint{color:var(--mute);margin:0 0 6px;font-size:12.5px}
</style>"""

_SCRIPT = r"""
// A table draws at most ROWS rows (thousands of rows make every click slow); the filter and the
// sort reach the others.
const ROWS=1000;
const fmt=n=>n===null||n===undefined?"":Number(n).toLocaleString("en-US");
function table(id,cols,rows,opts){
  const el=document.getElementById(id),filter=document.getElementById(id+"-filter"),shown=document.getElementById(id+"-count");
  let key=opts.sort,up=false,sel=-1;
  const cell=(c,r)=>{const v=c.get(r);if(c.text)return `<td class="l">${c.html?c.html(r):esc(v)}</td>`;
    return `<td class="${v===0?"z":c.hot&&v>0?"brk":""}">${fmt(v)}</td>`};
  const draw=()=>{const q=(filter&&filter.value||"").toLowerCase();
    const c=cols.find(c=>c.key===key);
    let rs=rows.map((r,i)=>[r,i]).filter(([r])=>!q||opts.find(r).toLowerCase().includes(q));
    rs.sort((a,b)=>{const x=c.get(a[0]),y=c.get(b[0]);const d=c.text?String(x).localeCompare(String(y)):(y-x);return (up?-d:d)||a[1]-b[1]});
    const h=[`<table class="rows"><thead><tr>${cols.map(c=>`<th class="${c.text?"l ":""}${c.key===key?"sorted"+(up?" up":""):""}" data-key="${c.key}" title="${esc(c.tip||c.label)}">${esc(c.label)}</th>`).join("")}</tr></thead><tbody>`];
    for(const [r,i] of rs.slice(0,ROWS))h.push(`<tr data-i="${i}" class="${opts.pick?"pick":""}${i===sel?" sel":""}">${cols.map(c=>cell(c,r)).join("")}</tr>`);
    h.push("</tbody></table>");el.innerHTML=h.join("");
    if(shown)shown.textContent=rs.length>ROWS?`the first ${fmt(ROWS)} of ${fmt(rs.length)} (filter or sort for the others)`:`${fmt(rs.length)} of ${fmt(rows.length)}`;
    el.querySelectorAll("th").forEach(th=>th.addEventListener("click",()=>{if(key===th.dataset.key)up=!up;else{key=th.dataset.key;up=false}draw()}));
    if(opts.pick)el.querySelectorAll("tbody tr").forEach(tr=>tr.addEventListener("click",()=>{sel=+tr.dataset.i;
      el.querySelectorAll("tr.sel").forEach(x=>x.classList.remove("sel"));tr.classList.add("sel");opts.pick(rows[sel])}))};
  if(filter)filter.addEventListener("input",draw);
  draw();
  // A panel beside the table is never empty: it opens on the first (worst) row.
  const first=opts.pick&&el.querySelector("tbody tr");if(first)first.click();
}
const sevCols=[["break","break",1],["maybe a break","maybe a break"],["hardening","hardening"],["deprecated","deprecated"]]
  .map(([k,l,hot])=>({key:k,label:l,get:r=>r.severity[k],hot:!!hot}));
const tag=(cls,t)=>` <span class="tag ${cls}">${esc(t)}</span>`;
table("repos",[
  {key:"name",label:"repository",text:1,get:r=>r.name,html:r=>esc(r.name)+(r.one_write_away?tag("ok","one --write away"):"")+(r.errors?tag("error",`${r.errors} unread`):"")+
    (r.remote?`<div class="hint mono">${esc(r.remote)}${r.commit?" @ "+esc(r.commit.slice(0,12)):""}</div>`:"")},
  ...sevCols,
  {key:"write",label:"--write",tip:"fixable with --write (safe fixes)",get:r=>r.write},
  {key:"unsafe",label:"--unsafe-fixes",tip:"fixable with --unsafe-fixes only",get:r=>r.unsafe},
  {key:"cpp",label:"C++",tip:"findings in C++/CUDA sources",get:r=>r.cpp},
  {key:"toggles",label:"toggles",tip:"rollback toggles still set (TORCH_DIST_USE_NCCL2, nccl-legacy)",get:r=>r.toggles,hot:1},
  {key:"findings",label:"open",get:r=>r.findings},
  ...(DATA.trend?[{key:"fixed",label:"fixed",get:r=>r.trend?r.trend.fixed:0},{key:"new",label:"new",get:r=>r.trend?r.trend.new:0,hot:1}]:[]),
],DATA.repositories,{sort:"break",find:r=>r.name+" "+(r.remote||"")});
const od=document.getElementById("owner-detail");
table("owners",[
  {key:"owner",label:"owner",text:1,get:r=>r.owner},...sevCols,
  {key:"write",label:"--write",get:r=>r.write},{key:"toggles",label:"toggles",get:r=>r.toggles,hot:1},
  {key:"repositories",label:"repositories",get:r=>r.repositories},{key:"findings",label:"open",get:r=>r.findings},
],DATA.owners,{sort:"break",find:r=>r.owner,pick:o=>{
  const more=o.files_total-o.files.length;
  od.innerHTML=`<h3>${esc(o.owner)}: ${fmt(o.findings)} open in ${fmt(o.files_total)} ${o.files_total===1?"file":"files"}</h3>`+
    `<table><thead><tr><th>repository</th><th>break</th><th>toggles</th><th>open</th></tr></thead><tbody>`+
    o.by_repository.map(r=>`<tr><td>${esc(r.repository)}</td><td>${fmt(r.break)}</td><td>${fmt(r.toggles)}</td><td>${fmt(r.findings)}</td></tr>`).join("")+
    `</tbody></table>`+
    `<table><thead><tr><th>repository</th><th>file</th><th>open</th></tr></thead><tbody>`+
    o.files.map(f=>`<tr><td>${esc(f.repository)}</td><td class="mono">${esc(f.path)}</td><td>${fmt(f.findings)}</td></tr>`).join("")+
    `</tbody></table>`+(more>0?`<p class="hint">and ${fmt(more)} more files (the roll-up JSON counts them)</p>`:"")}});
if(DATA.jobs.length)table("jobs",[
  {key:"label",label:"job",text:1,get:r=>r.label,html:r=>esc(r.label)+(r.legacy?tag("fail","builds legacy NCCL"):"")+`<div class="hint">${esc(r.levels.join(", "))} on ${esc(r.hosts.join(", "))}</div>`},
  {key:"builds",label:'"nccl" builds',text:1,get:r=>r.builds.join(", ")},
  {key:"nccl",label:"NCCL / RCCL",text:1,get:r=>[...r.nccl,...r.rccl].join(", ")},
  {key:"torch",label:"torch",text:1,get:r=>r.torch.join(", ")},
  {key:"toggle",label:"TORCH_DIST_USE_NCCL2",text:1,get:r=>r.toggle.join(", ")},
  {key:"ext",label:"extensions built for legacy only",text:1,get:r=>r.legacy_extensions.join(", ")},
  {key:"failed",label:"checks failed",get:r=>r.failed,hot:1},
],DATA.jobs,{sort:"failed",find:r=>r.label+" "+r.builds.join(" ")+" "+r.legacy_extensions.join(" ")});
const h=DATA.history,bd=document.getElementById("burndown");
if(bd&&h.length>1){const W=560,H=180,L=56,B=28,mx=Math.max(1,...h.map(p=>p.findings));
  // The ends' dates, or their times where the dates agree (a trend of one day), to the second if need be.
  const a0=h[0].at,a1=h[h.length-1].at,n=a0.slice(0,10)!==a1.slice(0,10)?10:a0.slice(0,16)!==a1.slice(0,16)?16:19;
  const when=at=>at.slice(0,n).replace("T"," ");
  const x=i=>L+i*(W-L-16)/(h.length-1),y=v=>H-B-(H-B-12)*v/mx;
  const line=k=>h.map((p,i)=>`${i?"L":"M"}${x(i).toFixed(1)},${y(p[k]).toFixed(1)}`).join("");
  bd.innerHTML=`<svg width="${W}" height="${H}" role="img"><line x1="${L}" y1="${H-B}" x2="${W-8}" y2="${H-B}" stroke="#b9bfca"/>`+
    `<text x="${L-6}" y="${y(mx)+4}" text-anchor="end" class="hd">${fmt(mx)}</text><text x="${L-6}" y="${H-B+4}" text-anchor="end">0</text>`+
    `<path d="${line("findings")}" fill="none" stroke="#1d2330" stroke-width="2"/><path d="${line("break")}" fill="none" stroke="#d64545" stroke-width="2"/>`+
    h.map((p,i)=>`<circle cx="${x(i)}" cy="${y(p.findings)}" r="3"><title>${esc(p.at)}: ${fmt(p.findings)} open, ${fmt(p.break)} breaks, ${fmt(p.toggles)} toggles</title></circle>`).join("")+
    `<text x="${L}" y="${H-8}" font-size="11">${esc(when(h[0].at))}</text><text x="${W-8}" y="${H-8}" text-anchor="end" font-size="11">${esc(when(h[h.length-1].at))}</text></svg>`+
    `<div class="legend"><span><span class="sw" style="background:#1d2330"></span>open findings</span><span><span class="sw" style="background:#d64545"></span>breaks</span></div>`}
document.body.dataset.rendered="1";
"""


def _verdict(doc: dict[str, Any]) -> str:
    t, rb = doc["totals"], doc["rollback"]
    left = []
    if rb["toggles"]:
        left.append(f"{count(rb['toggles'], 'rollback toggle')} still set in "
                    f"{_repos(len(rb['repositories_with_toggles']))}")
    if rb["breaks"]:
        left.append(f"{count(rb['breaks'], 'break')} in "
                    f"{_repos(len(rb['repositories_with_breaks']))}")
    if rb["jobs_legacy"]:
        n = len(rb["jobs_legacy"])
        left.append(f"{count(n, 'job')} still {verb(n, 'builds', 'build')} legacy NCCL: "
                    + ", ".join(rb["jobs_legacy"][:8]) + (" ..." if len(rb["jobs_legacy"]) > 8 else ""))
    if rb["legacy_extensions"]:
        left.append("extensions built for legacy only: " + ", ".join(rb["legacy_extensions"][:12]))
    mood = "bad" if left else "warn" if t["findings"] else "good"
    head = (f"Before the rollback goes: {'; '.join(left[:2])}" if left else
            f"Nothing blocks the rollback's removal; {count(t['findings'], 'finding')} left" if t["findings"] else
            "Every repository is clean and no job builds legacy NCCL")
    items = left[2:]
    away = doc["one_write_away"]
    if away:
        items.append(f"one ncclx migrate --write from clean: {_repos(len(away))} ("
                     + ", ".join(away[:10]) + (" ..." if len(away) > 10 else "") + ")")
    sev = t["severity"]
    items.append("open: " + ", ".join(f"{s} {sev[s]:,}" for s in SEVERITIES)
                 + f"; {t['write']:,} fixable with --write, {t['unsafe']:,} more with --unsafe-fixes, "
                   f"{t['cpp']:,} in C++")
    return (f'<section id="verdict" class="verdict {mood}"><p class="big">{esc(head)}</p><ul>'
            + "".join(f"<li>{esc(x)}</li>" for x in items) + "</ul></section>")


def _trend(doc: dict[str, Any]) -> str:
    trend = doc.get("trend")
    if not trend:
        return ""
    since = f" since {trend['previous']}" if trend.get("previous") else ""
    gone = trend.get("repositories_not_reported") or []
    extra = f"; not reported this time: {', '.join(gone[:10])}" if gone else ""
    return (f'<section class="block" id="trend"><h2>Trend{esc(since)}</h2><p class="lines">'
            f"{trend['fixed']:,} fixed, {trend['new']:,} new{esc(extra)}</p><div id=\"burndown\"></div></section>")


def _block(bid: str, title: str, hint: str = "", detail: bool = False) -> str:
    table = (f'<input class="filter" id="{bid}-filter" placeholder="filter" aria-label="filter {esc(title)}">'
             f'<span class="count" id="{bid}-count"></span><div class="scroll" id="{bid}"></div>')
    if detail:
        # The table as wide as its columns (its own line when the panel would squeeze it); the
        # panel takes the rest, or the line below.
        table = (f'<p class="hint">{esc(hint)}</p><div class="pair"><div style="flex:0 1 auto;min-width:0">{table}</div>'
                 '<div class="detail" id="owner-detail"></div></div>')
    return f'<section class="block" id="{bid}-block"><h2>{esc(title)}</h2>{table}</section>'


def render_page(doc: dict[str, Any]) -> str:
    t = doc["totals"]
    data = {
        "repositories": [{k: v for k, v in r.items() if k != "fingerprints"} for r in doc["repositories"]],
        "owners": doc["owners"], "jobs": doc["jobs"], "history": doc["history"], "trend": doc["trend"],
    }
    body = [_CSS, _verdict(doc), _trend(doc),
            _block("repos", _repos(t["repositories"])),
            _block("owners", "Owners (from each repository's CODEOWNERS)",
                   "Click an owner for its repositories and files (the worst is open).", detail=True)]
    if doc["jobs"]:
        body.append(_block("jobs", count(t["jobs"], "job")))
    if doc["skipped"]:
        rows = "".join(f"<tr><td class=\"l mono\">{esc(s['path'])}</td><td class=\"l\">{esc(s['why'])}</td></tr>"
                       for s in doc["skipped"])
        body.append(f'<section class="block" id="skipped"><details><summary>'
                    f'{esc(count(len(doc["skipped"]), "input"))} skipped</summary><table class="rows"><tbody>{rows}'
                    "</tbody></table></details></section>")
    meta = esc(f"{doc['generated']}; {_repos(t['repositories'])} and {count(t['jobs'], 'job')}")
    return page("ncclx report", meta, "".join(body), data, _SCRIPT)
