"""One self-contained HTML page: inline CSS, JS, SVG and data, nothing loaded from the network.

Shared by ``ncclx fr analyze --html`` (ranks x collective sequence) and ``ncclx doctor
--html`` (hosts or ranks x checks).  Both draw the same thing: a grid whose rows are sets of
ranks that share a result (collapsed into ranges, so 16k ranks stay a handful of rows) and
whose columns are what was compared.  The page embeds its data as one JSON block; the
script draws the grid as SVG and fills the detail panel on hover or click.  A page can be
attached to a ticket and opened offline.
"""

from __future__ import annotations

import html
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ._shown import JS_CONTROLS, json_shown, shown_page
from ._words import count

__all__ = ["count", "embed_json", "esc", "page", "ranges", "rank_text", "spans", "write_atomic"]


def esc(text: object) -> str:
    """Text for the page: its control characters shown as repr writes them (another machine's
    text may hold escape sequences, _shown), then HTML-escaped."""
    return html.escape(shown_page(text), quote=True)


def embed_json(obj: Any) -> str:
    """JSON that is safe inside <script>: no '<', '>' or '&' can close the element, and no
    control character is in the file raw (the script's esc() shows them)."""
    text = json_shown(json.dumps(obj, separators=(",", ":"), ensure_ascii=False))
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def spans(numbers: Iterable[int]) -> list[list[int]]:
    """[0,1,2,3,5] -> [[0,3],[5,5]]."""
    out: list[list[int]] = []
    for n in sorted(set(numbers)):
        if out and n == out[-1][1] + 1:
            out[-1][1] = n
        else:
            out.append([n, n])
    return out


def ranges(numbers: Iterable[int], limit: int = 0) -> str:
    """[0,1,2,3,5] -> "0-3, 5"; with ``limit`` at most that many spans, then "…"."""
    parts = [f"{a}-{b}" if a != b else str(a) for a, b in spans(numbers)]
    if limit and len(parts) > limit:
        parts = [*parts[:limit], "…"]
    return ", ".join(parts)


def rank_text(ranks: Iterable[int], limit: int = 8) -> str:
    """"rank 2", "ranks 0, 1 and 3", "ranks 0-1, 3-1023 (1,023 ranks)"."""
    rs = sorted(set(ranks))
    if not rs:
        return "no ranks"
    if len(rs) == 1:
        return f"rank {rs[0]}"
    if len(rs) <= 4 and len(spans(rs)) > 1:  # "ranks 0, 1 and 3", as the text report says it
        return f"ranks {', '.join(map(str, rs[:-1]))} and {rs[-1]}"
    text = f"ranks {ranges(rs, limit)}"
    return f"{text} ({count(len(rs), 'rank')})" if len(rs) > 3 else text


_CSS = """
:root{--ok:#2e9d5b;--started:#f0a020;--sched:#6f9fdc;--fail:#d64545;--err:#8e44ad;--skip:#d9d9d9;
--ink:#1d2330;--mute:#5b6475;--line:#d5d9e0;--bg:#f6f7f9}
*{box-sizing:border-box}
body{margin:0;font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:var(--ink);background:var(--bg)}
header{padding:14px 24px 8px;background:#fff;border-bottom:1px solid var(--line)}
header h1{margin:0;font-size:18px}
header .meta{color:var(--mute);font-size:12.5px;word-break:break-all}
main{padding:12px 24px 24px}
.verdict{border-radius:8px;padding:12px 16px;margin:4px 0 14px;border:2px solid}
.verdict.bad{background:#fdeeee;border-color:var(--fail)}
.verdict.warn{background:#fff6e6;border-color:var(--started)}
.verdict.good{background:#eaf6ef;border-color:var(--ok)}
.verdict .big{font-size:20px;font-weight:700;margin:0 0 4px}
.verdict ul{margin:4px 0 0;padding-left:20px}
.legend{display:flex;flex-wrap:wrap;gap:14px;margin:0 0 12px;color:var(--mute);font-size:12.5px}
.legend span{display:inline-flex;align-items:center;gap:5px}
.sw{width:14px;height:14px;border-radius:3px;border:1px solid #0003;display:inline-block}
section.block{background:#fff;border:1px solid var(--line);border-radius:8px;padding:10px 14px;margin:0 0 14px}
section.block h2{font-size:15px;margin:0 0 4px}
section.block p.lines{margin:0 0 8px;color:var(--ink)}
.pair{display:flex;gap:16px;align-items:flex-start;flex-wrap:wrap}
.grid{overflow:auto;max-height:70vh;max-width:100%;flex:0 1 auto}
.grid svg{display:block}
.grid .row{cursor:pointer;outline:none}.grid .row:focus .bg{fill:#dfe7fb}
.grid .row:hover .bg,.grid .row.sel .bg{fill:#e8eefc}
.grid text{font:12px system-ui,sans-serif;fill:var(--ink)}
.grid text.hd{fill:var(--mute);font-size:11px}
.grid text.culprit{fill:var(--fail);font-weight:700}
.c-c,.c-ok{fill:var(--ok)}.c-st,.c-warn{fill:var(--started)}.c-sc{fill:var(--sched)}
.c-ne{fill:#fff;stroke:#b9bfca}.c-nd,.c-none{fill:url(#hatch)}
.c-fail{fill:var(--fail)}.c-error{fill:var(--err)}.c-skip{fill:var(--skip)}
.detail{flex:1 1 420px;min-width:320px;border-left:3px solid var(--line);padding:2px 0 2px 12px;font-size:13px}
.detail h3{margin:0 0 4px;font-size:14px}
.detail .hint{color:var(--mute)}
.detail table{border-collapse:collapse;width:100%;margin-top:6px}
.detail th,.detail td{border-bottom:1px solid var(--line);padding:3px 6px;text-align:left;vertical-align:top;font-size:12px}
.detail td.mono,.detail .mono{font-family:ui-monospace,Menlo,Consolas,monospace;font-size:11.5px;overflow-wrap:anywhere}
.detail td.stack{overflow-wrap:break-word}.detail .loc{white-space:nowrap}
.chips{display:flex;flex-wrap:wrap;gap:4px;margin:4px 0}
.chips button{font:11.5px ui-monospace,monospace;padding:1px 6px;border:1px solid var(--line);background:#fff;border-radius:4px;cursor:pointer}
.chips button.on{background:var(--ink);color:#fff}
.tag{display:inline-block;padding:0 6px;border-radius:4px;font-size:11.5px;color:#fff;background:var(--mute)}
.tag.culprit,.tag.fail{background:var(--fail)}.tag.ok,.tag.c{background:var(--ok)}.tag.warn,.tag.st{background:var(--started)}
.tag.sc,.tag.scheduled{background:var(--sched)}.tag.started{background:var(--started)}.tag.completed{background:var(--ok)}
.tag.never-entered{background:var(--fail)}.tag.error{background:var(--err)}.tag.ne,.tag.nd,.tag.skip,.tag.none{background:#888}
footer{color:var(--mute);font-size:11.5px;padding:0 24px 16px}
"""

# drawGrid(el, spec, onPick): spec = {cols: [{label, tip, hl}], rows: [{label, tip, cells: [code],
# marks: [colIndex], flag}], names: {code: "state in words"}}; onPick(rowIndex, pinned).
_JS = r"""
function esc(s){return String(s).replace(/@CONTROLS@/g,c=>{const n=c.charCodeAt(0);return c==="\r"?"\\r":n<256?"\\x"+n.toString(16).padStart(2,"0"):"\\u"+n.toString(16).padStart(4,"0")})
  .replace(/[&<>"']/g,c=>({"&":"&amp;","<":"&lt;",">":"&gt;",'"':"&quot;","'":"&#39;"}[c]))}
function clip(s,n){s=String(s);return s.length>n?s.slice(0,n-1)+"\u2026":s}
function drawGrid(el,spec,onPick){
  const cw=24,ch=22,lw=spec.labelWidth||300,hh=spec.headHeight||84,cols=spec.cols,rows=spec.rows;
  const w=lw+cols.length*cw+Math.round(hh*0.6),h=hh+rows.length*ch+6;
  const o=[`<svg xmlns="http://www.w3.org/2000/svg" width="${w}" height="${h}" role="img">`,
    `<defs><pattern id="hatch" width="6" height="6" patternUnits="userSpaceOnUse" patternTransform="rotate(45)">`,
    `<rect width="6" height="6" fill="#c9ccd2"/><line x1="0" y1="0" x2="0" y2="6" stroke="#7b808a" stroke-width="2.5"/></pattern></defs>`];
  cols.forEach((c,j)=>{const x=lw+j*cw+cw/2;
    // The outline frames the cells only: the rotated label above it would cross its edges.
    if(c.hl)o.push(`<rect class="hl" x="${lw+j*cw}" y="${hh}" width="${cw}" height="${h-hh-4}" fill="none" stroke="#d64545" stroke-width="2" stroke-dasharray="4 2" rx="3"/>`);
    o.push(`<text class="hd${c.hl?" hl":""}" transform="translate(${x+4},${hh-6}) rotate(-55)" ${c.hl?'style="fill:#d64545;font-weight:700"':""}><title>${esc(c.tip||c.label)}</title>${esc(clip(c.label,spec.headClip||16))}</text>`)});
  rows.forEach((r,i)=>{const y=hh+i*ch,cls=r.flag?"culprit":"";
    o.push(`<g class="row" data-row="${i}" tabindex="0" role="button"><rect class="bg" x="0" y="${y}" width="${w}" height="${ch}" fill="transparent"/>`);
    o.push(`<text class="${cls}" x="6" y="${y+15}"><title>${esc(r.tip||r.label)}</title>${esc(clip((r.flag?"\u25B6 ":"")+r.label,Math.floor(lw/7)))}</text>`);
    r.cells.forEach((k,j)=>{const x=lw+j*cw+2;
      o.push(`<rect class="c-${k}" x="${x}" y="${y+2}" width="${cw-4}" height="${ch-4}" rx="3"><title>${esc(r.label)} \u00B7 ${esc(cols[j].label)}: ${esc(spec.names[k]||k)}</title></rect>`)});
    (r.marks||[]).forEach(j=>{const x=lw+j*cw+2;
      o.push(`<rect x="${x-1}" y="${y+1}" width="${cw-2}" height="${ch-2}" rx="4" fill="none" stroke="#b00020" stroke-width="2.5"/>`,
        `<text x="${x+cw/2-2}" y="${y+15}" text-anchor="middle" style="fill:#fff;font-weight:700">\u2260</text>`)});
    if(r.flag)o.push(`<rect x="1" y="${y+1}" width="${w-2}" height="${ch-2}" rx="4" fill="none" stroke="#d64545" stroke-width="2"/>`);
    o.push(`</g>`)});
  o.push("</svg>");el.innerHTML=o.join("");
  let pinned=-1;
  const sel=i=>{el.querySelectorAll(".row").forEach(g=>g.classList.toggle("sel",+g.dataset.row===i))};
  el.querySelectorAll(".row").forEach(g=>{const i=+g.dataset.row;
    g.addEventListener("mouseenter",()=>{if(pinned<0)onPick(i,false)});
    const pin=()=>{pinned=i;sel(i);onPick(i,true)};
    g.addEventListener("click",pin);
    g.addEventListener("keydown",ev=>{if(ev.key==="Enter"||ev.key===" "){ev.preventDefault();pin()}})});
}
function fromSpans(sp){const o=[];for(const [a,b] of sp)for(let r=a;r<=b;r++)o.push(r);return o}
function legend(el,items){el.innerHTML=items.map(([k,t])=>`<span><svg width="14" height="14"><defs><pattern id="hl${k}" width="6" height="6" patternUnits="userSpaceOnUse" patternTransform="rotate(45)"><rect width="6" height="6" fill="#c9ccd2"/><line x1="0" y1="0" x2="0" y2="6" stroke="#7b808a" stroke-width="2.5"/></pattern></defs><rect class="c-${k}" width="14" height="14" rx="3" ${k==="nd"||k==="none"?`style="fill:url(#hl${k})"`:""}/></svg>${esc(t)}</span>`).join("")}
"""
_JS = _JS.replace("@CONTROLS@", JS_CONTROLS)  # (the class _shown escapes, bar newlines and tabs)


def write_atomic(path: Path, text: str) -> None:
    """Write via a temporary file and rename: never a half-written page.  OSError propagates."""
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(path)
    finally:
        tmp.unlink(missing_ok=True)


def page(title: str, meta: str, body: str, data: Any, script: str) -> str:
    """The whole document: ``body`` is trusted HTML, ``data`` is embedded as JSON for ``script``."""
    from . import __version__

    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        "<meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">"
        # No network, ever: the page must open offline and leak nothing when attached to a ticket.
        "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
        "style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:\">"
        f"<title>{esc(title)}</title><style>{_CSS}</style></head><body>"
        f"<header><h1>{esc(title)}</h1><div class=\"meta\">{meta}</div></header>"
        f"<main>{body}</main>"
        f"<footer>ncclx-migrate {esc(__version__)}: a self-contained page (no network).</footer>"
        f"<script id=\"data\" type=\"application/json\">{embed_json(data)}</script>"
        f"<script>{_JS}\nconst DATA=JSON.parse(document.getElementById('data').textContent);\n"
        f"{script}</script></body></html>\n"
    )
