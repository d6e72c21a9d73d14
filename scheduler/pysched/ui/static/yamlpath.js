// Find the line of a field path ("profiles[0].plugins.score.enabled[1].weight") in YAML text,
// by indentation (block style, as people write scheduler configs and manifests). Returns the
// deepest part of the path it can find: a line close to the error is better than none.

/** "a[0].b.c[1]" -> ["a", 0, "b", "c", 1]; "metadata.labels[app.kubernetes.io/name]" keeps the key. */
export function parsePath(path) {
  const segs = [];
  const re = /([^.[\]]+)|\[([^\]]*)\]/g;
  let m;
  while ((m = re.exec(path || '')) !== null) {
    if (m[1] !== undefined) segs.push(m[1]);
    else {
      const inner = m[2].replace(/^["']|["']$/g, '');
      segs.push(/^\d+$/.test(inner) ? Number(inner) : inner);
    }
  }
  return segs;
}

const indentOf = (line) => line.length - line.trimStart().length;
const significant = (line) => {
  const t = line.trim();
  return t !== '' && !t.startsWith('#');
};
const reEsc = (s) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

function blockIndent(lines, start, end) {
  let lvl = -1;
  for (let i = start; i < end; i += 1) {
    if (!significant(lines[i])) continue;
    const n = indentOf(lines[i]);
    if (lvl < 0 || n < lvl) lvl = n;
  }
  return lvl;
}

/** The line (index into lines) of the deepest segment found within [from, to), or -1. */
function locateIn(linesIn, from, to, segs) {
  const lines = linesIn.slice();
  let start = from;
  let end = to;
  let found = -1;
  for (const seg of segs) {
    const lvl = blockIndent(lines, start, end);
    if (lvl < 0) break;
    if (typeof seg === 'number') {
      const items = [];
      for (let i = start; i < end; i += 1) {
        if (significant(lines[i]) && indentOf(lines[i]) === lvl && /^-(\s|$)/.test(lines[i].trimStart())) items.push(i);
      }
      if (seg >= items.length) break;
      const hit = items[seg];
      found = hit;
      const itemEnd = seg + 1 < items.length ? items[seg + 1] : end;
      // The item's content starts after its dash: make that line a plain indented one.
      lines[hit] = lines[hit].replace(/^(\s*)-/, '$1 ');
      start = hit;
      end = itemEnd;
    } else {
      const keyRe = new RegExp(`^(["']?)${reEsc(seg)}\\1\\s*:(\\s|$)`);
      let hit = -1;
      for (let i = start; i < end; i += 1) {
        if (significant(lines[i]) && indentOf(lines[i]) === lvl && keyRe.test(lines[i].trimStart())) { hit = i; break; }
      }
      if (hit < 0) break;
      found = hit;
      let j = hit + 1;
      while (j < end) {
        const l = lines[j];
        if (significant(l)) {
          const n = indentOf(l);
          // a sequence may sit at its key's own indent ("key:\n- a")
          if (n < lvl || (n === lvl && !/^-(\s|$)/.test(l.trimStart()))) break;
        }
        j += 1;
      }
      start = hit + 1;
      end = j;
    }
  }
  return found;
}

/** [start, end) line ranges of the YAML documents in text (empty documents left out). */
export function documentRanges(lines) {
  const out = [];
  let start = 0;
  const push = (s, e) => {
    for (let i = s; i < e; i += 1) if (significant(lines[i])) { out.push([s, e]); return; }
  };
  for (let i = 0; i < lines.length; i += 1) {
    if (/^---(\s|$)/.test(lines[i]) || /^\.\.\.(\s|$)/.test(lines[i])) {
      push(start, i);
      start = i + 1;
    }
  }
  push(start, lines.length);
  return out;
}

/**
 * The 0-based line of `field` in `text` (in its `document`-th YAML document when given), or -1.
 * An error may also name its line itself (`line`, 1-based): then that wins.
 */
export function locateField(text, field, document = null) {
  const lines = text.split('\n');
  let from = 0;
  let to = lines.length;
  if (document !== null && document !== undefined) {
    const docs = documentRanges(lines);
    if (docs[document]) [from, to] = docs[document];
    else if (docs.length) return -1;
  }
  if (!field) return -1;
  return locateIn(lines, from, to, parsePath(field));
}
