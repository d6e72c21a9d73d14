// The cluster heatmap (one cell per node, grouped) and the utilisation summary table.

import { groupNodes } from './model.js';
import { bucket, esc, fmtInt, fmtPct, fmtQty, pct } from './util.js';

function cellTitle(n, resources) {
  const lines = [n.name];
  for (const r of resources) {
    const a = n.allocatable[r] || 0;
    const q = n.requested[r] || 0;
    if (!a && !q) continue;
    lines.push(`${r}: ${fmtQty(r, q)} / ${fmtQty(r, a)} (${fmtPct(pct(q, a))})`);
  }
  lines.push(`before the run: ${n.utilBefore}%  after: ${n.util}%`);
  const where = [n.zone, n.instanceType, n.capacityType].filter(Boolean).join(' · ');
  if (where) lines.push(where);
  if (!n.inRun) lines.push('(added since this run: bound pods only)');
  return lines.join('\n');
}

const GROUP_LABEL = { zone: 'zone', instanceType: 'instance type', capacityType: 'capacity type' };

/** Render every group with one HTML string (fast at thousands of nodes). */
export function renderHeatmap(el, view, groupBy) {
  const groups = groupNodes(view.nodes, groupBy);
  const parts = [];
  for (const [value, nodes] of groups) {
    let sum = 0;
    let max = 0;
    let full = 0;
    const cells = new Array(nodes.length);
    for (let i = 0; i < nodes.length; i += 1) {
      const n = nodes[i];
      sum += n.util;
      if (n.util > max) max = n.util;
      if (n.util >= 90) full += 1;
      let cls = `heat-cell u${bucket(n.util)}`;
      if (!n.inRun) cls += ' stale-cell';
      cells[i] = `<span class="${cls}" data-node="${esc(n.name)}" data-util="${n.util}" title="${esc(cellTitle(n, view.resources))}"></span>`;
    }
    const avg = nodes.length ? sum / nodes.length : 0;
    const label = value === '' ? `(no ${GROUP_LABEL[groupBy] || groupBy})` : value;
    parts.push(
      `<section class="heat-group" data-group="${esc(value)}" data-nodes="${nodes.length}">`
      + `<header><span class="group-name">${esc(label)}</span>`
      + `<span class="group-stats">${fmtInt(nodes.length)} node${nodes.length === 1 ? '' : 's'} · avg ${fmtPct(avg)} · max ${max}%`
      + `${full ? ` · ${fmtInt(full)} ≥ 90%` : ''}</span></header>`
      + `<div class="cells">${cells.join('')}</div></section>`,
    );
  }
  el.classList.toggle('sparse', view.nodes.length <= 64);
  el.classList.toggle('dense', view.nodes.length > 600);
  el.classList.toggle('denser', view.nodes.length > 2500);
  el.innerHTML = parts.length ? parts.join('') : '<p class="muted">No nodes in the scenario: add some in the Objects tab.</p>';
}

/** Mark cells: the selected pod's node, its nominated node, the node whose details are open. */
export function markCells(el, marks) {
  for (const cls of ['chosen', 'nominated', 'picked']) {
    for (const c of el.querySelectorAll(`.heat-cell.${cls}`)) c.classList.remove(cls);
  }
  for (const [cls, name] of Object.entries(marks)) {
    if (!name) continue;
    const c = el.querySelector(`.heat-cell[data-node="${CSS.escape(name)}"]`);
    if (c) c.classList.add(cls);
  }
}

export function renderSummary(table, view, hasRun) {
  const rows = view.summary.map((s) => {
    const p = pct(s.requested, s.allocatable);
    const pb = pct(s.requestedBefore, s.allocatable);
    return `<tr data-resource="${esc(s.resource)}">`
      + `<th scope="row">${esc(s.resource)}</th>`
      + `<td class="num" data-col="requested">${esc(fmtQty(s.resource, s.requested))}</td>`
      + `<td class="num" data-col="allocatable">${esc(fmtQty(s.resource, s.allocatable))}</td>`
      + `<td class="num pct" data-col="percent"><span class="bar u${bucket(p)}" data-pct="${p === null ? '' : p.toFixed(1)}"></span>${fmtPct(p)}</td>`
      + `<td class="num muted" data-col="before">${hasRun ? fmtPct(pb) : '–'}</td></tr>`;
  });
  table.tBodies[0].innerHTML = rows.join('');
  // The bar widths: CSSOM (allowed by the CSP), not style attributes.
  for (const bar of table.querySelectorAll('.bar[data-pct]')) {
    const v = Number(bar.dataset.pct || 0);
    bar.style.setProperty('--w', `${Math.min(100, v)}%`);
  }
}

/** Scroll the heatmap (not the page) so the node's cell is in view. */
export function revealCell(el, name) {
  if (!name) return;
  const c = el.querySelector(`.heat-cell[data-node="${CSS.escape(name)}"]`);
  if (!c) return;
  const top = c.offsetTop;
  if (top < el.scrollTop + 10 || top > el.scrollTop + el.clientHeight - 20) {
    el.scrollTop = Math.max(0, top - el.clientHeight / 2);
  }
}
