// The selected pod: its outcome, why, preemption victims, gang and quota state, and the per-node
// table of every Filter verdict and every Score plugin's raw / normalized / weighted score.

import { podGroupOf } from './model.js';
import { $, bucket, esc, fmtInt, fmtQty, naturalCompare, plural } from './util.js';

export const TOP_ROWS = 200;
const GROUP_NAMES = 60;   // node names listed inside a collapsed group row

/** Per-node rows from simulate's trace (when the server's `nodes` is absent). */
function nodesFromTrace(ex) {
  const byNode = new Map();
  const get = (name) => {
    let n = byNode.get(name);
    if (!n) { n = { node: name, filters: {}, scores: {}, total: null }; byNode.set(name, n); }
    return n;
  };
  for (const f of ex.filter || []) for (const [node, v] of Object.entries(f.nodes || {})) get(node).filters[f.plugin] = v;
  for (const [plugin, per] of Object.entries(ex.score || {})) {
    for (const [node, s] of Object.entries(per)) get(node).scores[plugin] = s;
  }
  for (const [node, t] of Object.entries(ex.totalScores || {})) get(node).total = t;
  return [...byNode.values()].sort((a, b) => {
    const ta = a.total ?? -Infinity;
    const tb = b.total ?? -Infinity;
    return ta !== tb ? tb - ta : naturalCompare(a.node, b.node);
  });
}

function pluginOrder(ex, nodes) {
  const filters = (ex.filter || []).map((f) => f.plugin);
  const scores = Object.keys(ex.score || {});
  const fs = new Set(filters);
  const ss = new Set(scores);
  // Anything the rows name that the trace's lists do not (first rows are enough to find them).
  for (const n of nodes.slice(0, 50)) {
    for (const p of Object.keys(n.filters || {})) if (!fs.has(p)) { fs.add(p); filters.push(p); }
    for (const p of Object.keys(n.scores || {})) if (!ss.has(p)) { ss.add(p); scores.push(p); }
  }
  return { filters, scores };
}

/** Split the nodes: passed (ranked), failed grouped by their verdict, not evaluated. */
export function classify(ex) {
  const nodes = Array.isArray(ex.nodes) ? ex.nodes : nodesFromTrace(ex);
  const plugins = pluginOrder(ex, nodes);
  const passed = [];
  const failed = new Map();
  let notEvaluated = [];
  for (const n of nodes) {
    const verdicts = n.filters || {};
    let reason = null;
    let any = false;
    for (const p of plugins.filters) {
      const v = verdicts[p];
      if (v === undefined) continue;
      any = true;
      if (v !== 'passed') { reason = `${p}: ${v}`; break; }
    }
    if (reason) {
      let g = failed.get(reason);
      if (!g) { g = []; failed.set(reason, g); }
      g.push(n.node);
    } else if (!any && plugins.filters.length && n.total === null) notEvaluated.push(n.node);
    else passed.push(n);
  }
  notEvaluated = notEvaluated.sort(naturalCompare);
  const groups = [...failed.entries()].map(([reason, names]) => [reason, names.sort(naturalCompare)])
    .sort((a, b) => b[1].length - a[1].length || naturalCompare(a[0], b[0]));
  return { nodes, plugins, passed, groups, notEvaluated };
}

function filterCell(plugin, v) {
  if (v === undefined) return `<td data-plugin="${esc(plugin)}" data-kind="filter" class="f-na" title="not run (an earlier filter decided)">·</td>`;
  if (v === 'passed') return `<td data-plugin="${esc(plugin)}" data-kind="filter" class="f-pass" title="${esc(plugin)}: passed">✓</td>`;
  return `<td data-plugin="${esc(plugin)}" data-kind="filter" class="f-fail" title="${esc(`${plugin}: ${v}`)}">✗</td>`;
}

function scoreCells(plugin, s, note) {
  const p = esc(plugin);
  if (!s) {
    return `<td data-plugin="${p}" data-kind="raw" class="s-na">–</td><td data-plugin="${p}" data-kind="normalized" class="s-na">–</td>`
      + `<td data-plugin="${p}" data-kind="weighted" class="s-na">–</td>`;
  }
  const t = note ? ` title="${esc(`${plugin} read: ${note}`)}"` : '';
  return `<td data-plugin="${p}" data-kind="raw" class="num raw${note ? ' noted' : ''}"${t}>${esc(s.raw)}</td>`
    + `<td data-plugin="${p}" data-kind="normalized" class="num norm s${bucket(s.normalized)}">${esc(s.normalized)}</td>`
    + `<td data-plugin="${p}" data-kind="weighted" class="num wt">${esc(s.weighted)}</td>`;
}

/** A plugin's name for an upright header: may wrap at its capitals (NodeResources|Balanced|Allocation). */
function uprightName(plugin) {
  return String(plugin).split(/(?<=[a-z0-9])(?=[A-Z])/).map(esc).join('<wbr>');
}

function groupRow(reason, names, span, cls = '') {
  const shown = names.slice(0, GROUP_NAMES).join(', ');
  const more = names.length > GROUP_NAMES ? `, +${fmtInt(names.length - GROUP_NAMES)} more` : '';
  return `<tr class="group${cls}" data-reason="${esc(reason)}" data-count="${names.length}"><td colspan="${span}">`
    + `<details><summary><span class="count">${esc(plural(names.length, 'node'))}</span> ${esc(reason)}</summary>`
    + `<p class="mono names">${esc(shown)}${esc(more)}</p></details></td></tr>`;
}

/** The whole table as one HTML string: header rows, top passed nodes, grouped others. */
export function explainTableHTML(ex, chosen) {
  const c = classify(ex);
  const { filters, scores } = c.plugins;
  const notes = ex.scoreNotes || {};
  const span = 2 + filters.length + 3 * scores.length;
  const head1 = '<tr class="h1"><th rowspan="3" class="node">node</th><th rowspan="3" class="total">total</th>'
    + (filters.length ? `<th colspan="${filters.length}" class="fgroup">Filter</th>` : '')
    + (scores.length ? `<th colspan="${3 * scores.length}" class="sgroup"><span>Score</span></th>` : '') + '</tr>';
  const head2 = `<tr class="h2">${filters.map((p) => `<th rowspan="2" class="fname" data-plugin="${esc(p)}" title="${esc(p)}"><span>${uprightName(p)}</span></th>`).join('')}`
    + `${scores.map((p) => `<th colspan="3" class="sname" data-plugin="${esc(p)}" title="${esc(p)}"><span>${uprightName(p)}</span></th>`).join('')}</tr>`;
  const head3 = `<tr class="h3">${scores.map(() => '<th class="raw">raw</th><th class="norm">norm</th><th class="wt">wtd</th>').join('')}</tr>`;

  const rows = [];
  let top = c.passed.slice(0, TOP_ROWS);
  let rest = c.passed.slice(TOP_ROWS);
  if (chosen && !top.some((n) => n.node === chosen)) {
    const i = rest.findIndex((n) => n.node === chosen);
    if (i >= 0) { top = [...top, rest[i]]; rest = rest.filter((_, j) => j !== i); }
  }
  for (const n of top) {
    const cls = n.node === chosen ? ' class="chosen"' : '';
    const v = n.filters || {};
    const s = n.scores || {};
    rows.push(`<tr data-node="${esc(n.node)}"${cls}><td class="node mono">${esc(n.node)}</td>`
      + `<td class="total num">${n.total === null || n.total === undefined ? '–' : esc(n.total)}</td>`
      + filters.map((p) => filterCell(p, v[p])).join('')
      + scores.map((p) => scoreCells(p, s[p], notes[p] && notes[p][n.node])).join('') + '</tr>');
  }
  const restScored = rest.filter((n) => n.total !== null && n.total !== undefined).map((n) => n.node);
  const restUnscored = rest.filter((n) => n.total === null || n.total === undefined).map((n) => n.node);
  if (restScored.length) rows.push(groupRow(`passed, lower totals (below the best ${TOP_ROWS})`, restScored, span, ' passed'));
  if (restUnscored.length) {
    rows.push(groupRow('passed, not scored (percentageOfNodesToScore: the search had found enough feasible nodes)',
      restUnscored.sort(naturalCompare), span, ' passed'));
  }
  for (const [reason, names] of c.groups) rows.push(groupRow(reason, names, span));
  if (c.notEvaluated.length) rows.push(groupRow('not evaluated', c.notEvaluated, span));
  if (!rows.length) {
    // No node reached Filter: a PreFilter plugin rejected the pod (or there are no nodes).
    const pre = (ex.preFilter || []).find((p) => p.status !== 'passed' && p.status !== 'Skip');
    const reason = pre ? `PreFilter ${pre.plugin}: ${pre.status}` : (ex.error || ex.message || 'no node was evaluated');
    rows.push(`<tr class="group" data-reason="${esc(reason)}" data-count="0"><td colspan="${span}">`
      + `<span class="count">no node evaluated</span> ${esc(reason)}</td></tr>`);
  }
  const body = rows.join('');
  return { html: `<thead>${head1}${head2}${scores.length ? head3 : ''}</thead><tbody>${body}</tbody>`, classified: c };
}

/** One line on why the chosen node won (or why none did). */
export function whyText(ex, placement, c) {
  const chosen = ex.chosen ?? ex.selectedNode ?? (placement && placement.node) ?? null;
  const sampling = ex.sampling || (placement && placement.sampling) || {};
  const parts = [];
  if (chosen) {
    const scored = c.passed.filter((n) => n.total !== null && n.total !== undefined);
    const me = c.passed.find((n) => n.node === chosen);
    if (!scored.length) {
      parts.push(c.passed.length === 1 ? 'the only node that passed every filter (a single feasible node is not scored)'
        : `passed every filter (${plural(c.passed.length, 'feasible node')}, none scored)`);
    } else {
      const next = scored.find((n) => n.node !== chosen);
      let s = `highest total score ${me && me.total !== null ? me.total : '?'} of ${plural(scored.length, 'scored node')}`;
      if (next) s += ` (next: ${next.node} with ${next.total})`;
      parts.push(s);
    }
    if ((sampling.tiedAtTop || 0) > 1) {
      parts.push(`${sampling.tiedAtTop} nodes tied at the top score ${sampling.topScore}; the seeded tie-break picked ${sampling.picked || chosen}`);
    }
  } else {
    const failed = c.groups.reduce((a, [, names]) => a + names.length, 0);
    if (c.groups.length) {
      const top = c.groups.slice(0, 3).map(([r, names]) => `${fmtInt(names.length)} × ${r}`).join('; ');
      parts.push(`${fmtInt(failed)} of ${fmtInt(c.nodes.length)} nodes failed a filter: ${top}${c.groups.length > 3 ? `; and ${plural(c.groups.length - 3, 'other verdict')}` : ''}`);
    }
  }
  if (sampling.notEvaluated) {
    parts.push(`percentageOfNodesToScore: the search stopped at ${fmtInt(sampling.numFeasibleNodesToFind)} feasible nodes; `
      + `${fmtInt(sampling.notEvaluated)} of ${fmtInt(sampling.candidates)} candidates were not evaluated by the scheduler`);
  }
  return parts.join('. ');
}

/** PreFilter statuses, Permit, extenders, preemption: the trace's other parts. */
export function metaHTML(ex) {
  const out = [];
  const pre = ex.preFilter || [];
  if (pre.length) {
    out.push(`<div class="prefilter"><span class="label">PreFilter</span> ${pre.map((p) => {
      const cls = p.status === 'passed' ? 'ok' : p.status === 'Skip' ? 'skip' : 'bad';
      return `<span class="chip ${cls}" title="${esc(`${p.plugin}: ${p.status}`)}">${esc(p.plugin)}${p.status === 'passed' ? '' : `: ${esc(p.status)}`}</span>`;
    }).join(' ')}</div>`);
  }
  if (ex.permit) {
    out.push(`<div><span class="label">Permit</span> ${esc(ex.permit.status || '')} ${esc(ex.permit.message || '')}</div>`);
  }
  if (ex.preemption) {
    out.push(`<div><span class="label">PostFilter (preemption)</span> nominated <span class="mono">${esc(ex.preemption.node || '')}</span>`
      + ` evicting ${esc(plural((ex.preemption.victims || []).length, 'pod'))}</div>`);
  }
  if ((ex.extenders || []).length) {
    out.push(`<div><span class="label">Extenders</span> <code>${esc(JSON.stringify(ex.extenders).slice(0, 400))}</code></div>`);
  }
  if (ex.error && ex.error !== ex.message) out.push(`<div class="bad"><span class="label">Error</span> ${esc(ex.error)}</div>`);
  return out.join('');
}

/** The pod's own facts (requests, priority, owner, labels). */
export function factsHTML(pod) {
  const req = Object.entries(pod.requests || {}).map(([r, v]) => `${esc(r)} ${esc(fmtQty(r, v))}`).join(', ') || 'none';
  const labels = Object.entries(pod.labels || {}).slice(0, 8).map(([k, v]) => `<span class="chip">${esc(k)}=${esc(v)}</span>`).join(' ');
  const rows = [
    ['state', `${esc(pod.status)}${pod.scenarioState === 'bound' ? ' (bound before the run)' : ''}`],
    ['requests', req],
    ['priority', pod.priority === null ? '–' : esc(fmtInt(pod.priority))],
  ];
  if (pod.owner) rows.push(['owner', `<span class="mono">${esc(pod.owner)}</span>`]);
  if (labels) rows.push(['labels', labels]);
  return rows.map(([k, v]) => `<dt>${k}</dt><dd>${v}</dd>`).join('');
}

export function gangHTML(pod, run) {
  const key = podGroupOf(pod);
  if (!key) return null;
  const g = ((run && run.groups) || []).find((x) => x.group === key);
  if (!g) return `<h3>PodGroup <span class="mono">${esc(key)}</span></h3><p class="muted">No verdict for this group in the displayed run.</p>`;
  const ok = g.verdict === 'placed';
  const minimum = g.source === 'GangScheduling' ? 'minCount' : 'minMember';
  const where = ok && g.placement && g.placement !== 'all nodes' ? ` in <span class="mono">${esc(g.placement)}</span>` : '';
  let html = `<h3>PodGroup <span class="mono">${esc(g.group)}</span> <span class="badge ${ok ? 'ok' : 'bad'}">${esc(g.verdict)}</span></h3>`
    + `<p>${esc(fmtInt(g.placed))} of ${esc(fmtInt(g.members))} members placed${where} (${minimum} ${esc(fmtInt(g.minMember))})</p>`;
  if (g.reason) html += `<p class="why">blocked by <span class="mono">${esc(g.blockedBy || 'missing members')}</span>: ${esc(g.reason)}</p>`;
  return html;
}

/** A gang's last attempt in the pod-group cycle (the explanation's `groupAttempt`, simulate
 * --explain's `explainPodGroups` entry): one row per placement tried (a topology domain, or every
 * node), its verdict, the members placed where, its placement scores; the chosen one marked. */
export function groupAttemptHTML(g) {
  if (!g) return '';
  const rows = (g.placements || []).map((p) => {
    const placed = Object.entries(p.placed || {}).sort((a, b) => naturalCompare(a[0], b[0]))
      .map(([pod, node]) => `${pod} → ${node}`).join(', ');
    const unplaced = Object.entries(p.unplaced || {}).sort((a, b) => naturalCompare(a[0], b[0]))
      .map(([pod, why]) => `<li><span class="mono">${esc(pod)}</span>: ${esc(why)}</li>`).join('');
    const scores = Object.entries(p.scores || {});
    const total = scores.reduce((a, [, v]) => a + v, 0);
    const scoreText = scores.length ? `${total} (${scores.map(([k, v]) => `${k} ${v}`).join(', ')})` : '–';
    return `<tr data-placement="${esc(p.placement)}" data-fits="${p.fits ? 'true' : 'false'}"${p.chosen ? ' class="chosen"' : ''}>`
      + `<td class="mono">${p.chosen ? '★ ' : ''}${esc(p.placement)}</td><td class="num">${esc(fmtInt(p.nodes))}</td>`
      + `<td class="${p.fits ? 'ok' : 'bad'}">${p.fits ? 'fits' : esc(p.message || 'does not fit')}`
      + `${unplaced ? `<ul class="unplaced">${unplaced}</ul>` : ''}</td>`
      + `<td class="mono">${esc(placed || '–')}</td><td class="num">${esc(scoreText)}</td></tr>`;
  }).join('');
  const fitting = (g.placements || []).filter((p) => p.fits).length;
  const head = g.result === 'Scheduled'
    ? `placed in <span class="mono">${esc(g.placement || 'all nodes')}</span>${fitting > 1 ? ` (best of ${fitting} placements that fit)` : ''}`
    : `${esc(g.result || 'Unschedulable')}: ${esc(g.status || '')}`;
  const minimum = g.source === 'GangScheduling' ? 'minCount' : 'minMember';
  return `<h3>Pod group attempt <span class="mono">${esc(g.group)}</span></h3>`
    + `<p class="why" id="group-attempt-head">${head}</p>`
    + `<p class="muted">${esc(g.source || '')}, ${minimum} ${esc(fmtInt(g.minCount ?? 0))}: `
    + `${esc(fmtInt(g.inAttempt ?? 0))} of ${esc(fmtInt(g.members ?? 0))} pods in its last attempt, placement by placement</p>`
    + (rows ? '<table class="data compact group-attempt"><thead><tr><th>placement</th><th class="num">nodes</th><th>verdict</th>'
      + `<th>members placed</th><th class="num">score</th></tr></thead><tbody>${rows}</tbody></table>` : '');
}

export function quotaHTML(pod, run) {
  const rows = ((run && run.quotas) || []).filter((q) => {
    const name = String(q.quota || '');
    return name.includes('/') ? name.split('/')[0] === pod.namespace : name === pod.namespace;
  });
  if (!rows.length) return null;
  const over = (q) => (q.max !== null && q.max !== undefined && q.used > q.max ? ' class="over" title="used above max"' : '');
  const body = rows.map((q) => `<tr data-quota="${esc(q.quota)}" data-resource="${esc(q.resource)}"${over(q)}><td class="mono">${esc(q.quota)}</td>`
    + `<td>${esc(q.resource)}</td><td class="num">${esc(fmtQty(q.resource, q.used))}</td>`
    + `<td class="num">${q.min === null || q.min === undefined ? '–' : esc(fmtQty(q.resource, q.min))}</td>`
    + `<td class="num">${q.max === null || q.max === undefined ? '–' : esc(fmtQty(q.resource, q.max))}</td></tr>`).join('');
  return `<h3>ElasticQuota (namespace ${esc(pod.namespace)})</h3><table class="data compact"><thead><tr><th>quota</th><th>resource</th>`
    + `<th class="num">used</th><th class="num">min</th><th class="num">max</th></tr></thead><tbody>${body}</tbody></table>`;
}

/** Fill the detail panel (everything but the explain table) for `pod` in `run`. */
export function renderPodSummary(pod, run) {
  $('#pod-title').textContent = pod.key;
  $('#pod-facts').innerHTML = factsHTML(pod);
  const p = pod.placement;
  const chosen = $('#chosen-node');
  if (pod.node) chosen.textContent = pod.node;
  else chosen.textContent = `pending: ${pod.message || (p && p.message) || 'not placed'}`;
  chosen.classList.toggle('bad', !pod.node);
  const why = $('#chosen-why');
  if (pod.status === 'bound') why.textContent = 'Bound before the run (the run did not schedule it).';
  else if (pod.status === 'preempted') why.textContent = `Evicted by the run: ${pod.preemptor} preempted it.`;
  else if (p && p.nominatedNode) why.textContent = `Preemption: nominated ${p.nominatedNode}; the pod waits there for its victims to leave.`;
  else why.textContent = '';
  const victims = (p && p.victims) || [];
  $('#victims').innerHTML = victims.map((v) => `<li data-pod="${esc(v)}"><a href="#" data-select-pod="${esc(v)}">${esc(v)}</a></li>`).join('');
  $('#victims-box').hidden = victims.length === 0;
  const gang = gangHTML(pod, run);
  $('#gang-state').innerHTML = gang || '';
  $('#gang-state').hidden = !gang;
  const quota = quotaHTML(pod, run);
  $('#quota-state').innerHTML = quota || '';
  $('#quota-state').hidden = !quota;
}

/** Score plugins whose header is out of the table's visible area (left of the pinned node column
 * or beyond the right edge), in column order. */
function scoresOutOfView(wrap, pinned) {
  const box = wrap.getBoundingClientRect();
  const out = [];
  for (const th of wrap.querySelectorAll('th.sname')) {
    const r = th.getBoundingClientRect();
    if (r.right > box.right + 0.5 || r.left < box.left + pinned - 0.5) out.push(th.dataset.plugin);
  }
  return out;
}

/** Keep the explain table's sideways-scroll cues current: the frame's shadows (data-more-left,
 * data-more-right), the width of the pinned node column (--pinned) and the hint naming the score
 * plugins out of view, with a button that scrolls to them. Call the returned function after the
 * table changes; scrolling and resizing update it on their own. */
export function watchExplainOverflow(frame, wrap, hint) {
  const update = () => {
    const node = wrap.querySelector('th.node');
    const pinned = node ? node.getBoundingClientRect().width : 0;
    frame.style.setProperty('--pinned', `${Math.round(pinned)}px`);
    const more = wrap.scrollWidth - wrap.clientWidth;
    frame.dataset.moreLeft = more > 1 && wrap.scrollLeft > 1 ? '1' : '0';
    frame.dataset.moreRight = more > 1 && wrap.scrollLeft < more - 1 ? '1' : '0';
    const hidden = more > 1 ? scoresOutOfView(wrap, pinned) : [];
    hint.hidden = !hidden.length;
    hint.dataset.hidden = hidden.join(',');
    hint.title = hidden.length ? `out of view: ${hidden.join(', ')}` : '';
    if (!hidden.length) { hint.innerHTML = ''; return; }
    const all = wrap.querySelectorAll('th.sname').length;
    const compact = document.getElementById('explain-compact');
    const button = (dir, label) => `<button type="button" class="small go" data-scroll="${dir}" aria-label="scroll ${dir}"`
      + `${frame.dataset[dir === 'left' ? 'moreLeft' : 'moreRight'] === '1' ? '' : ' disabled'}>${label}</button>`;
    hint.innerHTML = `${esc(fmtInt(hidden.length))} of ${esc(plural(all, 'Score plugin'))} out of view: the table `
      + `scrolls sideways, the node column stays${compact && !compact.checked ? '; "weighted scores only" narrows it' : ''}.`
      + `${button('left', '←')}${button('right', '→')}`;
  };
  wrap.addEventListener('scroll', update, { passive: true });
  hint.addEventListener('click', (ev) => {
    const b = ev.target.closest('button[data-scroll]');
    if (!b) return;
    const pinned = parseFloat(frame.style.getPropertyValue('--pinned')) || 0;
    const step = Math.max(80, wrap.clientWidth - pinned - 40);
    wrap.scrollBy({ left: b.dataset.scroll === 'right' ? step : -step, behavior: 'smooth' });
  });
  if (typeof ResizeObserver === 'function') new ResizeObserver(update).observe(wrap);
  return update;
}
