"""``ncclx compare --html``: one self-contained page, one busbw-against-size plot per collective.

Both arms on each plot (A solid, B dashed), one dtype at a time (chips switch it), each point
with the bar of its 95% interval (of the median block time, as busbw); a case with a mismatch
is a red ring, a regression an orange one, an improvement a green one.  Each plot's heading
says the smallest slowdown of B that run could have detected in that collective.  Hovering a
point shows both arms' numbers and B against A with its interval.  Drawn as inline SVG by the
page's script from the report embedded as JSON.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .._htmlpage import esc, page, write_atomic

__all__ = ["render_page", "write_page"]

_EXTRA_CSS = """<style>
.plot svg{display:block}.plot text{font:11px system-ui,sans-serif;fill:#5b6475}
.plot .a{stroke:#2b6cb0;fill:none;stroke-width:2}.plot .b{stroke:#d9822b;fill:none;stroke-width:2;stroke-dasharray:6 3}
.plot circle.a{fill:#2b6cb0}.plot circle.b{fill:#d9822b}
.plot circle.bad{fill:none;stroke:#d64545;stroke-width:2.5}.plot circle.slow{fill:none;stroke:#f0a020;stroke-width:2.5}
.plot circle.fast{fill:none;stroke:#2f9e44;stroke-width:2.5}.plot line.bar{stroke-width:1.5}
.plot line.bar.a{stroke:#2b6cb0}.plot line.bar.b{stroke:#d9822b}.plot .det{font-size:12.5px;color:#5b6475;margin:0 0 4px}
.plots{display:grid;grid-template-columns:repeat(auto-fill,minmax(460px,1fr));gap:12px}
#tip{min-height:1.4em;color:#1d2330;font-size:12.5px}
</style>"""

_SCRIPT = r"""
const W=440,H=250,L=70,R=14,T=12,B=36;
function fmtSize(n){for(const [u,s] of [["G",2**30],["M",2**20],["K",1024]])if(n>=s&&n%s===0)return (n/s)+u;return n+"B"}
function draw(dtype){
  document.querySelectorAll(".chips button").forEach(b=>b.classList.toggle("on",b.dataset.t===dtype));
  const holder=document.getElementById("plots");holder.innerHTML="";
  DATA.collectives.forEach(c=>{
    const rows=DATA.rows.filter(r=>r.collective===c&&r.dtype===dtype&&!r.skip);
    const sec=document.createElement("section");sec.className="block plot";sec.dataset.collective=c;
    sec.innerHTML=`<h2>${esc(c)}</h2>`;holder.appendChild(sec);
    const det=(DATA.sensitivity||[]).find(x=>x.collective===c);
    if(det)sec.insertAdjacentHTML("beforeend",`<p class="det">${det.detectable===null?
      "could not detect a slowdown of any size with "+det.rounds+" rounds":
      "could not detect a slowdown of B smaller than "+(det.detectable*100).toFixed(0)+"% here"}</p>`);
    if(!rows.length){sec.insertAdjacentHTML("beforeend","<p class='hint'>no case ran</p>");return}
    const xs=rows.map(r=>Math.log2(r.bytes)),ys=rows.flatMap(r=>r.arms.map(a=>Math.max(a.busbw_gbps||0,
      a.busbw_interval_gbps?a.busbw_interval_gbps[1]:0)));
    const x0=Math.min(...xs),x1=Math.max(...xs,x0+1),y1=Math.max(...ys,1e-9)*1.1;
    const px=x=>L+(x-x0)/(x1-x0)*(W-L-R),py=y=>H-B-(y/y1)*(H-T-B);
    const o=[`<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 ${W} ${H}" style="width:100%;max-width:640px;height:auto" role="img" aria-label="busbw of ${esc(c)}">`];
    o.push(`<line x1="${L}" y1="${H-B}" x2="${W-R}" y2="${H-B}" stroke="#999"/><line x1="${L}" y1="${T}" x2="${L}" y2="${H-B}" stroke="#999"/>`);
    for(let k=0;k<=4;k++){const y=y1*k/4;o.push(`<text x="${L-4}" y="${py(y)+4}" text-anchor="end">${y.toPrecision(2)}</text>`)}
    rows.forEach(r=>o.push(`<text x="${px(Math.log2(r.bytes))}" y="${H-B+14}" text-anchor="middle">${fmtSize(r.bytes)}</text>`));
    o.push(`<text x="${(L+W-R)/2}" y="${H-4}" text-anchor="middle">message size</text>`);
    o.push(`<text transform="translate(12,${(T+H-B)/2}) rotate(-90)" text-anchor="middle">busbw GB/s</text>`);
    [0,1].forEach(k=>{const cls=k?"b":"a";
      const pts=rows.filter(r=>r.arms[k]&&r.arms[k].busbw_gbps!==undefined).map(r=>[px(Math.log2(r.bytes)),py(r.arms[k].busbw_gbps),r]);
      if(pts.length)o.push(`<polyline class="${cls}" points="${pts.map(p=>p[0]+","+p[1]).join(" ")}"/>`);
      pts.forEach(([x,y,r])=>{const iv=r.arms[k].busbw_interval_gbps,dx=k?2:-2;
        if(iv)o.push(`<line class="bar ${cls}" x1="${x+dx}" x2="${x+dx}" y1="${py(iv[0])}" y2="${py(iv[1])}"/>`);
        o.push(`<circle class="${cls} pt" cx="${x}" cy="${y}" r="3.5" data-row="${DATA.rows.indexOf(r)}"/>`);
        if(k===1&&r.arms.some(a=>a.check!=="ok"))o.push(`<circle class="bad" cx="${x}" cy="${y}" r="8"/>`);
        else if(k===1&&r.timing==="regression")o.push(`<circle class="slow" cx="${x}" cy="${y}" r="8"/>`);
        else if(k===1&&r.timing==="improvement")o.push(`<circle class="fast" cx="${x}" cy="${y}" r="8"/>`)})});
    o.push("</svg>");sec.insertAdjacentHTML("beforeend",o.join(""));
    sec.querySelectorAll("circle.pt").forEach(p=>p.addEventListener("mouseenter",()=>{
      const r=DATA.rows[+p.dataset.row];
      document.getElementById("tip").textContent=`${r.collective} ${fmtSize(r.bytes)} ${r.dtype}: `+r.arms.map(a=>
        `${a.label} ${a.median_us===undefined?"-":a.median_us.toFixed(1)+" us, "+a.busbw_gbps.toFixed(3)+" GB/s"+
          (a.busbw_interval_gbps?" ("+a.busbw_interval_gbps.map(v=>v.toFixed(3)).join(" to ")+")":"")} (${a.check})`).join("; ")+
        (r.delta===undefined?"":`; B vs A ${(r.delta*100).toFixed(1)}%`+((r.decided_by||r.interval)?
          " ["+(r.decided_by||r.interval).map(v=>(v*100).toFixed(0)+"%").join(" to ")+"]":""))}))});
}
document.querySelectorAll(".chips button").forEach(b=>b.addEventListener("click",()=>draw(b.dataset.t)));
draw(DATA.dtypes[0]);
document.body.dataset.rendered="1";
"""


def render_page(report: dict[str, Any]) -> str:
    arms = report["arms"]
    bad = report["exit"] != 0
    findings = [*report["problems"], *(f"mismatch: {t}" for t in report["mismatch_text"]),
                *(f"slower: {t}" for t in report["regression_text"]),
                *(f"faster: {t}" for t in report.get("improvement_text", []))]
    items = "".join(f"<li>{esc(t)}</li>" for t in findings[:20])
    more = f"<li>... and {len(findings) - 20} more</li>" if len(findings) > 20 else ""
    body = (
        _EXTRA_CSS
        + f'<div class="verdict {"bad" if bad else "good"}" id="verdict"><p class="big">{esc(report["verdict"])}</p>'
        + (f"<ul>{items}{more}</ul>" if findings else "") + "</div>"
        + '<div class="legend">'
        + "".join(f"<span>{esc(a['label'])}{' (baseline)' if n == 0 else ''}: {esc(a['spec'])} "
                  f"&rarr; {esc(a['built'] or 'nothing')}</span>" for n, a in enumerate(arms))
        + "<span>A solid, B dashed, bars: 95% intervals; red ring: mismatch; orange ring: regression; "
          "green ring: improvement</span></div>"
        + '<div class="chips">' + "".join(f'<button data-t="{esc(t)}">{esc(t)}</button>'
                                          for t in report["settings"]["dtypes"]) + "</div>"
        + '<div id="tip" class="hint">hover a point for both arms\' numbers</div><div class="plots" id="plots"></div>'
    )
    data = {"rows": report["rows"], "dtypes": report["settings"]["dtypes"], "sensitivity": report.get("sensitivity", []),
            "collectives": [c for c in report["settings"]["collectives"]
                            if any(r["collective"] == c for r in report["rows"])]}
    meta = (f"{report['world']} ranks on {esc(report['device'])}, torch {esc(report['torch'] or '?')}; "
            f"{report['settings']['rounds']} paired rounds of {report['settings']['block_iters']} timed calls per arm "
            f"({report['settings']['warmup']} warm-up first); "
            f"threshold {report['settings']['threshold']:.0%}")
    return page("ncclx compare", meta, body, data, _SCRIPT)


def write_page(path: Path, report: dict[str, Any]) -> None:
    write_atomic(path, render_page(report))
