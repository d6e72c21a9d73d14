// pysched ui: a live what-if page over pysched's offline engine. The page state is the scenario
// (GET /api/scenario) and the run on display (GET /api/runs/{id}); everything is derived from both.
// Where the user is (the run, the pod, the node open) is the URL's fragment (route.js): moving in
// the page pushes a history entry, a link or the back button moves the page.

import { ApiError, busy, del, get, post, seg } from './api.js';
import { setupEditors } from './editors.js';
import {
  explainTableHTML, groupAttemptHTML, metaHTML, renderPodSummary, watchExplainOverflow, whyText,
} from './explain.js';
import { markCells, renderHeatmap, renderSummary, revealCell } from './heatmap.js';
import { deriveView } from './model.js';
import { filterPods, renderPods } from './pods.js';
import { formatRoute, parseRoute, sameRoute } from './route.js';
import { setupRuns } from './runs.js';
import {
  $, $$, debounce, esc, fmtInt, fmtMs, fmtPct, fmtQty, nextPage, notice, pagerAction, pct, plural,
} from './util.js';

const EXPLAIN_CACHE = 16;
const NODE_PODS_LISTED = 100;

const S = {
  scenario: null,
  run: null,
  runs: [],
  view: deriveView(null, null),
  groupBy: 'zone',
  podFilter: '',
  podState: 'all',
  podPage: 0,
  podMatches: [],
  podBounds: null,
  selectedPod: null,
  selectedNode: null,
  explainCache: new Map(),
  explainSeq: 0,
  session: null,      // this pysched ui process (GET /api/session): run numbers are its own
  maxRuns: null,
  routing: false,     // applying a link: the URL already says where the page goes
  lastHash: null,     // the fragment the page last showed or applied
  ready: false,
};

const timings = {};
window.__uiTimings = timings;

function timed(name, fn) {
  const t0 = performance.now();
  const out = fn();
  timings[name] = Math.round((performance.now() - t0) * 10) / 10;
  return out;
}

function report(message) {
  if (window.__uiReport) window.__uiReport(message);
  else (window.__uiErrors = window.__uiErrors || []).push(String(message));
}

/** An API failure the user should see: server bugs and lost connections are errors, the rest notices. */
function apiFailure(exc) {
  if (!(exc instanceof ApiError)) throw exc;
  if (exc.status === 0 || exc.status >= 500 || exc.status === 401) report(exc.message);
  else notice(exc.message, 'error');
}

// -- rendering -------------------------------------------------------------------------------

function runCounts(run) {
  let placed = 0;
  let pending = 0;
  for (const p of run.placements || []) if (p.node) placed += 1; else pending += 1;
  return { placed, pending };
}

function renderHeader() {
  const sc = S.scenario;
  if (sc) {
    const pending = (sc.pods || []).reduce((a, p) => a + (p.state === 'pending' ? 1 : 0), 0);
    $('#status-scenario').textContent = `scenario v${sc.version} · ${plural((sc.nodes || []).length, 'node')} · `
      + `${plural((sc.pods || []).length, 'pod')} (${fmtInt(pending)} pending)`;
  }
  const st = $('#status-run');
  if (S.run) {
    const c = runCounts(S.run);
    st.textContent = `run #${S.run.id}${S.run.label ? ` “${S.run.label}”` : ''} · ${fmtInt(c.placed)} placed · `
      + `${fmtInt(c.pending)} left pending · ${fmtMs(S.run.durationMs)}`;
    st.classList.toggle('warn-text', c.pending > 0);
  } else {
    st.textContent = 'no run yet';
    st.classList.remove('warn-text');
  }
  const stale = $('#stale');
  stale.hidden = !(S.run && sc && S.run.version !== sc.version);
  if (!stale.hidden) stale.textContent = `scenario changed since this run (run at v${S.run.version}, now v${sc.version})`;
}

function renderCluster() {
  timed('heatmap', () => renderHeatmap($('#heatmap'), S.view, S.groupBy));
  timed('summary', () => renderSummary($('#util-summary'), S.view, Boolean(S.run)));
  markSelection();
}

function refilterPods(resetPage = false) {
  if (resetPage) S.podPage = 0;
  S.podMatches = timed('podFilter', () => filterPods(S.view.pods, S.podFilter, S.podState));
  renderPodPage();
}

function renderPodPage() {
  S.podBounds = timed('podsTable', () => renderPods($('#pods-table'), $('#pods-pager'), S.podMatches, S.view.pods.length,
    S.podPage, S.selectedPod));
  S.podPage = S.podBounds.page;
  $('#pods-count').textContent = `${fmtInt(S.podMatches.length)} of ${fmtInt(S.view.pods.length)} · `
    + `${fmtInt(S.view.counts.pending)} pending`;
}

function markSelection() {
  const pod = S.selectedPod ? S.view.podByKey.get(S.selectedPod) : null;
  markCells($('#heatmap'), {
    chosen: pod ? pod.node : null,
    nominated: pod && pod.placement ? pod.placement.nominatedNode || null : null,
    picked: S.selectedNode,
  });
}

function rebuild() {
  S.view = timed('derive', () => deriveView(S.scenario, S.run));
  renderHeader();
  renderCluster();
  refilterPods();
  editors.view();
  renderNodeDetail();
  renderSelectedPod();
}

// -- node detail (a heatmap cell clicked) ----------------------------------------------------

function renderNodeDetail() {
  const card = $('#node-detail');
  const n = S.selectedNode ? S.view.nodeByName.get(S.selectedNode) : null;
  if (!n) {   // none open, or it left the scenario
    S.selectedNode = null;
    card.hidden = true;
    card.innerHTML = '';
    delete card.dataset.node;
    return;
  }
  card.dataset.node = n.name;
  const res = S.view.resources.filter((r) => (n.allocatable[r] || 0) || (n.requested[r] || 0));
  const pods = S.view.podsOnNode.get(n.name) || [];
  const taints = (n.taints || []).map((t) => (typeof t === 'string' ? t : `${t.key}${t.value ? `=${t.value}` : ''}:${t.effect}`));
  card.innerHTML = `<div class="card-head"><h3 class="mono">${esc(n.name)}</h3>`
    + `<span class="muted">${esc([n.zone, n.instanceType, n.capacityType].filter(Boolean).join(' · '))}</span>`
    + `${!n.inRun && S.run ? '<span class="badge warn">not in this run</span>' : ''}`
    + '<span class="spacer"></span>'
    + `<button type="button" class="small" data-act="clone">add nodes like this…</button>
       <button type="button" class="small danger" data-act="delete">delete node</button>
       <button type="button" class="small" data-act="close" aria-label="close">×</button></div>`
    + `<table class="data compact"><thead><tr><th>resource</th><th class="num">requested</th><th class="num">allocatable</th><th class="num">after</th><th class="num">before</th></tr></thead><tbody>${
      res.map((r) => `<tr data-resource="${esc(r)}"><th scope="row">${esc(r)}</th><td class="num">${esc(fmtQty(r, n.requested[r] || 0))}</td>`
        + `<td class="num">${esc(fmtQty(r, n.allocatable[r] || 0))}</td><td class="num">${fmtPct(pct(n.requested[r] || 0, n.allocatable[r] || 0))}</td>`
        + `<td class="num muted">${fmtPct(pct(n.beforeRequested[r] || 0, n.allocatable[r] || 0))}</td></tr>`).join('')}</tbody></table>`
    + (taints.length ? `<p><span class="label">taints</span> ${taints.map((t) => `<span class="chip">${esc(t)}</span>`).join(' ')}</p>` : '')
    + `<p><span class="label">${esc(plural(pods.length, 'pod'))}</span> ${pods.slice(0, NODE_PODS_LISTED).map((p) => `<a href="${esc(hrefFor({ pod: p.key }))}" class="pod-link st-${p.status}" data-select-pod="${esc(p.key)}">${esc(p.key)}</a>`).join(' ')}`
    + `${pods.length > NODE_PODS_LISTED ? ` <a href="#" data-filter-node="${esc(n.name)}">all ${fmtInt(pods.length)} in the pods table…</a>` : ''}</p>`;
  card.hidden = false;
}

/** With no pod selected: what the run left pending, by the scheduler's reason (a pod of each to open). */
function renderPendingReasons() {
  const box = $('#pending-reasons');
  const groups = new Map();
  for (const p of (S.run && S.run.placements) || []) {
    if (p.node) continue;
    const reason = p.message || p.code || 'not placed';
    const g = groups.get(reason);
    if (g) g.count += 1; else groups.set(reason, { count: 1, pod: p.pod });
  }
  if (!groups.size) {
    box.hidden = !S.run;
    box.innerHTML = S.run ? `<h3>Every pod of run #${esc(S.run.id)} was placed.</h3>` : '';
    return;
  }
  const top = [...groups.entries()].sort((a, b) => b[1].count - a[1].count).slice(0, 12);
  box.innerHTML = `<h3>Left pending by run #${esc(S.run.id)}, by reason</h3><ul class="reasons">${top.map(([reason, g]) => (
    `<li><span class="count">${esc(fmtInt(g.count))}</span> <span class="reason">${esc(reason)}</span> `
    + `<a href="${esc(hrefFor({ pod: g.pod }))}" data-select-pod="${esc(g.pod)}">e.g. ${esc(g.pod)}</a></li>`)).join('')}</ul>`
    + (groups.size > top.length ? `<p class="muted">and ${esc(plural(groups.size - top.length, 'other reason'))}</p>` : '');
  box.hidden = false;
}

function selectNode(name, { scroll = false, history = 'push' } = {}) {
  S.selectedNode = name;
  renderNodeDetail();
  markSelection();
  if (name) revealCell($('#heatmap'), name);
  if (scroll && name) $('#node-detail').scrollIntoView({ block: 'nearest' });
  syncUrl(history);
}

// -- selected pod ----------------------------------------------------------------------------

function clearExplain(message) {
  $('#explain-table').innerHTML = '';
  explainOverflow();
  $('#explain-meta').innerHTML = '';
  $('#group-attempt').innerHTML = '';
  $('#group-attempt').hidden = true;
  $('#explain-status').textContent = message;
}

function renderSelectedPod() {
  const detail = $('#pod-detail');
  const pod = S.selectedPod ? S.view.podByKey.get(S.selectedPod) : null;
  $$('#pods-table tr.selected').forEach((tr) => tr.classList.remove('selected'));
  if (!pod) {
    delete detail.dataset.pod;
    $('#pod-body').hidden = true;
    $('#pod-empty').hidden = false;
    $('#pod-title').textContent = '';
    $('#pod-delete').hidden = true;
    $('#pod-close').hidden = true;
    S.selectedPod = null;
    renderPendingReasons();
    markSelection();
    return;
  }
  detail.dataset.pod = pod.key;
  $('#pod-empty').hidden = true;
  $('#pod-body').hidden = false;
  $('#pod-delete').hidden = Boolean(pod.gone);
  $('#pod-close').hidden = false;
  const row = $(`#pods-table tr[data-pod="${CSS.escape(pod.key)}"]`);
  if (row) row.classList.add('selected');
  renderPodSummary(pod, S.run);
  markSelection();
  // Cached per (run, pod): re-rendering after a rebuild costs no request.
  loadExplain(pod);
}

async function loadExplain(pod) {
  const detail = $('#pod-detail');
  const seq = ++S.explainSeq;
  if (!S.run) {
    detail.dataset.explained = '';
    clearExplain('No run yet: press Run to schedule the pending pods, then select a pod.');
    return;
  }
  if (!pod.placement) {
    detail.dataset.explained = '';
    clearExplain(pod.status === 'preempted' ? 'Preempted by the run: it was bound before, so the run has no cycle of its own to explain.'
      : pod.status === 'bound' ? 'Bound before the run: the run did not schedule this pod, so there is no cycle to explain.'
        : 'Not in the displayed run (added since): run again to see its cycle.');
    return;
  }
  const run = S.run;
  const key = `${run.id}|${pod.key}`;
  let ex = S.explainCache.get(key);
  if (!ex) {
    clearExplain('Computing the explanation (re-running this run\'s snapshot for this pod)…');
    try {
      ex = await busy(() => get(`/api/runs/${seg(run.id)}/explain?pod=${encodeURIComponent(pod.key)}`));
    } catch (exc) {
      if (seq === S.explainSeq) clearExplain(`No explanation: ${exc.message}`);
      if (!(exc instanceof ApiError)) throw exc;
      if (exc.status >= 500) report(exc.message);
      return;
    }
    S.explainCache.set(key, ex);
    if (S.explainCache.size > EXPLAIN_CACHE) S.explainCache.delete(S.explainCache.keys().next().value);
  }
  if (seq !== S.explainSeq || S.run !== run || S.selectedPod !== pod.key) return;
  const chosen = ex.chosen ?? ex.selectedNode ?? pod.placement.node ?? null;
  const { classified } = timed('explainTable', () => {
    const out = explainTableHTML(ex, chosen);
    $('#explain-table').innerHTML = out.html;
    return out;
  });
  applyCompact();
  $('#explain-meta').innerHTML = metaHTML(ex);
  const attempt = groupAttemptHTML(ex.groupAttempt);
  $('#group-attempt').innerHTML = attempt;
  $('#group-attempt').hidden = !attempt;
  const why = whyText(ex, pod.placement, classified);
  const prev = $('#chosen-why').textContent;
  $('#chosen-why').textContent = prev && !pod.node ? `${prev} ${why}` : why;
  const victims = ex.victims && ex.victims.length ? ex.victims : (ex.preemption && ex.preemption.victims) || [];
  if (victims.length && !(pod.placement.victims || []).length) {
    $('#victims').innerHTML = victims.map((v) => `<li data-pod="${esc(v)}"><a href="${esc(hrefFor({ pod: v }))}" data-select-pod="${esc(v)}">${esc(v)}</a></li>`).join('');
    $('#victims-box').hidden = false;
  }
  const c = classified;
  const failed = c.groups.reduce((a, [, names]) => a + names.length, 0);
  const rows = Math.min(c.passed.length, 200);
  const notes = [];
  if (rows) notes.push(`showing the best ${fmtInt(rows)} by total score`);
  if (failed) notes.push('failures grouped by verdict (click one to list its nodes)');
  $('#explain-status').textContent = !c.nodes.length ? 'No node reached the Filter plugins: the cycle stopped at PreFilter.'
    : `${plural(c.nodes.length, 'node')}: ${fmtInt(c.passed.length)} passed every filter, ${fmtInt(failed)} failed one`
    + `${c.notEvaluated.length ? `, ${fmtInt(c.notEvaluated.length)} not evaluated` : ''}`
    + `${notes.length ? `. ${notes.join('; ').replace(/^./, (ch) => ch.toUpperCase())}.` : '.'}`;
  detail.dataset.explained = key;
}

/** "weighted scores only": hide the raw and normalized columns (CSS) and fix the header spans. */
function applyCompact() {
  const on = $('#explain-compact').checked;
  const t = $('#explain-table');
  t.classList.toggle('compact-scores', on);
  const names = t.querySelectorAll('th.sname');
  for (const th of names) th.colSpan = on ? 1 : 3;
  const group = t.querySelector('th.sgroup');
  if (group) group.colSpan = names.length * (on ? 1 : 3);
  explainOverflow();
}

function selectPod(key, { scroll = false, smooth = true, history = 'push' } = {}) {
  S.selectedPod = key;
  renderSelectedPod();
  const pod = key ? S.view.podByKey.get(key) : null;
  if (pod) revealCell($('#heatmap'), pod.node || (pod.placement && pod.placement.nominatedNode));
  if (scroll && pod) $('#pod-detail').scrollIntoView({ block: 'start', behavior: smooth ? 'smooth' : 'auto' });
  syncUrl(history);
}

// -- the URL: deep links and the back button ----------------------------------------------------

/** The link to a place in the page (the run on display unless `run` is given). */
function hrefFor({ run = S.run ? S.run.id : null, pod = null, node = null } = {}) {
  return formatRoute({ run, pod, node, session: S.session }) || '#/';
}

/** Put where the page is in the address bar: 'push' (a user's move, back returns), 'replace'. */
function syncUrl(mode = 'replace') {
  if (S.routing || !S.ready) return;
  const hash = formatRoute({ run: S.run ? S.run.id : null, pod: S.selectedPod, node: S.selectedNode, session: S.session });
  S.lastHash = hash;
  if (hash === location.hash) return;
  const url = hash || `${location.pathname}${location.search}`;
  if (mode === 'push') {
    history.pushState(null, '', url);
    showLinkProblems([]);
  } else history.replaceState(null, '', url);
}

/** What a link named that the page cannot show, said in the page (never a blank page). */
function showLinkProblems(problems) {
  const box = $('#link-problem');
  box.hidden = !problems.length;
  $('#link-problem-text').innerHTML = problems.map((p) => `<li>${esc(p)}</li>`).join('');
  box.dataset.count = String(problems.length);
}

/** Move the page to `route` (a link opened, the back or forward button). */
async function applyRoute(route) {
  const problems = [...route.problems];
  let want = route.run;
  S.routing = true;
  try {
    if (want && route.session && S.session && route.session !== S.session) {
      problems.push(`This link is to run #${want} of another pysched ui session (${route.session}; this one is `
        + `${S.session}). Runs live in the memory of the pysched ui process that made them and are numbered from 1 `
        + `in each, so that run is gone: ${S.run ? `showing this session's run #${S.run.id} instead` : 'no run is shown'}.`);
      want = null;
    }
    if (want && (!S.run || String(S.run.id) !== want)) {
      try {
        // a run not in the list of those kept (read again: another tab may have run since) is not
        // asked for, a 404 the console would log
        if (!S.runs.some((r) => String(r.id) === want)) await refreshRuns();
        if (!S.runs.some((r) => String(r.id) === want)) throw new ApiError(404, null, `no run ${want}`);
        await displayRun(await get(`/api/runs/${seg(want)}`), { history: 'none' });
      } catch (exc) {
        if (!(exc instanceof ApiError) || exc.status !== 404) throw exc;
        const kept = S.runs.length ? `runs #${S.runs[0].id} to #${S.runs[S.runs.length - 1].id} are kept`
          : 'no run is kept yet';
        problems.push(`Run #${want} is not kept by this pysched ui session (${kept}; it keeps the last `
          + `${S.maxRuns ?? 'few'}, fewer of a large scenario, the oldest dropped first, and none after a restart)`
          + `${S.run ? `: showing run #${S.run.id} instead.` : '.'}`);
      }
    }
    const where = S.run ? `the scenario or run #${S.run.id}` : 'the scenario';
    if (route.node && !S.view.nodeByName.has(route.node)) {
      problems.push(`No node named "${route.node}" in ${where}.`);
      selectNode(null);
    } else if (route.node !== S.selectedNode) selectNode(route.node, { scroll: Boolean(route.node) });
    if (route.pod && !S.view.podByKey.has(route.pod)) {
      problems.push(`No pod ${route.pod} in ${where}.`);
      selectPod(null);
    } else if (route.pod !== S.selectedPod) selectPod(route.pod, { scroll: Boolean(route.pod), smooth: false });
  } catch (exc) {
    apiFailure(exc);
  } finally {
    S.routing = false;
  }
  showLinkProblems(problems);
  syncUrl('replace');   // the address bar says what is shown (a bad link's place is in the message)
}

function onLocation() {
  if (!S.ready || location.hash === S.lastHash) return;
  S.lastHash = location.hash;
  const route = parseRoute(location.hash);
  const here = { run: S.run ? String(S.run.id) : null, pod: S.selectedPod, node: S.selectedNode };
  if (sameRoute(route, here) && !route.problems.length && (!route.session || route.session === S.session)) return;
  busy(() => applyRoute(route));
}

// -- runs ------------------------------------------------------------------------------------

async function refreshRuns() {
  S.runs = (await get('/api/runs')) || [];
  runsUi.renderRuns(S.runs, S.run ? S.run.id : null);
}

async function loadScenario() {
  S.scenario = await get('/api/scenario');
  editors.scenario(S.scenario);
}

async function displayRun(run, { refreshScenario = false, refreshList = true, history = 'push' } = {}) {
  S.run = run;
  document.body.dataset.run = String(run.id);
  if (refreshScenario) await loadScenario();
  rebuild();
  if (refreshList) await refreshRuns();
  else runsUi.renderRuns(S.runs, run.id);
  if (history !== 'none') syncUrl(history);
}

async function showRun(id) {
  await busy(async () => {
    try {
      const run = await get(`/api/runs/${seg(id)}`);
      await displayRun(run);
    } catch (exc) { apiFailure(exc); }
  });
}

/** "running…" in the header while a run is under way (the server answers meanwhile). */
function showRunning(on) {
  const st = $('#status-run');
  st.classList.toggle('running', on);
  if (on) st.textContent = `running the scenario's pending pods…${S.run ? ` (showing run #${S.run.id} until done)` : ''}`;
  else renderHeader();
}

async function doRun() {
  await busy(async () => {
    const label = $('#run-label').value.trim();
    const btn = $('#run');
    btn.disabled = true;
    showRunning(true);
    try {
      const run = await post('/api/runs', label ? { label } : {});
      $('#run-label').value = '';
      await displayRun(run);
    } catch (exc) {
      if (exc instanceof ApiError && exc.status === 409) notice('A run is already in progress: wait for it to finish.', 'error');
      else apiFailure(exc);
    } finally {
      btn.disabled = false;
      showRunning(false);
    }
  });
}

/** The scenario changed (an edit succeeded): show it, and run again if auto-run is on. */
async function changed(what) {
  await loadScenario();
  rebuild();
  syncUrl('replace');   // a deleted pod or node is no longer open
  if (what) notice(what);
  if ($('#auto-run').checked) await doRun();
}

// -- wiring ----------------------------------------------------------------------------------

const app = {
  view: () => S.view,
  changed,
  selectNode,
  selectPod,
  showRun,
  displayRun,
  refreshScenario: loadScenario,
  runHref: (id) => hrefFor({ run: id }),
};
const editors = setupEditors(app);
const explainOverflow = watchExplainOverflow($('#explain-frame'), $('.explain-wrap'), $('#explain-scroll-hint'));
const runsUi = setupRuns(app);

function wireTabs() {
  const strip = $('#tab-strip');
  const buttons = $$('.tabs [role=tab]');
  const setActive = (name) => {
    for (const b of buttons) b.setAttribute('aria-selected', String(b.dataset.tab === name));
    for (const p of $$('.tab-panel', strip)) p.classList.toggle('active', p.dataset.tab === name);
  };
  for (const b of buttons) {
    b.addEventListener('click', () => {
      const panel = $(`#tab-${b.dataset.tab}`);
      strip.scrollTo({ left: panel.offsetLeft - strip.offsetLeft, behavior: 'smooth' });
      setActive(b.dataset.tab);
    });
  }
  // The panels sit side by side in a snapping strip: whatever scrolls one into view (a tab, the
  // keyboard, focus moving into it) makes its tab the active one.
  strip.addEventListener('scroll', debounce(() => {
    const panels = $$('.tab-panel', strip);
    const i = Math.round(strip.scrollLeft / Math.max(1, strip.clientWidth));
    if (panels[i]) setActive(panels[i].dataset.tab);
  }, 60));
  setActive('config');
}

function wire() {
  $('#run').addEventListener('click', () => doRun());
  $('#group-by').addEventListener('change', (ev) => { S.groupBy = ev.target.value; renderCluster(); });
  $('#pod-filter').addEventListener('input', debounce((ev) => { S.podFilter = ev.target.value; refilterPods(true); }, 150));
  $('#pod-state').addEventListener('change', (ev) => { S.podState = ev.target.value; refilterPods(true); });
  pagerAction($('#pods-pager'), (action) => { S.podPage = nextPage(action, S.podBounds); renderPodPage(); });
  $('#pods-table').addEventListener('click', (ev) => {
    const tr = ev.target.closest('tr[data-pod]');
    if (tr) selectPod(tr.dataset.pod);
  });
  $('#heatmap').addEventListener('click', (ev) => {
    const cell = ev.target.closest('.heat-cell[data-node]');
    if (cell) selectNode(cell.dataset.node);
  });
  $('#pod-close').addEventListener('click', () => selectPod(null));
  $('#pod-delete').addEventListener('click', () => {
    const key = S.selectedPod;
    if (!key) return;
    const [ns, ...rest] = key.split('/');
    busy(async () => {
      try {
        await del(`/api/pods/${seg(ns)}/${seg(rest.join('/'))}`);
        S.selectedPod = null;
        await changed(`deleted pod ${key}`);
      } catch (exc) { apiFailure(exc); }
    });
  });
  $('#explain-compact').addEventListener('change', applyCompact);
  // Links that select a pod (victims, a node's pods) and filter by node.
  document.addEventListener('click', (ev) => {
    const a = ev.target.closest('[data-select-pod]');
    if (a && !plainClick(ev)) return;   // ctrl/shift/middle click: the browser opens its href (a deep link)
    if (a) { ev.preventDefault(); selectPod(a.dataset.selectPod, { scroll: true }); return; }
    const f = ev.target.closest('[data-filter-node]');
    if (f) {
      ev.preventDefault();
      $('#pod-filter').value = `node:${f.dataset.filterNode}`;
      S.podFilter = $('#pod-filter').value;
      refilterPods(true);
    }
  });
  $('#node-detail').addEventListener('click', (ev) => {
    const b = ev.target.closest('button[data-act]');
    if (!b || !S.selectedNode) return;
    const name = S.selectedNode;
    if (b.dataset.act === 'close') selectNode(null);
    if (b.dataset.act === 'clone') {
      editors.cloneFrom(name);
      $('#tab-btn-nodes').click();
      $('#workbench').scrollIntoView({ block: 'start', behavior: 'smooth' });
      $('#clone-count').focus();
    }
    if (b.dataset.act === 'delete') {
      busy(async () => {
        try {
          await del(`/api/nodes/${seg(name)}`);
          S.selectedNode = null;
          await changed(`deleted node ${name}: its bound pods are pending now`);
        } catch (exc) { apiFailure(exc); }
      });
    }
  });
  wireTabs();
  $('#link-problem-dismiss').addEventListener('click', () => showLinkProblems([]));
  window.addEventListener('popstate', onLocation);
  window.addEventListener('hashchange', onLocation);
}

/** A click that should stay in the page (not one asking the browser to open the link elsewhere). */
function plainClick(ev) {
  return ev.button === 0 && !ev.ctrlKey && !ev.metaKey && !ev.shiftKey && !ev.altKey;
}

async function init() {
  wire();
  await busy(async () => {
    const t0 = performance.now();
    try {
      const session = await get('/api/session');
      S.session = session.session;
      S.maxRuns = session.maxRuns;
      await loadScenario();
      rebuild();
      await refreshRuns();
      if (S.runs.length) {
        // the latest run (a link to another one moves there below, once the page is ready)
        const run = await get(`/api/runs/${seg(S.runs[S.runs.length - 1].id)}`);
        await displayRun(run, { refreshList: false, history: 'none' });
      }
      await runsUi.loadReplay();
    } catch (exc) {
      apiFailure(exc);
      return;
    }
    timings.firstRender = Math.round(performance.now() - t0);
    // Ready: the scenario (and the latest run, if any) is on the page. A first visit then schedules
    // the pending pods once, so the heatmap shows placements: body[data-busy] stays set meanwhile.
    document.body.dataset.ready = '1';
    if (!S.runs.length && (S.scenario.pods || []).some((p) => p.state === 'pending')) {
      showRunning(true);
      try {
        const run = await post('/api/runs', { label: 'initial' });
        await displayRun(run, { history: 'none' });
        timings.initialRun = Math.round(performance.now() - t0);
      } catch (exc) {
        // 409: a run started elsewhere (another tab): the user can Run once it is done.
        if (exc instanceof ApiError && exc.status === 409) notice('A run is in progress elsewhere: press Run when it is done.');
        else apiFailure(exc);
      } finally {
        showRunning(false);
      }
    }
    // Where the address says (a deep link), or the address says where the page is.
    S.ready = true;
    S.lastHash = location.hash;
    await applyRoute(parseRoute(location.hash));
  });
}

init();
