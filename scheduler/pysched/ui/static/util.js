// Small helpers shared by the page's modules: escaping, formatting quantities, natural sort.

const ESC = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };

/** Escape text for an HTML string (element content or a double-quoted attribute). */
export function esc(value) {
  if (value === null || value === undefined) return '';
  return String(value).replace(/[&<>"']/g, (c) => ESC[c]);
}

export const $ = (sel, root = document) => root.querySelector(sel);
export const $$ = (sel, root = document) => Array.from(root.querySelectorAll(sel));

const collator = new Intl.Collator('en', { numeric: true, sensitivity: 'base' });
/** Natural order (n2 before n10), as pysched's natural_key sorts node names. */
export const naturalCompare = (a, b) => collator.compare(a, b);

const intFmt = new Intl.NumberFormat('en');
export const fmtInt = (n) => (n === null || n === undefined ? '–' : intFmt.format(n));

function trimNum(x, digits = 1) {
  const s = x.toFixed(digits);
  return s.includes('.') ? s.replace(/\.?0+$/, '') : s;
}

const BIN = ['', 'Ki', 'Mi', 'Gi', 'Ti', 'Pi'];

/** A quantity in the API's integer units: cpu in millicores, memory-like in bytes. */
export function fmtQty(resource, v) {
  if (v === null || v === undefined) return '–';
  if (resource === 'cpu') {
    if (v === 0) return '0';
    if (Math.abs(v) < 1000) return `${v}m`;
    const cores = v / 1000;
    if (Math.abs(cores) >= 100) return intFmt.format(Math.round(cores));
    return trimNum(cores, v % 1000 === 0 ? 0 : Math.abs(cores) >= 10 ? 1 : 2);
  }
  if (resource === 'memory' || resource === 'ephemeral-storage' || resource.startsWith('hugepages-')) {
    let i = 0;
    let x = v;
    while (Math.abs(x) >= 1024 && i < BIN.length - 1) { x /= 1024; i += 1; }
    return `${trimNum(x, x >= 100 ? 0 : 1)}${BIN[i]}`;
  }
  return fmtInt(v);
}

export function pct(requested, allocatable) {
  if (!allocatable) return null;
  return (100 * requested) / allocatable;
}

export function fmtPct(p) {
  if (p === null || p === undefined || Number.isNaN(p)) return '–';
  return `${p >= 10 || p === 0 ? p.toFixed(0) : p.toFixed(1)}%`;
}

export function fmtMs(ms) {
  if (ms === null || ms === undefined) return '–';
  if (ms < 1000) return `${Math.round(ms)} ms`;
  return `${trimNum(ms / 1000, 2)} s`;
}

/** Pluralise: plural(3, 'node') -> '3 nodes'. */
export function plural(n, word, many = `${word}s`) {
  return `${fmtInt(n)} ${n === 1 ? word : many}`;
}

export function debounce(fn, ms) {
  let t = null;
  return (...args) => {
    clearTimeout(t);
    t = setTimeout(() => fn(...args), ms);
  };
}

/** A 0..10 colour bucket for a 0..100 percentage. */
export function bucket(p) {
  if (p === null || p === undefined || Number.isNaN(p)) return 0;
  return Math.max(0, Math.min(10, Math.round(p / 10)));
}

/** Show a transient message in the #notice bar. */
let noticeTimer = null;
export function notice(text, kind = 'info') {
  const el = document.getElementById('notice');
  if (!el) return;
  el.textContent = text;
  el.className = kind;
  el.hidden = false;
  clearTimeout(noticeTimer);
  noticeTimer = setTimeout(() => { el.hidden = true; }, kind === 'error' ? 12000 : 5000);
}

/** A pager (first/prev/info/next/last) over a list; returns the slice bounds. */
export function pageBounds(total, page, size) {
  const pages = Math.max(1, Math.ceil(total / size));
  const p = Math.max(0, Math.min(page, pages - 1));
  return { page: p, pages, start: p * size, end: Math.min(total, (p + 1) * size) };
}

export function renderPager(el, b, total) {
  const info = el.querySelector('.page-info');
  info.textContent = total === 0 ? 'nothing to show'
    : `${fmtInt(b.start + 1)}–${fmtInt(b.end)} of ${fmtInt(total)} (page ${b.page + 1}/${b.pages})`;
  el.querySelector('[data-page=first]').disabled = b.page === 0;
  el.querySelector('[data-page=prev]').disabled = b.page === 0;
  el.querySelector('[data-page=next]').disabled = b.page >= b.pages - 1;
  el.querySelector('[data-page=last]').disabled = b.page >= b.pages - 1;
}

export function pagerAction(el, onPage) {
  el.addEventListener('click', (ev) => {
    const btn = ev.target.closest('button[data-page]');
    if (btn) onPage(btn.dataset.page);
  });
}

export function nextPage(action, b) {
  switch (action) {
    case 'first': return 0;
    case 'prev': return b.page - 1;
    case 'next': return b.page + 1;
    case 'last': return b.pages - 1;
    default: return b.page;
  }
}
