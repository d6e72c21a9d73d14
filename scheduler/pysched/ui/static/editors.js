// Editing: the config YAML (with errors at their field), the objects YAML (apply/delete),
// "add N nodes like this one", and the node list with a delete button per node.

import { ApiError, busy, del, post, put, seg } from './api.js';
import { locateField } from './yamlpath.js';
import {
  $, debounce, esc, fmtInt, fmtPct, fmtQty, naturalCompare, nextPage, notice, pageBounds, pagerAction, renderPager,
} from './util.js';

/** A textarea with a line-number gutter and highlighted error lines (no inline styles: CSS variables). */
export class CodeEditor {
  constructor(wrapper) {
    this.wrapper = wrapper;
    this.ta = wrapper.querySelector('textarea');
    this.gutter = wrapper.querySelector('.gutter');
    this.bands = document.createElement('div');
    this.bands.className = 'bands';
    this.bands.setAttribute('aria-hidden', 'true');
    wrapper.insertBefore(this.bands, this.ta);
    this.marked = new Map();   // 0-based line -> message
    this.lines = -1;
    this.ta.addEventListener('input', () => this.refresh());
    this.ta.addEventListener('scroll', () => this.syncScroll());
  }

  get value() { return this.ta.value; }

  set value(text) {
    this.ta.value = text;
    this.ta.scrollTop = 0;
    this.refresh(true);
  }

  syncScroll() {
    this.gutter.scrollTop = this.ta.scrollTop;
    this.wrapper.style.setProperty('--scroll', `${this.ta.scrollTop}px`);
    this.wrapper.style.setProperty('--scroll-x', `${this.ta.scrollLeft}px`);
  }

  refresh(force = false) {
    const n = this.ta.value.split('\n').length;
    if (n === this.lines && !force) return;
    this.lines = n;
    const parts = new Array(n);
    for (let i = 0; i < n; i += 1) {
      const m = this.marked.get(i);
      parts[i] = m !== undefined ? `<div class="ln err" title="${esc(m)}">${i + 1}</div>` : `<div class="ln">${i + 1}</div>`;
    }
    this.gutter.innerHTML = `${parts.join('')}<div class="ln pad"></div>`;
    this.syncScroll();
  }

  mark(lines) {
    this.marked = lines;
    this.bands.innerHTML = '';
    for (const i of lines.keys()) {
      const b = document.createElement('div');
      b.className = 'band';
      b.style.setProperty('--line', String(i));
      this.bands.appendChild(b);
    }
    this.refresh(true);
  }

  clearMarks() { this.mark(new Map()); }

  /** Scroll (without focusing) so line i is in view. */
  reveal(i) {
    const lh = parseFloat(getComputedStyle(this.ta).lineHeight) || 18;
    const top = i * lh;
    if (top < this.ta.scrollTop || top + lh > this.ta.scrollTop + this.ta.clientHeight - 16) {
      this.ta.scrollTop = Math.max(0, top - this.ta.clientHeight / 3);
      this.syncScroll();
    }
  }

  gotoLine(i) {
    const lines = this.ta.value.split('\n');
    if (i < 0 || i >= lines.length) return;
    let start = 0;
    for (let k = 0; k < i; k += 1) start += lines[k].length + 1;
    this.ta.focus();
    this.ta.setSelectionRange(start, start + lines[i].length);
    const lh = parseFloat(getComputedStyle(this.ta).lineHeight) || 18;
    this.ta.scrollTop = Math.max(0, i * lh - this.ta.clientHeight / 3);
    this.syncScroll();
  }
}

/** Errors as list items; the line of each (when found) is marked in the editor. */
function showErrors(listEl, editor, errors, withDocument) {
  const marks = new Map();
  const items = errors.map((e) => {
    const field = e.field ?? '';
    let line = -1;
    const at = /\bline (\d+)\b/.exec(e.message || '');
    if (Number.isInteger(e.line) && e.line > 0) line = e.line - 1;
    else if (field) line = locateField(editor.value, field, withDocument ? e.document ?? null : null);
    else if (at) line = Number(at[1]) - 1;   // "not valid YAML at line 2, column 3: ..."
    const count = editor.value.split('\n').length;
    if (line >= count) line = count - 1;    // "at line N" past the end: the input ended too early
    if (line >= 0) marks.set(line, `${field ? `${field}: ` : ''}${e.message}`);
    const doc = withDocument ? ` data-document="${esc(e.document ?? '')}"` : '';
    const where = withDocument && e.document !== undefined && e.document !== null ? `<span class="doc">document ${Number(e.document) + 1}</span> ` : '';
    const goto = line >= 0 ? ` <a href="#" class="goto" data-line="${line}">line ${line + 1}</a>` : '';
    return `<li${doc} data-field="${esc(field)}">${where}${field ? `<code class="field">${esc(field)}</code> ` : ''}`
      + `<span class="msg">${esc(e.message)}</span>${goto}</li>`;
  });
  listEl.innerHTML = items.join('');
  editor.mark(marks);
  const first = [...marks.keys()].sort((a, b) => a - b)[0];
  if (first !== undefined) editor.reveal(first);
}

function wireGoto(listEl, editor) {
  listEl.addEventListener('click', (ev) => {
    const a = ev.target.closest('a.goto');
    if (!a) return;
    ev.preventDefault();
    editor.gotoLine(Number(a.dataset.line));
  });
}

/** Errors of a 400 (the contract's shape), or the whole failure as one error without a field. */
function errorsOf(exc) {
  if (exc instanceof ApiError && exc.errors && exc.errors.length) return exc.errors;
  return [{ field: '', message: exc.message }];
}

const EXAMPLES = {
  pod: `apiVersion: v1
kind: Pod
metadata:
  name: whatif-1
  namespace: default
  labels: {app: whatif}
spec:
  schedulerName: pysched
  containers:
  - name: app
    image: nginx
    resources:
      requests: {cpu: 500m, memory: 512Mi}
`,
  deployment: `apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: default
spec:
  replicas: 5
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      schedulerName: pysched
      containers:
      - name: web
        image: nginx
        resources:
          requests: {cpu: "1", memory: 1Gi}
`,
  node: `apiVersion: v1
kind: Node
metadata:
  name: extra-1
  labels:
    topology.kubernetes.io/zone: zone-a
    node.kubernetes.io/instance-type: m5.2xlarge
    karpenter.sh/capacity-type: on-demand
status:
  allocatable: {cpu: "8", memory: 32Gi, pods: "110"}
  capacity: {cpu: "8", memory: 32Gi, pods: "110"}
`,
  podgroup: `apiVersion: scheduling.x-k8s.io/v1alpha1
kind: PodGroup
metadata:
  name: train
  namespace: default
spec:
  minMember: 4
---
apiVersion: batch/v1
kind: Job
metadata:
  name: train
  namespace: default
spec:
  parallelism: 4
  completions: 4
  template:
    metadata:
      labels: {scheduling.x-k8s.io/pod-group: train}
    spec:
      schedulerName: pysched
      restartPolicy: Never
      containers:
      - name: w
        image: trainer
        resources:
          requests: {cpu: "2", memory: 4Gi}
`,
  quota: `apiVersion: scheduling.x-k8s.io/v1alpha1
kind: ElasticQuota
metadata:
  name: team-a
  namespace: default
spec:
  min: {cpu: "10", memory: 20Gi}
  max: {cpu: "20", memory: 40Gi}
`,
  priorityclass: `apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata:
  name: high
value: 100000
description: preempts the default priority
`,
};

export const NODE_PAGE = 200;

/** Wire the editing tabs; `app` gives the view and is told of every change. */
export function setupEditors(app) {
  const config = new CodeEditor($('.code[data-editor=config]'));
  const objects = new CodeEditor($('.code[data-editor=objects]'));
  let configClean = '';
  let configDirty = false;

  config.ta.addEventListener('input', () => { configDirty = config.value !== configClean; });
  wireGoto($('#config-errors'), config);
  wireGoto($('#yaml-errors'), objects);

  $('#config-apply').addEventListener('click', () => busy(async () => {
    const res = $('#config-result');
    res.textContent = '';
    try {
      const out = await put('/api/config', { yaml: config.value });
      $('#config-errors').innerHTML = '';
      config.clearMarks();
      configClean = typeof out.config === 'string' ? out.config : config.value;
      configDirty = false;
      if (config.value !== configClean) config.value = configClean;
      res.textContent = `applied (scenario version ${out.version})`;
      await app.changed('config applied');
    } catch (exc) {
      showErrors($('#config-errors'), config, errorsOf(exc), false);
      res.textContent = exc instanceof ApiError && exc.status === 400 ? 'not applied: fix the errors below' : 'not applied';
      if (!(exc instanceof ApiError)) throw exc;
    }
  }));
  $('#config-revert').addEventListener('click', () => {
    config.value = configClean;
    configDirty = false;
    $('#config-errors').innerHTML = '';
    config.clearMarks();
  });

  $('#yaml-example').addEventListener('change', (ev) => {
    const text = EXAMPLES[ev.target.value];
    if (text) {
      objects.value = objects.value.trim() ? `${objects.value.replace(/\s+$/, '')}\n---\n${text}` : text;
    }
    ev.target.value = '';
  });

  $('#yaml-apply').addEventListener('click', () => busy(async () => {
    const res = $('#yaml-result');
    res.textContent = '';
    $('#yaml-applied').innerHTML = '';
    try {
      const out = await post('/api/objects', { yaml: objects.value, mode: $('#yaml-mode').value });
      $('#yaml-errors').innerHTML = '';
      objects.clearMarks();
      const applied = out.applied || [];
      $('#yaml-applied').innerHTML = applied.slice(0, 200).map((a) => `<li data-kind="${esc(a.kind)}" data-key="${esc(a.key)}" data-action="${esc(a.action)}">`
        + `<span class="badge">${esc(a.action)}</span> ${esc(a.kind)} <span class="mono">${esc(a.key)}</span></li>`).join('')
        + (applied.length > 200 ? `<li class="muted">… and ${fmtInt(applied.length - 200)} more</li>` : '');
      res.textContent = `${fmtInt(applied.length)} object(s) ${$('#yaml-mode').value === 'delete' ? 'deleted' : 'applied'} (scenario version ${out.version})`;
      await app.changed('objects changed');
    } catch (exc) {
      showErrors($('#yaml-errors'), objects, errorsOf(exc), true);
      res.textContent = 'nothing applied';
      if (!(exc instanceof ApiError)) throw exc;
    }
  }));

  // Add N nodes like this one.
  $('#clone-apply').addEventListener('click', () => busy(async () => {
    const node = $('#clone-node').value;
    const count = Number($('#clone-count').value);
    const res = $('#clone-result');
    if (!node) { res.textContent = 'pick a node'; return; }
    if (!Number.isInteger(count) || count < 1 || count > 10000) { res.textContent = 'count: 1 to 10000'; return; }
    try {
      const out = await post('/api/nodes/clone', { node, count });
      const added = out.added || [];
      res.textContent = `added ${fmtInt(added.length)} node(s)${added.length ? `: ${added.slice(0, 3).join(', ')}${added.length > 3 ? ', …' : ''}` : ''}`;
      await app.changed(`added ${added.length} node(s) like ${node}`);
    } catch (exc) {
      res.textContent = exc.message;
      if (!(exc instanceof ApiError)) throw exc;
    }
  }));

  // The node list: filtered, paged, a delete button per row.
  let nodePage = 0;
  let nodeMatches = [];
  let nodeBounds = null;
  const nodesTable = $('#nodes-table');
  const renderNodeRows = () => {
    nodeBounds = pageBounds(nodeMatches.length, nodePage, NODE_PAGE);
    nodePage = nodeBounds.page;
    const rows = [];
    for (let i = nodeBounds.start; i < nodeBounds.end; i += 1) {
      const n = nodeMatches[i];
      const taints = (n.taints || []).map((t) => (typeof t === 'string' ? t : `${t.key}${t.value ? `=${t.value}` : ''}:${t.effect}`)).join(', ');
      rows.push(`<tr data-node="${esc(n.name)}"><td class="mono">${esc(n.name)}</td><td>${esc(n.zone)}</td>`
        + `<td>${esc(n.instanceType)}</td><td>${esc(n.capacityType)}</td>`
        + `<td class="num">${esc(fmtQty('cpu', n.allocatable.cpu || 0))}</td><td class="num">${esc(fmtQty('memory', n.allocatable.memory || 0))}</td>`
        + `<td class="num">${esc(fmtInt((app.view().podsOnNode.get(n.name) || []).length))}</td><td class="num">${fmtPct(n.util)}</td>`
        + `<td class="note" title="${esc(taints)}">${esc(taints)}</td>`
        + `<td><button type="button" class="delete danger small" data-node="${esc(n.name)}" aria-label="delete node ${esc(n.name)}">delete</button></td></tr>`);
    }
    nodesTable.tBodies[0].innerHTML = rows.join('') || '<tr class="empty"><td colspan="10" class="muted">No nodes match.</td></tr>';
    const total = app.view().nodes.length;
    nodesTable.dataset.total = String(total);
    nodesTable.dataset.matching = String(nodeMatches.length);
    $('#nodes-count').textContent = `${fmtInt(nodeMatches.length)} of ${fmtInt(total)} nodes`;
    renderPager($('#nodes-pager'), nodeBounds, nodeMatches.length);
  };
  const filterNodes = () => {
    const t = $('#node-filter').value.trim().toLowerCase();
    const all = app.view().nodes;   // the scenario's nodes
    nodeMatches = t ? all.filter((n) => n.name.toLowerCase().includes(t) || (n.zone || '').toLowerCase() === t
      || (n.instanceType || '').toLowerCase() === t) : all.slice();
    nodeMatches.sort((a, b) => naturalCompare(a.name, b.name));
    renderNodeRows();
  };
  $('#node-filter').addEventListener('input', debounce(() => { nodePage = 0; filterNodes(); }, 120));
  pagerAction($('#nodes-pager'), (action) => { nodePage = nextPage(action, nodeBounds); renderNodeRows(); });
  nodesTable.addEventListener('click', (ev) => {
    const btn = ev.target.closest('button.delete');
    if (btn) {
      const name = btn.dataset.node;
      busy(async () => {
        try {
          await del(`/api/nodes/${seg(name)}`);
          notice(`deleted node ${name}: its bound pods are pending now`);
          await app.changed(`deleted node ${name}`);
        } catch (exc) {
          notice(exc.message, 'error');
          if (!(exc instanceof ApiError)) throw exc;
        }
      });
      return;
    }
    const row = ev.target.closest('tr[data-node]');
    if (row) app.selectNode(row.dataset.node, { scroll: true });
  });

  let cloneNames = '';
  return {
    /** The scenario changed (or first load): refresh what shows it, keeping the user's unsaved edits. */
    scenario(scenario) {
      if (!configDirty && typeof scenario.config === 'string' && scenario.config !== configClean) {
        configClean = scenario.config;
        config.value = configClean;
      }
      const names = (scenario.nodes || []).map((n) => n.name).sort(naturalCompare);
      const key = names.join('\n');
      if (key !== cloneNames) {
        cloneNames = key;
        const sel = $('#clone-node');
        const prev = sel.value;
        sel.innerHTML = names.map((n) => `<option value="${esc(n)}">${esc(n)}</option>`).join('');
        if (prev && names.includes(prev)) sel.value = prev;
      }
    },
    /** The view changed (a run displayed): utilisation and pods per node in the node list. */
    view() { filterNodes(); },
    cloneFrom(name) {
      $('#clone-node').value = name;
    },
    setObjects(text) { objects.value = text; },
  };
}
