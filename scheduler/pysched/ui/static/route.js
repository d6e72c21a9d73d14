// Deep links: the page's place as a URL fragment, and back.
//
//   #/run/3                     run #3 (as this pysched ui process keeps it)
//   #/run/3/pod/shop/web-0      run #3, with pod shop/web-0's explanation open
//   #/run/3/node/m5-a-2         run #3, with node m5-a-2 open
//   #/pod/shop/web-0            the latest run, with that pod open (likewise #/node/NAME)
//   ...?ui=1a2b3c4d             the pysched ui session the run number belongs to: run numbers start
//                               at 1 in every session, so a link from another one says so
//
// Segments are percent-encoded; pairs may come in any order. The fragment never reaches the
// server, so a link carries no token: it opens in a browser that holds this session's cookie
// (or after the address pysched ui printed: /?token=...#/run/3 keeps the fragment).

const KEYS = ['run', 'node', 'pod'];

/** {run, node, pod, session, problems}: what `hash` names (nulls when it names nothing). */
export function parseRoute(hash) {
  const out = { run: null, node: null, pod: null, session: null, problems: [] };
  let text = String(hash || '').replace(/^#/, '');
  const q = text.indexOf('?');
  if (q >= 0) {
    for (const part of text.slice(q + 1).split('&')) {
      const [k, v = ''] = part.split('=');
      if (k === 'ui' && v) out.session = decode(v);
    }
    text = text.slice(0, q);
  }
  const segs = text.split('/').filter((s) => s !== '').map(decode);
  for (let i = 0; i < segs.length;) {
    const key = segs[i];
    if (key === 'run' && i + 1 < segs.length) {
      if (/^[1-9][0-9]*$/.test(segs[i + 1])) out.run = segs[i + 1];
      else out.problems.push(`"${segs[i + 1]}" is not a run number (links name runs as #/run/3)`);
      i += 2;
    } else if (key === 'node' && i + 1 < segs.length) {
      out.node = segs[i + 1];
      i += 2;
    } else if (key === 'pod' && i + 2 < segs.length) {
      out.pod = `${segs[i + 1]}/${segs[i + 2]}`;
      i += 3;
    } else {
      out.problems.push(`This link's "#/${segs.slice(i).join('/')}" is not a place in the UI `
        + '(links look like #/run/3, #/run/3/pod/NAMESPACE/NAME, #/run/3/node/NAME)');
      break;
    }
  }
  return out;
}

function decode(s) {
  try { return decodeURIComponent(s); } catch { return s; }
}

const enc = (s) => encodeURIComponent(s);

/** The fragment for {run, node, pod, session}; '' for none of them. */
export function formatRoute({ run = null, node = null, pod = null, session = null } = {}) {
  const parts = [];
  if (run !== null && run !== undefined) parts.push('run', enc(run));
  if (node) parts.push('node', enc(node));
  if (pod) {
    const i = pod.indexOf('/');
    parts.push('pod', enc(pod.slice(0, i)), enc(pod.slice(i + 1)));
  }
  if (!parts.length) return '';
  return `#/${parts.join('/')}${session && run !== null && run !== undefined ? `?ui=${enc(session)}` : ''}`;
}

/** Whether two routes name the same place (the session aside). */
export function sameRoute(a, b) {
  return KEYS.every((k) => String(a[k] ?? '') === String(b[k] ?? ''));
}
