"""Self-contained HTML report of a ``pysched simulate`` run (no external scripts, styles or fonts).

The page embeds the result as JSON and draws its charts as inline SVG with a small script:
utilisation per zone and per node, before and after, for every resource the nodes offer. The
placement table and the explanations are plain HTML. When the script has drawn every chart it sets
``data-render="ok"`` on ``<body>``; a script error sets ``data-render="error: ..."`` and shows the
message on the page, so a headless browser (and the test) can tell a broken page from a good one.
"""

from __future__ import annotations

import html
import json
from pathlib import Path

from pysched.tools.simulate import SimulationResult, format_explain

_STYLE = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:24px;color:#1d2430;max-width:1200px}
h1{font-size:22px}h2{font-size:18px;margin-top:32px}
table{border-collapse:collapse;font-size:13px}td,th{border-bottom:1px solid #e3e6ea;padding:4px 10px;text-align:left}
.unsched{color:#b3261e}.ok{color:#1b6e20}.chart{margin:8px 0 20px}.legend span{display:inline-block;margin-right:14px}
.sw{display:inline-block;width:12px;height:12px;margin-right:4px;vertical-align:middle}
pre{background:#f6f8fa;padding:12px;overflow:auto;font-size:12px}#error{color:#b3261e;font-weight:bold}
"""

_SCRIPT = r"""
(function () {
  var body = document.body;
  window.onerror = function (msg) {
    body.setAttribute('data-render', 'error: ' + msg);
    document.getElementById('error').textContent = 'Chart rendering failed: ' + msg;
  };
  var data = JSON.parse(document.getElementById('sim-data').textContent);
  var SVG = 'http://www.w3.org/2000/svg';
  var BEFORE = '#9aa5b1', AFTER = '#2f6fdf';
  function el(name, attrs, text) {
    var e = document.createElementNS(SVG, name);
    for (var k in attrs) e.setAttribute(k, attrs[k]);
    if (text !== undefined) e.textContent = text;
    return e;
  }
  function pct(row, r) {
    var a = row.allocatable[r];
    return a ? Math.min(100, 100 * row.requested[r] / a) : 0;
  }
  function chart(container, title, rowsBefore, rowsAfter, labelKey, r) {
    var n = rowsBefore.length, barH = 14, gap = 10, left = 160, width = 420;
    var height = 30 + n * (2 * barH + gap);
    var svg = el('svg', {width: left + width + 80, height: height, role: 'img', 'aria-label': title});
    svg.appendChild(el('text', {x: 0, y: 16, 'font-size': 14, 'font-weight': 'bold'}, title));
    for (var i = 0; i < n; i++) {
      var y = 30 + i * (2 * barH + gap), b = pct(rowsBefore[i], r), a = pct(rowsAfter[i], r);
      svg.appendChild(el('text', {x: 0, y: y + barH + 4, 'font-size': 12}, rowsBefore[i][labelKey] || '(no zone)'));
      svg.appendChild(el('rect', {x: left, y: y, width: width, height: 2 * barH, fill: '#f1f3f5'}));
      svg.appendChild(el('rect', {'class': 'bar before', x: left, y: y, width: width * b / 100, height: barH,
                                  fill: BEFORE}));
      svg.appendChild(el('rect', {'class': 'bar after', x: left, y: y + barH, width: width * a / 100, height: barH,
                                  fill: AFTER}));
      var has = rowsAfter[i].allocatable[r] > 0;
      svg.appendChild(el('text', {x: left + width + 6, y: y + barH + 4, 'font-size': 12},
                         has ? Math.floor(b) + '% \u2192 ' + Math.floor(a) + '%' : 'n/a'));
    }
    var div = document.createElement('div');
    div.className = 'chart';
    div.appendChild(svg);
    container.appendChild(div);
  }
  var u = data.utilisation, zones = document.getElementById('zone-charts'),
      nodes = document.getElementById('node-charts');
  u.before.resources.forEach(function (r) {
    chart(zones, r + ' by zone', u.before.zones, u.after.zones, 'zone', r);
    chart(nodes, r + ' by node', u.before.nodes, u.after.nodes, 'node', r);
  });
  body.setAttribute('data-render', 'ok');
})();
"""


def _placements_table(result: SimulationResult) -> str:
    rows = []
    for p in result.placements:
        if p.node:
            cell = f'<td class="ok">{html.escape(p.node)}</td>'
        else:
            cell = f'<td class="unsched">{html.escape(p.code)}: {html.escape(p.message)}</td>'
        rows.append(f"<tr><td>{html.escape(p.pod)}</td>{cell}</tr>")
    return "<table><tr><th>Pod</th><th>Node / reason</th></tr>" + "".join(rows) + "</table>"


def render(result: SimulationResult) -> str:
    placed = sum(1 for p in result.placements if p.node)
    data = json.dumps(result.as_dict()).replace("</", "<\\/")
    legend = ('<div class="legend"><span><i class="sw" style="background:#9aa5b1"></i>before</span>'
              '<span><i class="sw" style="background:#2f6fdf"></i>after</span></div>')
    explain = "".join(f"<h3>{html.escape(k)}</h3><pre>{html.escape(format_explain(t))}</pre>"
                      for k, t in result.explain.items())
    notes = "".join(f"<li>{html.escape(n)}</li>" for n in result.notes)
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>pysched simulation</title>
<style>{_STYLE}</style></head>
<body data-render="pending">
<h1>pysched simulation</h1>
<p>Profile <b>{html.escape(result.profile)}</b>, tie-break seed {result.seed}:
<b>{placed}/{len(result.placements)}</b> pods placed.</p>
<p id="error"></p>
<h2>Placements</h2>
{_placements_table(result)}
<h2>Utilisation by zone</h2>{legend}<div id="zone-charts"></div>
<h2>Utilisation by node</h2>{legend}<div id="node-charts"></div>
{'<h2>Explanations</h2>' + explain if explain else ''}
{'<h2>Notes</h2><ul>' + notes + '</ul>' if notes else ''}
<script type="application/json" id="sim-data">{data}</script>
<script>{_SCRIPT}</script>
</body></html>
"""


def write_report(result: SimulationResult, path: str | Path) -> Path:
    p = Path(path)
    p.write_text(render(result))
    return p
