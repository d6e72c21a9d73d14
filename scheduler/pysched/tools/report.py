"""Self-contained HTML report of a ``pysched simulate`` run (no external scripts, styles or fonts).

One file, readable offline, that stays usable from 7 to 5,000 nodes and tens of thousands of pods.
The data (``report_data.build``) is embedded once as JSON; a small vanilla script draws from it:

* a summary first: pods placed and unschedulable, unschedulable pods per FailedScheduling reason,
  preemptions, pod groups;
* utilisation by zone, instance type and capacity type as heatmaps (requested/allocatable, before
  -> after, per resource) and histograms of per-node utilisation;
* sortable, filterable, paginated node and pod tables (only one page of rows is in the DOM);
* per explained pod (``--explain``) a score matrix (plugins x the best-scored nodes) and the
  filter rejections grouped by plugin and reason;
* up to ``NODE_BARS_UP_TO`` nodes, the per-node before/after bar charts of the small-cluster view;
* how to reproduce the run: the command line, each input file with its sha256, the flags, and the
  effective configuration (rendered server-side, escaped); per pod, the nodes
  ``percentageOfNodesToScore`` left unevaluated and the nodes tied at the top score.

The first page of the pod table is also rendered server-side (escaped), so the page says where
pods went even without the script. When the script has drawn everything it sets
``data-render="ok"`` and ``data-height`` (the document height in px) on ``<body>``; a script error
sets ``data-render="error: ..."`` and shows the message, so a headless browser (and the tests) can
tell a broken page from a good one. Each table carries ``data-total``, ``data-matching`` and
``data-shown`` (all rows, rows passing the filter, rows in the DOM).
"""

from __future__ import annotations

import html
import json
from pathlib import Path

from pysched.tools.report_data import build
from pysched.tools.simulate import SimulationResult

PAGE_SIZE = 25

_STYLE = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:24px;color:#1d2430;max-width:1320px}
h1{font-size:22px;margin-bottom:4px}h2{font-size:18px;margin:28px 0 8px}h3{font-size:15px;margin:18px 0 6px}
table{border-collapse:collapse;font-size:13px}td,th{border-bottom:1px solid #e3e6ea;padding:3px 9px;text-align:left;
white-space:nowrap}th{background:#f6f8fa}td.num,th.num{text-align:right}
.unsched{color:#b3261e}.ok{color:#1b6e20}.chart{margin:6px 18px 12px 0;display:inline-block;vertical-align:top}
.legend span{display:inline-block;margin-right:14px}.muted{color:#69707a}
.sw{display:inline-block;width:12px;height:12px;margin-right:4px;vertical-align:middle}
.cards{display:flex;gap:12px;flex-wrap:wrap;margin:12px 0}.card{border:1px solid #e3e6ea;border-radius:6px;
padding:8px 14px;min-width:120px}.card b{display:block;font-size:22px}.card.bad b{color:#b3261e}
.grid{display:flex;gap:24px;flex-wrap:wrap;align-items:flex-start}
.heat td.cell{text-align:center;min-width:92px}
.tbl th{cursor:pointer;user-select:none}.tbl th.sorted-asc:after{content:" \\25B2"}
.tbl th.sorted-desc:after{content:" \\25BC"}.tbl td.reason{white-space:normal;max-width:560px}
.tools{margin:6px 0;display:flex;gap:8px;align-items:center;flex-wrap:wrap;font-size:13px}
.tools input[type=search]{width:260px;padding:3px 6px}.pager button{margin:0 2px}
.mini{display:inline-block;height:8px;background:#2f6fdf;vertical-align:middle;margin-right:6px}
.matrix td.cell{text-align:center;min-width:64px}.matrix th.plugin{white-space:normal;max-width:110px;
word-break:break-word;vertical-align:bottom;font-size:12px}
pre{background:#f6f8fa;padding:12px;overflow:auto;font-size:12px}#error{color:#b3261e;font-weight:bold}
"""

_SCRIPT = r"""
(function () {
  var body = document.body;
  window.onerror = function (msg) {
    body.setAttribute('data-render', 'error: ' + msg);
    document.getElementById('error').textContent = 'Report rendering failed: ' + msg;
  };
  var data = JSON.parse(document.getElementById('sim-data').textContent);
  var SVG = 'http://www.w3.org/2000/svg';
  var BEFORE = '#9aa5b1', AFTER = '#2f6fdf';
  function $(id) { return document.getElementById(id); }
  function h(tag, attrs, text) {
    var e = document.createElement(tag);
    for (var k in attrs || {}) e.setAttribute(k, attrs[k]);
    if (text !== undefined && text !== null) e.textContent = text;
    return e;
  }
  function s(name, attrs, text) {
    var e = document.createElementNS(SVG, name);
    for (var k in attrs) e.setAttribute(k, attrs[k]);
    if (text !== undefined) e.textContent = text;
    return e;
  }
  function fmtPct(v) { return v === null || v === undefined ? 'n/a' : Math.floor(v) + '%'; }
  function heat(v) {  // white (0 %) to deep blue (100 %), red past 100 %
    if (v === null || v === undefined) return '#ffffff';
    if (v > 100) return '#f4b6b0';
    var l = 97 - Math.round(v * 0.45);
    return 'hsl(216,70%,' + l + '%)';
  }

  // -- summary ---------------------------------------------------------------------------------
  var sm = data.summary;
  function card(label, value, bad) {
    var c = h('div', {'class': 'card' + (bad ? ' bad' : '')});
    c.appendChild(h('b', {'class': 'value', 'data-key': label}, String(value)));
    c.appendChild(h('span', {'class': 'muted'}, label));
    return c;
  }
  var cards = $('cards');
  cards.appendChild(card('pods', sm.pods));
  cards.appendChild(card('placed', sm.placed));
  cards.appendChild(card('unschedulable', sm.unplaced, sm.unplaced > 0));
  cards.appendChild(card('nodes', sm.nodes));
  if (sm.preemptions.length) cards.appendChild(card('preemptions', sm.preemptions.length));
  if (sm.sampling.podsWithNodesNotEvaluated) {
    cards.appendChild(card('pods placed from a node sample', sm.sampling.podsWithNodesNotEvaluated));
  }
  if (sm.sampling.podsWithTiesAtTop) {
    cards.appendChild(card('pods with a tie at the top', sm.sampling.podsWithTiesAtTop));
  }
  if (sm.groups.length) {
    var ok = sm.groups.filter(function (g) { return g.verdict === 'placed'; }).length;
    cards.appendChild(card('pod groups placed', ok + '/' + sm.groups.length, ok < sm.groups.length));
  }
  function simpleTable(container, id, head, rows, numeric) {
    var t = h('table', {id: id}), tr = h('tr');
    head.forEach(function (c, i) { tr.appendChild(h('th', numeric && numeric[i] ? {'class': 'num'} : {}, c)); });
    t.appendChild(tr);
    rows.forEach(function (r) {
      var row = h('tr');
      r.forEach(function (c, i) { row.appendChild(h('td', numeric && numeric[i] ? {'class': 'num'} : {}, c)); });
      t.appendChild(row);
    });
    container.appendChild(t);
    return t;
  }
  if (sm.reasons.length) {
    var rs = $('reasons');
    rs.appendChild(h('h3', {}, 'Unschedulable pods by reason'));
    simpleTable(rs, 'reason-table', ['reason (as in FailedScheduling)', 'pods'],
                sm.reasons.map(function (r) { return [r.reason, String(r.pods)]; }), [false, true]);
  }
  if (sm.preemptions.length) {
    var ps = $('preemptions');
    ps.appendChild(h('h3', {}, 'Preemptions'));
    simpleTable(ps, 'preemption-table', ['pod', 'nominated node', 'victims'],
                sm.preemptions.map(function (p) { return [p.pod, p.node, p.victims.join(', ')]; }));
  }
  if (sm.groups.length) {
    var gs = $('groups');
    gs.appendChild(h('h3', {}, 'Pod groups'));
    simpleTable(gs, 'group-table', ['pod group', 'placed', 'minMember', 'verdict'],
                sm.groups.map(function (g) {
                  return [g.group, g.placed + '/' + g.members, String(g.minMember),
                          g.verdict + (g.reason ? ': blocked by ' + (g.blockedBy || 'missing members') + ': ' +
                                        g.reason : '')];
                }));
  }

  // -- heatmaps: utilisation by zone, instance type, capacity type -------------------------------
  function heatmap(container, id, title, rows) {
    var div = h('div', {'class': 'chart'});
    div.appendChild(h('h3', {}, title));
    var t = h('table', {'class': 'heat', id: id}), tr = h('tr');
    tr.appendChild(h('th', {}, title.replace('Utilisation by ', '')));
    tr.appendChild(h('th', {'class': 'num'}, 'nodes'));
    data.resources.forEach(function (r) { tr.appendChild(h('th', {}, r)); });
    t.appendChild(tr);
    rows.forEach(function (g) {
      var row = h('tr', {'data-key': g.key});
      row.appendChild(h('td', {}, g.key));
      row.appendChild(h('td', {'class': 'num'}, String(g.nodes)));
      data.resources.forEach(function (r) {
        var b = g.before[r], a = g.after[r];
        var td = h('td', {'class': 'cell', 'data-resource': r, title: r + ' requested/allocatable before -> after'},
                   a === null ? 'n/a' : fmtPct(b) + ' \u2192 ' + fmtPct(a));
        td.style.background = heat(a);
        if (a !== null && a > 55) td.style.color = '#fff';
        row.appendChild(td);
      });
      t.appendChild(row);
    });
    div.appendChild(t);
    container.appendChild(div);
  }
  var hm = $('heatmaps');
  heatmap(hm, 'heat-zone', 'Utilisation by zone', data.byZone);
  heatmap(hm, 'heat-instance-type', 'Utilisation by instance type', data.byInstanceType);
  heatmap(hm, 'heat-capacity-type', 'Utilisation by capacity type', data.byCapacityType);

  // -- histograms of per-node utilisation -------------------------------------------------------
  function histogram(container, r, hist) {
    var n = hist.before.length, bw = 14, gap = 6, left = 34, top = 22, ch = 90;
    var max = Math.max.apply(null, hist.before.concat(hist.after).concat([1]));
    var w = left + n * (2 * bw + gap) + 10;
    var svg = s('svg', {width: w, height: top + ch + 34, role: 'img', 'aria-label': r + ' histogram'});
    svg.appendChild(s('text', {x: 0, y: 14, 'font-size': 13, 'font-weight': 'bold'}, r + ': nodes by % requested'));
    svg.appendChild(s('text', {x: 0, y: top + 10, 'font-size': 10, fill: '#69707a'}, String(max)));
    for (var i = 0; i < n; i++) {
      var x = left + i * (2 * bw + gap);
      [['before', BEFORE, 0], ['after', AFTER, bw]].forEach(function (k) {
        var v = hist[k[0]][i], bh = ch * v / max;
        var rect = s('rect', {'class': 'hbar ' + k[0], x: x + k[2], y: top + ch - bh, width: bw - 1, height: bh,
                              fill: k[1]});
        rect.appendChild(s('title', {}, k[0] + ': ' + v + ' node(s) at ' + (i * 10) + '-' + (i * 10 + 10) + '%'));
        svg.appendChild(rect);
      });
      if (i % 2 === 0) svg.appendChild(s('text', {x: x, y: top + ch + 14, 'font-size': 10}, (i * 10) + '%'));
    }
    svg.appendChild(s('line', {x1: left, x2: w - 10, y1: top + ch, y2: top + ch, stroke: '#c5cad1'}));
    var div = h('div', {'class': 'chart'});
    div.appendChild(svg);
    container.appendChild(div);
  }
  var hs = $('histograms');
  data.shareResources.forEach(function (r) { histogram(hs, r, data.histograms[r]); });

  // -- before/after bar charts (zones; nodes on small clusters) ---------------------------------
  function pct(row, r) {
    var a = row.allocatable[r];
    return a ? Math.min(100, 100 * row.requested[r] / a) : 0;
  }
  function chart(container, title, rowsBefore, rowsAfter, labelKey, r) {
    var n = rowsBefore.length, barH = 12, gap = 8, left = 150, width = 300;
    var height = 26 + n * (2 * barH + gap);
    var svg = s('svg', {width: left + width + 80, height: height, role: 'img', 'aria-label': title});
    svg.appendChild(s('text', {x: 0, y: 14, 'font-size': 13, 'font-weight': 'bold'}, title));
    for (var i = 0; i < n; i++) {
      var y = 26 + i * (2 * barH + gap), b = pct(rowsBefore[i], r), a = pct(rowsAfter[i], r);
      svg.appendChild(s('text', {x: 0, y: y + barH + 4, 'font-size': 12}, rowsBefore[i][labelKey] || '(no zone)'));
      svg.appendChild(s('rect', {x: left, y: y, width: width, height: 2 * barH, fill: '#f1f3f5'}));
      svg.appendChild(s('rect', {'class': 'bar before', x: left, y: y, width: width * b / 100, height: barH,
                                 fill: BEFORE}));
      svg.appendChild(s('rect', {'class': 'bar after', x: left, y: y + barH, width: width * a / 100, height: barH,
                                 fill: AFTER}));
      var has = rowsAfter[i].allocatable[r] > 0;
      svg.appendChild(s('text', {x: left + width + 6, y: y + barH + 4, 'font-size': 12},
                        has ? Math.floor(b) + '% \u2192 ' + Math.floor(a) + '%' : 'n/a'));
    }
    var div = h('div', {'class': 'chart'});
    div.appendChild(svg);
    container.appendChild(div);
  }
  if (data.zoneBars) {
    data.resources.forEach(function (r) {
      chart($('zone-charts'), r + ' by zone', data.zoneBars.before, data.zoneBars.after, 'zone', r);
    });
  } else {
    $('zone-section').style.display = 'none';
  }
  if (data.nodeBars) {
    data.resources.forEach(function (r) {
      chart($('node-charts'), r + ' by node', data.nodeBars.before, data.nodeBars.after, 'node', r);
    });
  } else {
    $('node-section').style.display = 'none';
  }

  // -- sortable, filterable, paginated tables ---------------------------------------------------
  function lazyTable(opts) {
    // opts: container, id, columns [{title, numeric, render(td, row)}], rows, pageSize, facets [{col, label}]
    var rows = opts.rows, cols = opts.columns, pageSize = opts.pageSize, page = 0;
    var text = rows.map(function (r) { return r.join('\u0001').toLowerCase(); });
    var order = rows.map(function (_, i) { return i; }), matching = order.slice();
    var sortCol = -1, sortDir = 1, query = '', facet = {};
    var tools = h('div', {'class': 'tools'});
    var search = h('input', {type: 'search', placeholder: 'filter (substring, any column)', id: opts.id + '-filter'});
    tools.appendChild(search);
    (opts.facets || []).forEach(function (f) {
      var sel = h('select', {id: opts.id + '-facet-' + f.col});
      sel.appendChild(h('option', {value: ''}, 'any ' + f.label));
      var seen = {};
      rows.forEach(function (r) { seen[f.key ? f.key(r) : r[f.col]] = 1; });
      Object.keys(seen).sort().forEach(function (v) { sel.appendChild(h('option', {value: v}, v)); });
      sel.addEventListener('change', function () { facet[f.col] = {value: sel.value, key: f.key}; update(); });
      tools.appendChild(sel);
    });
    var info = h('span', {'class': 'muted'});
    var pager = h('span', {'class': 'pager'});
    var prev = h('button', {type: 'button'}, '\u2039 prev'), next = h('button', {type: 'button'}, 'next \u203A');
    pager.appendChild(prev); pager.appendChild(next);
    tools.appendChild(pager); tools.appendChild(info);
    var table = h('table', {'class': 'tbl', id: opts.id, 'data-total': rows.length});
    var head = h('tr'), ths = [];
    cols.forEach(function (c, i) {
      var th = h('th', c.numeric ? {'class': 'num'} : {}, c.title);
      th.title = 'sort by ' + c.title;
      th.addEventListener('click', function () {
        sortDir = sortCol === i ? -sortDir : (c.numeric ? -1 : 1);
        sortCol = i;
        ths.forEach(function (t) { t.classList.remove('sorted-asc', 'sorted-desc'); });
        th.classList.add(sortDir > 0 ? 'sorted-asc' : 'sorted-desc');
        update();
      });
      ths.push(th); head.appendChild(th);
    });
    var thead = h('thead'); thead.appendChild(head); table.appendChild(thead);
    var tbody = h('tbody'); table.appendChild(tbody);
    function cmp(a, b) {
      var x = rows[a][sortCol], y = rows[b][sortCol];
      if (x === y) return a - b;
      if (x === null || x === '') return 1;   // blanks last either way
      if (y === null || y === '') return -1;
      return (x < y ? -1 : 1) * sortDir;
    }
    function update() {
      var q = query;
      matching = order.filter(function (i) {
        if (q && text[i].indexOf(q) < 0) return false;
        for (var c in facet) {
          var f = facet[c];
          if (f.value && (f.key ? f.key(rows[i]) : rows[i][c]) !== f.value) return false;
        }
        return true;
      });
      if (sortCol >= 0) matching.sort(cmp);
      page = Math.min(page, Math.max(0, Math.ceil(matching.length / pageSize) - 1));
      draw();
    }
    function draw() {
      var start = page * pageSize, end = Math.min(matching.length, start + pageSize);
      var frag = document.createDocumentFragment();
      for (var k = start; k < end; k++) {
        var r = rows[matching[k]], tr = h('tr');
        cols.forEach(function (c, i) {
          var td = h('td', c.numeric ? {'class': 'num'} : {});
          if (c.render) c.render(td, r); else td.textContent = r[i] === null ? '' : String(r[i]);
          tr.appendChild(td);
        });
        frag.appendChild(tr);
      }
      tbody.textContent = '';
      tbody.appendChild(frag);
      table.setAttribute('data-matching', matching.length);
      table.setAttribute('data-shown', end - start);
      info.textContent = matching.length ? (start + 1) + '\u2013' + end + ' of ' + matching.length +
        (matching.length < rows.length ? ' (filtered from ' + rows.length + ')' : '') : 'no rows';
      prev.disabled = page === 0; next.disabled = end >= matching.length;
    }
    var timer = null;
    search.addEventListener('input', function () {
      clearTimeout(timer);
      timer = setTimeout(function () { query = search.value.toLowerCase(); page = 0; update(); }, 120);
    });
    prev.addEventListener('click', function () { page = Math.max(0, page - 1); draw(); });
    next.addEventListener('click', function () { page += 1; draw(); });
    opts.container.textContent = '';
    opts.container.appendChild(tools);
    opts.container.appendChild(table);
    // A link can carry a view: #nodes-q=text&nodes-zone=eu-west-1a&nodes-sort=cpu %25 (after)&nodes-dir=desc
    var want = {};
    location.hash.replace(/^#/, '').split('&').forEach(function (kv) {
      var i = kv.indexOf('=');
      if (i > 0) want[decodeURIComponent(kv.slice(0, i))] = decodeURIComponent(kv.slice(i + 1));
    });
    if (want[opts.id + '-q']) { search.value = want[opts.id + '-q']; query = search.value.toLowerCase(); }
    (opts.facets || []).forEach(function (f) {
      var v = want[opts.id + '-' + f.label.replace(/ /g, '-')];
      if (v) { $(opts.id + '-facet-' + f.col).value = v; facet[f.col] = {value: v, key: f.key}; }
    });
    var by = want[opts.id + '-sort'];
    update();
    cols.forEach(function (c, i) {
      if (c.title === by) {
        ths[i].click();
        if ((want[opts.id + '-dir'] === 'desc') !== (sortDir < 0)) ths[i].click();
      }
    });
  }
  var share = data.shareResources;
  function pctCell(col) {   // a node row: [name, zone, type, capacity, after %..., pods, new pods, before %...]
    return function (td, r) {
      var v = r[col];
      if (v === null) { td.textContent = 'n/a'; td.className = 'num muted'; return; }
      var bar = h('span', {'class': 'mini'});
      bar.style.width = Math.round(Math.min(100, v) * 0.5) + 'px';
      td.appendChild(bar);
      td.appendChild(document.createTextNode(v.toFixed(1)));
      td.title = 'before: ' + fmtPct(r[col + share.length + 2]);
    };
  }
  var nc = [{title: 'node'}, {title: 'zone'}, {title: 'instance type'}, {title: 'capacity type'}];
  share.forEach(function (r, i) { nc.push({title: r + ' % (after)', numeric: true, render: pctCell(4 + i)}); });
  nc.push({title: 'pods', numeric: true});
  nc.push({title: 'new pods', numeric: true});
  var nodeRows = data.nodes;
  lazyTable({container: $('node-table'), id: 'nodes', columns: nc, rows: nodeRows, pageSize: data.pageSize,
             facets: [{col: 1, label: 'zone'}, {col: 2, label: 'instance type'}, {col: 3, label: 'capacity type'}]});

  var pc = [{title: 'pod'}, {title: 'namespace'},
            {title: 'node', render: function (td, r) { td.textContent = r[2]; td.className = 'ok'; }},
            {title: 'reason', render: function (td, r) { td.textContent = r[3]; td.className = 'reason unsched'; }},
            {title: 'score', numeric: true},
            {title: 'nominated node'},
            {title: 'nodes not evaluated', numeric: true},
            {title: 'tied at top', numeric: true}];
  lazyTable({container: $('pod-table'), id: 'pods', columns: pc, rows: data.pods, pageSize: data.pageSize,
             facets: [{col: 1, label: 'namespace'},
                      {col: 2, label: 'outcome', key: function (r) { return r[2] ? 'placed' : 'unschedulable'; }}]});

  // -- explained pods: filter/score matrix ------------------------------------------------------
  var ex = $('explain');
  data.explain.forEach(function (e, n) {
    var box = h('div', {'class': 'explained', id: 'explained-' + n, 'data-pod': e.pod});
    box.appendChild(h('h3', {}, e.pod + ': ' + (e.selected ? '\u2192 ' + e.selected : (e.result || 'Unschedulable') +
                                                   ': ' + e.message)));
    box.appendChild(h('p', {'class': 'muted'}, e.evaluated + ' node(s) filtered, ' + e.feasible + ' feasible, ' +
                      e.scored + ' scored, ' + e.failedNodes + ' rejected.'));
    var smp = e.sampling || {};
    if (smp.notEvaluated) {
      box.appendChild(h('p', {'class': 'sampling'}, 'percentageOfNodesToScore: the search stops at ' +
                        smp.numFeasibleNodesToFind + ' feasible node(s); ' + smp.notEvaluated + ' of ' +
                        smp.candidates + ' candidate node(s) are not evaluated (filtered here for the ' +
                        'explanation only, never scored).'));
    }
    if (smp.tiedAtTop > 1) {
      box.appendChild(h('p', {'class': 'tie'}, smp.tiedAtTop + ' node(s) tied at the top score ' + smp.topScore +
                        ' (' + smp.tied.join(', ') + (smp.tiedAtTop > smp.tied.length ? ', \u2026' : '') +
                        '); the seeded tie-break picked ' + smp.picked + '.'));
    }
    if (e.preFilter.length) {
      box.appendChild(h('p', {}, 'PreFilter: ' + e.preFilter.map(function (p) {
        return p.plugin + ' ' + p.status; }).join('; ')));
    }
    if (e.top.length) {
      box.appendChild(h('p', {}, 'Score: weighted score per plugin for the ' + e.top.length +
                        ' best node(s) (hover for raw / normalised / weighted).'));
      var t = h('table', {'class': 'matrix', id: 'score-matrix-' + n}), tr = h('tr');
      tr.appendChild(h('th', {}, 'node'));
      tr.appendChild(h('th', {'class': 'num'}, 'total'));
      e.plugins.forEach(function (p) { tr.appendChild(h('th', {'class': 'plugin'}, p)); });
      t.appendChild(tr);
      e.top.forEach(function (row) {
        var r = h('tr', {'data-node': row.node});
        r.appendChild(h('td', row.node === e.selected ? {'class': 'ok'} : {}, row.node));
        r.appendChild(h('td', {'class': 'num'}, String(row.total)));
        row.cells.forEach(function (c, i) {
          var td = h('td', {'class': 'cell'}, c ? String(c[2]) : '-');
          if (c) { td.title = e.plugins[i] + ': raw ' + c[0] + ', normalised ' + c[1] + ', weighted ' + c[2];
                   td.style.background = heat(c[1]); if (c[1] > 55) td.style.color = '#fff'; }
          r.appendChild(td);
        });
        t.appendChild(r);
      });
      box.appendChild(t);
    }
    if (e.failed.length) {
      box.appendChild(h('p', {}, 'Filter: rejected nodes by plugin and reason (a node stops at its first failure).'));
      simpleTable(box, 'filter-matrix-' + n, ['plugin', 'reason', 'nodes', 'for example'],
                  e.failed.map(function (f) {
                    var more = f.count > f.nodes.length ? ', \u2026' : '';
                    return [f.plugin, f.reason, String(f.count), f.nodes.join(', ') + more];
                  }), [false, false, true, false]);
    }
    if (e.preemption) {
      box.appendChild(h('p', {}, 'Preemption: nominated ' + e.preemption.node + ', victims ' +
                        (e.preemption.victims || []).join(', ')));
    }
    ex.appendChild(box);
  });
  if (!data.explain.length) $('explain-section').style.display = 'none';

  body.setAttribute('data-height', String(Math.max(document.documentElement.scrollHeight, body.scrollHeight)));
  body.setAttribute('data-render', 'ok');
})();
"""


def _first_pods_html(result: SimulationResult) -> str:
    """The pod table's first page, server-side (escaped): readable without the script."""
    rows = []
    for p in result.placements[:PAGE_SIZE]:
        if p.node:
            cell = f'<td class="ok">{html.escape(p.node)}</td>'
        else:
            cell = f'<td class="reason unsched">{html.escape(p.code)}: {html.escape(p.message)}</td>'
        rows.append(f"<tr><td>{html.escape(p.pod)}</td>{cell}</tr>")
    more = len(result.placements) - PAGE_SIZE
    tail = f'<p class="muted">{more} more (the script shows them)</p>' if more > 0 else ""
    return ('<table class="tbl"><tr><th>pod</th><th>node / reason</th></tr>' + "".join(rows) + "</table>" + tail)


def _reproduce_html(result: SimulationResult) -> str:
    """The inputs and configuration of the run, server-side (escaped): what reproduces it."""
    inputs = getattr(result, "inputs", None) or {}
    config = getattr(result, "config", None) or {}
    if not inputs and not config:
        return ""
    import yaml
    e = html.escape
    parts = ['<h2 id="reproduce">Reproduce this run</h2>']
    if inputs.get("command"):
        parts.append(f'<p>With the same files (check their sha256) and pysched {e(str(inputs.get("pyschedVersion")))}:'
                     f'</p><pre id="command">{e(inputs["command"])}</pre>')
    files = inputs.get("files") or {}
    if files:
        rows = "".join(f'<tr data-input="{e(k)}"><td>{e(k)}</td><td>{e(str(v.get("file")))}</td>'
                       f'<td class="sha256">{e(str(v.get("sha256")))}</td><td class="num">{e(str(v.get("bytes", "")))}'
                       '</td></tr>' for k, v in files.items() if v)
        parts.append('<table id="input-table"><tr><th>input</th><th>file</th><th>sha256</th><th class="num">bytes</th>'
                     f'</tr>{rows}</table>')
    flags = inputs.get("flags") or {}
    if flags:
        rows = "".join(f'<tr><td>{e(k)}</td><td>{e(json.dumps(v))}</td></tr>' for k, v in flags.items())
        parts.append(f'<h3>Flags</h3><table id="flag-table">{rows}</table>')
    if config:
        parts.append('<details id="config"><summary>Effective KubeSchedulerConfiguration (defaults applied)</summary>'
                     f'<pre>{e(yaml.safe_dump(config, sort_keys=False))}</pre></details>')
    return "\n".join(parts)


def _embed(value: object) -> str:
    """JSON safe inside ``<script>``: it can neither close the element nor open a comment."""
    return json.dumps(value, separators=(",", ":")).replace("</", "<\\/").replace("<!--", "<\\u0021--")


def render(result: SimulationResult) -> str:
    view = build(result)
    view["pageSize"] = PAGE_SIZE
    placed = view["summary"]["placed"]
    legend = ('<div class="legend"><span><i class="sw" style="background:#9aa5b1"></i>before</span>'
              '<span><i class="sw" style="background:#2f6fdf"></i>after</span></div>')
    notes = "".join(f"<li>{html.escape(n)}</li>" for n in result.notes)
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>pysched simulation</title>
<style>{_STYLE}</style></head>
<body data-render="pending">
<h1>pysched simulation</h1>
<p>Profile <b>{html.escape(result.profile)}</b>, tie-break seed {result.seed}:
<b>{placed}/{len(result.placements)}</b> pods placed.</p>
<p id="error"></p>
<h2>Summary</h2>
<div class="cards" id="cards"></div>
<div class="grid"><div id="reasons"></div><div id="preemptions"></div><div id="groups"></div></div>
<h2>Utilisation</h2>
<p class="muted">Requested / allocatable, before &rarr; after the simulated pods; darker is fuller.</p>
<div class="grid" id="heatmaps"></div>
{legend}<div id="histograms"></div>
<div id="zone-section"><h3>By zone</h3><div id="zone-charts"></div></div>
<div id="node-section"><h3>By node</h3><div id="node-charts"></div></div>
<h2>Nodes</h2>
<div id="node-table"></div>
<h2>Pods</h2>
<div id="pod-table">{_first_pods_html(result)}</div>
<div id="explain-section"><h2>Explanations</h2><div id="explain"></div></div>
{'<h2>Notes</h2><ul>' + notes + '</ul>' if notes else ''}
{_reproduce_html(result)}
<script type="application/json" id="sim-data">{_embed(view)}</script>
<script>{_SCRIPT}</script>
</body></html>
"""


def write_report(result: SimulationResult, path: str | Path) -> Path:
    p = Path(path)
    p.write_text(render(result))
    return p
