// The pods table: filtered by key and state, paged (at most PAGE rows in the DOM).

import { esc, fmtInt, fmtQty, pageBounds, renderPager } from './util.js';

export const PAGE = 200;

const STATE_LABEL = {
  bound: 'bound', placed: 'placed', pending: 'pending', nominated: 'pending (preempting)', preempted: 'preempted',
};

/**
 * Pods matching `text` (a substring of namespace/name, case-insensitive; "node:NAME" matches the
 * node instead) and `state` (all | pending | placed).
 */
export function filterPods(pods, text, state) {
  const t = (text || '').trim().toLowerCase();
  let byNode = null;
  let needle = t;
  if (t.startsWith('node:')) { byNode = t.slice(5).trim(); needle = ''; }
  const out = [];
  let exact = -1;
  for (const p of pods) {
    // pending: what the run left without a node; placed: on a node (bound before, or by the run).
    // A preempted pod (evicted by the run) is in neither: "all" lists it.
    if (state === 'pending' && (p.node || p.status === 'preempted')) continue;
    if (state === 'placed' && !p.node) continue;
    if (byNode !== null && (p.node || '').toLowerCase() !== byNode) continue;
    if (needle && !p.key.toLowerCase().includes(needle)) continue;
    if (needle && exact < 0 && p.key.toLowerCase() === needle) exact = out.length;
    out.push(p);
  }
  if (exact > 0) out.unshift(out.splice(exact, 1)[0]);   // the pod named exactly comes first
  return out;
}

export function renderPods(table, pager, matching, total, page, selected) {
  const b = pageBounds(matching.length, page, PAGE);
  const rows = [];
  for (let i = b.start; i < b.end; i += 1) {
    const p = matching[i];
    const sel = p.key === selected ? ' selected' : '';
    const note = p.node ? p.owner || '' : p.message || '';
    rows.push(
      `<tr data-pod="${esc(p.key)}" class="st-${p.status}${sel}${p.gone ? ' gone' : ''}">`
      + `<td class="mono">${esc(p.key)}</td>`
      + `<td><span class="state st-${p.status}">${esc(STATE_LABEL[p.status] || p.status)}</span></td>`
      + `<td class="mono">${esc(p.node || (p.placement && p.placement.nominatedNode ? `→ ${p.placement.nominatedNode}` : '–'))}</td>`
      + `<td class="num">${esc(fmtQty('cpu', p.requests.cpu || 0))}</td>`
      + `<td class="num">${esc(fmtQty('memory', p.requests.memory || 0))}</td>`
      + `<td class="num">${p.priority === null ? '–' : esc(fmtInt(p.priority))}</td>`
      + `<td class="note" title="${esc(note)}">${esc(note)}</td></tr>`,
    );
  }
  const body = table.tBodies[0];
  body.innerHTML = rows.length ? rows.join('')
    : '<tr class="empty"><td colspan="7" class="muted">No pods match.</td></tr>';
  table.dataset.total = String(total);
  table.dataset.matching = String(matching.length);
  renderPager(pager, b, matching.length);
  return b;
}
