"""``report DIR --html OUT.html``: one self-contained page that shows where every rank is.

A rank x group grid (each cell: the group's last completed call on that rank and the call it has in flight;
the stuck call's cells and the culprits marked, each culprit's main-thread stack under its row), a timeline
of the calls each rank has in flight (start to the time its state was written, the detection marked, on a
time axis in seconds), and the verdict's text.  No network, no external
file: inline CSS and one small inline script (a filter that keeps the ranks that matter at 1,024 ranks).
No torch: the page is made from the documents the watchdogs wrote.
"""
import html
import math
import os

from . import dumpdir as _dumpdir
from . import verdict as _verdict
from .text import clock, format_ranks

_CSS = """
body{font:13px/1.35 system-ui,sans-serif;margin:16px;color:#222}
h1{font-size:18px;margin:0 0 4px} h2{font-size:15px;margin:18px 0 6px}
.summary{font-weight:600;margin:4px 0 10px}
table.grid{border-collapse:collapse;font:11px/1.2 ui-monospace,monospace}
table.grid th,table.grid td{border:1px solid #ddd;padding:1px 4px;text-align:right;white-space:nowrap}
table.grid thead th{position:sticky;top:0;background:#f4f4f4}
td.ok{background:#fff} td.fly{background:#fff6d6} td.stuck{background:#ffd0d0;font-weight:700}
td.missing{background:#ffb060;font-weight:700} tr.culprit th{background:#ff9a3c;color:#000}
tr.dead th{text-decoration:line-through} td.none{color:#bbb}
.legend span{display:inline-block;padding:1px 6px;margin-right:6px;border:1px solid #ddd}
.tl{position:relative;height:14px;background:#fafafa;border-bottom:1px solid #eee}
.tl .bar{position:absolute;top:2px;height:10px;background:#f0a0a0}
.tl .det{position:absolute;top:0;width:2px;height:14px;background:#900}
.tlrow{display:flex;align-items:center;font:11px ui-monospace,monospace}
.tlrow .who{width:150px;flex:none}.tlrow .tl{flex:1}
pre{background:#f7f7f7;padding:8px;overflow:auto;font-size:12px}
pre.stack{margin:0;padding:4px 8px;text-align:left;font-size:11px;background:#fff3e6}
pre.stack b{color:#a33}
.tl.axis{background:none;border-bottom:1px solid #999;height:18px}
.tick{position:absolute;bottom:0;height:6px;border-left:1px solid #666}
.tick span{position:absolute;top:-12px;left:2px;font-size:10px;color:#444;white-space:nowrap}
"""

_SCRIPT = """
(function(){
  var box=document.getElementById('only');
  function apply(){
    var rows=document.querySelectorAll('tr.rank,div.tlrow');
    for(var i=0;i<rows.length;i++){
      var r=rows[i]; r.style.display=(box.checked && !r.classList.contains('key'))?'none':'';
    }
  }
  box.addEventListener('change',apply); apply();
  document.getElementById('loaded').textContent='yes';
})();
"""


def _e(x):
    return html.escape("" if x is None else str(x), quote=True)


def _streams(by_rank, v):
    """The columns: every collective stream any rank knows, then the p2p streams of stuck calls."""
    stuck = {h.stream for h in v.hangs}
    cols = {}
    for doc in by_rank.values():
        for g in doc.groups:
            s = g.stream
            if s is None or s in cols:
                continue
            if g.kind == "p2p" and s not in stuck:
                continue
            cols[s] = g
    return sorted(cols, key=lambda s: (cols[s].kind == "p2p", str(s)))


def render(by_rank, v, directory=""):
    """The page, as a string, for the documents ``by_rank`` ({rank: RankDoc}: those the verdict was built
    from, verdict.record_documents, else verdict.load_docs) and their verdict ``v`` (a Verdict)."""
    culprits = set(v.culprit_ranks or [])
    dead = set(v.ranks_dead or [])
    stuck = {}  # stream -> hang
    for h in v.hangs:
        stuck.setdefault(h.stream, h)
    cols = _streams(by_rank, v)
    world = v.world_size or (max(by_rank) + 1 if by_rank else 0)
    ranks = sorted(set(range(world)) | set(by_rank))
    out = ["<!DOCTYPE html><html><head><meta charset='utf-8'><title>c10d-observer: %s</title><style>%s</style>"
           "</head><body>" % (_e(v.summary), _CSS)]
    out.append("<h1>c10d-observer</h1><div class='summary' id='summary'>%s</div>" % _e(v.summary))
    out.append("<div>%s ranks reporting of %s; culprits: <b id='culprits'>%s</b>; silent: %s; dead: %s. "
               "Files: %s. Page loaded: <span id='loaded'>no</span></div>" % (
                   len(by_rank), _e(world), _e(format_ranks(sorted(culprits)) or "none"),
                   _e(format_ranks(v.ranks_silent or []) or "none"),
                   _e(format_ranks(sorted(dead)) or "none"), _e(directory)))
    out.append("<h2>Where every rank is</h2><div class='legend'><span class='ok'>n: last completed</span>"
               "<span style='background:#fff6d6'>n | in k: in flight</span><span style='background:#ffd0d0'>"
               "waiting in the stuck call</span><span style='background:#ffb060'>never arrived</span> "
               "<label><input type='checkbox' id='only' %s> only the ranks of stuck calls and the culprits</label>"
               "</div>" % ("checked" if len(ranks) > 64 else ""))
    out.append("<table class='grid' id='grid'><thead><tr><th>rank</th>%s</tr></thead><tbody>" % "".join(
        "<th title='%s'>%s%s</th>" % (_e(s), _e(s), " (stuck #%s)" % _e(stuck[s].seq) if s in stuck else "")
        for s in cols))
    for r in ranks:
        doc = by_rank.get(r)
        pos = doc.positions() if doc is not None else {}
        key = r in culprits or any(r in (h.waiting_ranks or []) or r in (h.missing_ranks or [])
                                   for h in stuck.values())
        cls = ["rank"] + (["culprit"] if r in culprits else []) + (["dead"] if r in dead else []) + \
            (["key"] if key else [])
        cells = []
        for s in cols:
            g = pos.get(s)
            h = stuck.get(s)
            if g is None:
                cells.append("<td class='none'>%s</td>" % ("?" if doc is None else "-"))
                continue
            done, fly = g.last_completed, g.in_flight.seq if g.in_flight is not None else None
            text = "%s" % (done if done is not None else 0)
            c = "ok"
            if fly is not None:
                text += " | in %s" % fly
                c = "fly"
            if h is not None and r in (h.waiting_ranks or []):
                c = "stuck"
            elif h is not None and r in (h.missing_ranks or []):
                c = "missing"
            cells.append("<td class='%s' data-rank='%d' data-stream='%s'>%s</td>" % (c, r, _e(s), _e(text)))
        who = "%d%s" % (r, " culprit" if r in culprits else "") if doc is not None else "%d (silent)" % r
        out.append("<tr class='%s'><th>%s</th>%s</tr>" % (" ".join(cls), _e(who), "".join(cells)))
        if r in culprits and doc is not None:
            out.append(_stack_row(r, doc, directory, len(cols) + 1))
    out.append("</tbody></table>")
    out.append(_timeline(by_rank, v, ranks, culprits, stuck))
    out.append("<h2>Verdict</h2><pre id='verdict'>%s</pre>" % _e(_verdict.format_text(v)))
    out.append("<script>%s</script></body></html>" % _SCRIPT)
    return "".join(out)


def _stack_row(rank, doc, directory, span):
    """A culprit's main thread, as Python prints a traceback (most recent call last), the job's own frames
    in bold; from its stacks file (where the documents were copied elsewhere, the file beside them)."""
    frames = _verdict.main_thread_frames(doc)
    if not frames and doc.stack_dump and directory:
        frames = _verdict.main_thread_frames(doc._replace(
            stack_dump=_dumpdir.DumpDir(directory).path(os.path.basename(doc.stack_dump))))
    if not frames:
        text = _e("no stack dump of rank %d's main thread was found" % rank)
    else:
        lines = [_e("main thread of rank %d (most recent call last):" % rank)]
        for f in reversed(frames):
            line = _e('  File "%s", line %s, in %s' % f)
            lines.append(line if _verdict.is_library(f) else "<b>%s</b>" % line)
        text = "\n".join(lines)
    return "<tr class='rank key stack'><td colspan='%d'><pre class='stack' data-rank='%d'>%s</pre></td></tr>" % (
        span, rank, text)


def _ticks(width):
    """Tick marks for a span of ``width`` seconds: a step of 1, 2 or 5 x 10^k, about six of them."""
    raw = width / 6.0
    mag = 10 ** math.floor(math.log10(raw)) if raw > 0 else 1.0
    step = next(m * mag for m in (1, 2, 5, 10) if m * mag >= raw)
    return step, [i * step for i in range(int(width / step) + 1)]


def _axis(lo, width):
    step, ticks = _ticks(width)
    fmt = "+%d s" if step >= 1 else "+%.1f s" if step >= 0.1 else "+%.2f s"
    marks = "".join("<div class='tick' style='left:%.2f%%'><span>%s</span></div>" % (100.0 * t / width, fmt % t)
                    for t in ticks)
    return ("<div class='tlrow axis-row'><div class='who'>%s</div><div class='tl axis' id='axis'>%s</div></div>"
            % (_e("s after %s" % clock(lo)), marks))


def _timeline(by_rank, v, ranks, culprits, stuck):
    """Each rank's calls in flight, from their start to when its state was written."""
    spans = []
    for r in ranks:
        doc = by_rank.get(r)
        end = doc.written_at if doc is not None else None
        for g in doc.groups if doc is not None else ():
            t0 = g.in_flight.started_at if g.in_flight is not None else None
            if t0 is not None and end is not None:
                spans.append((r, g.stream, g.in_flight.seq, g.in_flight.op, t0, end))
    if not spans:
        return "<h2>Calls in flight</h2><div>none</div>"
    lo, hi = min(s[4] for s in spans), max(s[5] for s in spans)
    width = max(hi - lo, 1e-3)
    det = [h.detected_at for h in stuck.values() if h.detected_at]
    out = ["<h2>Calls in flight (%.1f s, from %s)</h2>" % (width, _e(clock(lo))), _axis(lo, width)]
    keys = set(culprits)
    for h in stuck.values():
        keys.update(h.waiting_ranks or [])
        keys.update(h.missing_ranks or [])
    for r, stream, seq, op, t0, t1 in spans:
        bar = "<div class='bar' style='left:%.2f%%;width:%.2f%%' title='%s'></div>" % (
            100.0 * (t0 - lo) / width, max(0.3, 100.0 * (t1 - t0) / width),
            _e("rank %d: %s #%s on %s, %.1f s" % (r, op, seq, stream, t1 - t0)))
        marks = "".join("<div class='det' style='left:%.2f%%'></div>" % (100.0 * (d - lo) / width)
                        for d in det if lo <= d <= hi)
        out.append("<div class='tlrow%s'><div class='who'>%s</div><div class='tl'>%s%s</div></div>" % (
            " key" if r in keys else "", _e("rank %d %s" % (r, op or "")), bar, marks))
    return "".join(out)


def write(path, by_rank, v, directory=""):
    text = render(by_rank, v, directory)
    with open(path, "w") as f:
        f.write(text)
    return len(text)
