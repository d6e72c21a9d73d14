// Runs: the list (click to display one), comparing two runs, and replaying a sequence step by step.

import { ApiError, busy, get, post } from './api.js';
import { CodeEditor } from './editors.js';
import { locateField } from './yamlpath.js';
import { $, esc, fmtInt, fmtMs, fmtPct, fmtQty, notice, pct } from './util.js';

const COMPARE_ROWS = 200;
const LIST_ITEMS = 200;

const EXAMPLE_SEQUENCE = `# Each step is applied to the scenario, then a run shows what the scheduler does.
steps:
- at: 0s
  create:
  - apiVersion: apps/v1
    kind: Deployment
    metadata: {name: burst, namespace: default}
    spec:
      replicas: 10
      selector: {matchLabels: {app: burst}}
      template:
        metadata: {labels: {app: burst}}
        spec:
          schedulerName: pysched
          containers:
          - name: app
            image: nginx
            resources: {requests: {cpu: "1", memory: 1Gi}}
- at: 30s
  failNode: NODE
- at: 60s
  delete: default/burst-0
`;

/** Cluster-wide {resource: {requested, allocatable}} from whichever shape the server sends. */
function clusterUtil(u) {
  if (!u || typeof u !== 'object') return {};
  if (Array.isArray(u.nodes)) {
    const out = {};
    for (const n of u.nodes) {
      for (const [r, a] of Object.entries(n.allocatable || {})) {
        const o = out[r] || (out[r] = { requested: 0, allocatable: 0 });
        o.allocatable += a;
        o.requested += (n.requested || {})[r] || 0;
      }
    }
    return out;
  }
  if (u.requested && u.allocatable && typeof u.requested === 'object') {
    const out = {};
    for (const r of new Set([...Object.keys(u.requested), ...Object.keys(u.allocatable)])) {
      out[r] = { requested: u.requested[r] || 0, allocatable: u.allocatable[r] || 0 };
    }
    return out;
  }
  const out = {};
  for (const [r, v] of Object.entries(u)) if (v && typeof v === 'object') out[r] = { requested: v.requested || 0, allocatable: v.allocatable || 0 };
  return out;
}

export function setupRuns(app) {
  let runs = [];
  const replayEditor = new CodeEditor($('.code[data-editor=replay]'));

  // ctrl/shift/middle click on a run's link: the browser opens it (a deep link, #/run/ID)
  const plainClick = (ev) => ev.button === 0 && !ev.ctrlKey && !ev.metaKey && !ev.shiftKey && !ev.altKey;

  $('#runs').addEventListener('click', (ev) => {
    const li = ev.target.closest('li[data-run]');
    if (!li || (ev.target.closest('a') && !plainClick(ev))) return;
    ev.preventDefault();
    app.showRun(li.dataset.run);
  });

  const runLabel = (r) => `#${r.id}${r.label ? ` ${r.label}` : ''}`;

  function renderRuns(list, current) {
    runs = list || [];
    const ordered = runs.slice().reverse();
    $('#runs').innerHTML = ordered.length ? ordered.slice(0, LIST_ITEMS).map((r) => `<li data-run="${esc(r.id)}"${String(r.id) === String(current) ? ' class="current" aria-current="true"' : ''}>`
      + `<a href="${esc(app.runHref(r.id))}" class="run-link">${esc(runLabel(r))}</a> <span class="muted">${fmtInt(r.placed)} placed · `
      + `<span class="${r.pending ? 'warn-text' : ''}">${fmtInt(r.pending)} pending</span> · ${fmtMs(r.durationMs)} · scenario v${esc(r.version)}</span></li>`).join('')
      : '<li class="muted empty">No runs yet: press Run.</li>';
    for (const id of ['#compare-a', '#compare-b']) {
      const sel = $(id);
      const prev = sel.value;
      sel.innerHTML = ordered.map((r) => `<option value="${esc(r.id)}">${esc(runLabel(r))}</option>`).join('');
      if (prev && runs.some((r) => String(r.id) === prev)) sel.value = prev;
      else if (id === '#compare-a' && ordered.length > 1) sel.value = String(ordered[1].id);
      else if (ordered.length) sel.value = String(ordered[0].id);
    }
    $('#compare-go').disabled = runs.length < 1;
  }

  function renderCompare(out, a, b) {
    const moved = out.moved || [];
    const np = out.newlyPending || [];
    const nplaced = out.newlyPlaced || [];
    const pending = out.pending || {};
    $('#compare-summary').innerHTML = [
      ['pendingA', `pending in A (#${esc(a)})`, pending.a],
      ['pendingB', `pending in B (#${esc(b)})`, pending.b],
      ['moved', 'moved', moved.length],
      ['newlyPending', 'newly pending', np.length],
      ['newlyPlaced', 'newly placed', nplaced.length],
    ].map(([k, label, v]) => `<div><dt>${label}</dt><dd data-key="${k}">${esc(String(v ?? 0))}</dd></div>`).join('');
    const rows = moved.slice(0, COMPARE_ROWS).map((m) => `<tr data-pod="${esc(m.pod)}"><td class="mono">${esc(m.pod)}</td>`
      + `<td class="mono">${esc(m.from ?? '–')}</td><td class="mono">${esc(m.to ?? '–')}</td></tr>`);
    if (moved.length > COMPARE_ROWS) rows.push(`<tr class="more"><td colspan="3" class="muted">… and ${fmtInt(moved.length - COMPARE_ROWS)} more</td></tr>`);
    $('#compare-table').tBodies[0].innerHTML = rows.join('') || '<tr class="empty"><td colspan="3" class="muted">No pod moved.</td></tr>';
    const li = (items, fmt) => items.slice(0, COMPARE_ROWS).map(fmt).join('')
      + (items.length > COMPARE_ROWS ? `<li class="muted">… and ${fmtInt(items.length - COMPARE_ROWS)} more</li>` : '');
    $('#compare-pending').innerHTML = li(np, (p) => `<li data-pod="${esc(p)}" class="mono">${esc(p)}</li>`) || '<li class="muted">none</li>';
    $('#compare-placed').innerHTML = li(nplaced, (p) => `<li data-pod="${esc(p.pod)}" class="mono">${esc(p.pod)} → ${esc(p.node)}</li>`) || '<li class="muted">none</li>';
    const ua = clusterUtil((out.utilisation || {}).a);
    const ub = clusterUtil((out.utilisation || {}).b);
    const res = [...new Set([...Object.keys(ua), ...Object.keys(ub)])]
      .filter((r) => (ua[r] && ua[r].allocatable) || (ub[r] && ub[r].allocatable));
    const t = $('#compare-util');
    if (res.length) {
      const cell = (u, r) => (u[r] ? `${esc(fmtQty(r, u[r].requested))} / ${esc(fmtQty(r, u[r].allocatable))} (${fmtPct(pct(u[r].requested, u[r].allocatable))})` : '–');
      t.innerHTML = `<thead><tr><th>resource</th><th class="num">A #${esc(a)}</th><th class="num">B #${esc(b)}</th><th class="num">Δ</th></tr></thead><tbody>${res.map((r) => {
        const pa = ua[r] ? pct(ua[r].requested, ua[r].allocatable) : null;
        const pb = ub[r] ? pct(ub[r].requested, ub[r].allocatable) : null;
        const d = pa !== null && pb !== null ? pb - pa : null;
        return `<tr data-resource="${esc(r)}"><th scope="row">${esc(r)}</th><td class="num">${cell(ua, r)}</td><td class="num">${cell(ub, r)}</td>`
          + `<td class="num">${d === null ? '–' : Math.abs(d) < 0.05 ? '±0' : `${d > 0 ? '+' : ''}${d.toFixed(1)} pt`}</td></tr>`;
      }).join('')}</tbody>`;
      t.hidden = false;
    } else t.hidden = true;
  }

  $('#compare-go').addEventListener('click', () => busy(async () => {
    const a = $('#compare-a').value;
    const b = $('#compare-b').value;
    if (!a || !b) return;
    try {
      const out = await get(`/api/compare?a=${encodeURIComponent(a)}&b=${encodeURIComponent(b)}`);
      renderCompare(out, a, b);
    } catch (exc) {
      notice(exc.message, 'error');
      if (!(exc instanceof ApiError)) throw exc;
    }
  }));
  $('#compare-table').addEventListener('click', (ev) => {
    const tr = ev.target.closest('tr[data-pod]');
    if (tr) app.selectPod(tr.dataset.pod, { scroll: true });
  });

  // Replay. The run each step produced (this page saw it): step index -> run id.
  const stepRuns = new Map();
  let replayState = null;
  function renderReplay(st) {
    replayState = st;
    const total = st && Number.isFinite(st.total) ? st.total : 0;
    const current = st && Number.isFinite(st.current) ? st.current : 0;
    const status = $('#replay-status');
    status.dataset.current = String(current);
    status.dataset.total = String(total);
    status.textContent = total ? `step ${current} of ${total}${current >= total ? ' (done)' : ''}` : 'no sequence loaded';
    $('#replay-step').disabled = !total || current >= total;
    const steps = (st && st.steps) || [];
    $('#replay-steps').innerHTML = steps.map((s, i) => {
      const cls = i < current ? 'done' : i === current ? 'next' : '';
      const run = stepRuns.get(i);
      const link = run !== undefined ? ` <a href="${esc(app.runHref(run))}" class="step-run" data-show-run="${esc(run)}">run #${esc(run)}</a>` : '';
      return `<li data-step="${i}"${cls ? ` class="${cls}"` : ''}><span class="at mono">${esc(s.at ?? '')}</span> ${esc(s.description ?? '')}${link}</li>`;
    }).join('');
  }

  $('#replay-steps').addEventListener('click', (ev) => {
    const a = ev.target.closest('a[data-show-run]');
    if (!a || !plainClick(ev)) return;
    ev.preventDefault();
    app.showRun(a.dataset.showRun);
  });

  $('#replay-example').addEventListener('click', () => {
    const node = app.view().nodes[0];
    replayEditor.value = EXAMPLE_SEQUENCE.replace('NODE', node ? node.name : 'n1');
  });

  $('#replay-load').addEventListener('click', () => busy(async () => {
    $('#replay-errors').innerHTML = '';
    replayEditor.clearMarks();
    try {
      const out = await post('/api/replay', { yaml: replayEditor.value });
      stepRuns.clear();
      renderReplay(out);
      notice(`sequence loaded: ${out.total} step(s)`);
    } catch (exc) {
      const errors = exc instanceof ApiError && exc.errors ? exc.errors : [{ field: '', message: exc.message }];
      const marks = new Map();
      $('#replay-errors').innerHTML = errors.map((e) => {
        const at = /\bline (\d+)\b/.exec(e.message || '');
        const line = Number.isInteger(e.line) && e.line > 0 ? e.line - 1
          : e.field ? locateField(replayEditor.value, e.field, null) : at ? Number(at[1]) - 1 : -1;
        if (line >= 0) marks.set(line, e.message);
        return `<li data-field="${esc(e.field ?? '')}">${e.field ? `<code class="field">${esc(e.field)}</code> ` : ''}${esc(e.message)}${line >= 0 ? ` <span class="muted">(line ${line + 1})</span>` : ''}</li>`;
      }).join('');
      replayEditor.mark(marks);
      if (!(exc instanceof ApiError)) throw exc;
    }
  }));

  $('#replay-step').addEventListener('click', () => busy(async () => {
    try {
      const out = await post('/api/replay/step', {});
      if (out.run) {
        stepRuns.set(out.current - 1, out.run.id);
        await app.displayRun(out.run, { refreshScenario: true });
      } else if (out.errors && out.errors.length) {
        // the step was applied, but its run failed: show why, and the scenario as it is now
        notice(`step ${out.current} applied; its run failed: ${out.errors[0].message}`, 'error');
        await app.refreshScenario();
      }
      const st = await get('/api/replay').catch(() => null);
      renderReplay(st || { ...(replayState || {}), current: out.current, total: out.total });
    } catch (exc) {
      notice(exc.message, 'error');
      const st = await get('/api/replay').catch(() => null);   // a refusal may still have moved it
      if (st) renderReplay(st);
      if (!(exc instanceof ApiError)) throw exc;
    }
  }));

  return {
    renderRuns,
    renderReplay,
    async loadReplay() {
      try {
        const st = await get('/api/replay');
        if (st && st.total) renderReplay(st);
      } catch {
        // no sequence loaded (or an older server): nothing to show
      }
    },
  };
}
