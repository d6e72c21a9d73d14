// The JSON API (see the contract): fetch with the session cookie, and the page's busy flag
// (body[data-busy="1"] while any request or user action is in flight).

let inflight = 0;

function setBusy(delta) {
  inflight = Math.max(0, inflight + delta);
  if (inflight > 0) document.body.dataset.busy = '1';
  else delete document.body.dataset.busy;
}

/** Hold the busy flag over a whole action (its requests and the rendering after them). */
export async function busy(fn) {
  setBusy(1);
  try {
    return await fn();
  } finally {
    setBusy(-1);
  }
}

export class ApiError extends Error {
  constructor(status, body, message) {
    super(message);
    this.name = 'ApiError';
    this.status = status;
    this.body = body;
    this.errors = body && Array.isArray(body.errors) ? body.errors : null;
  }
}

export async function api(method, path, body) {
  setBusy(1);
  try {
    const init = { method, credentials: 'same-origin', headers: { Accept: 'application/json' } };
    if (body !== undefined) {
      init.headers['Content-Type'] = 'application/json';
      init.body = JSON.stringify(body);
    }
    let resp;
    try {
      resp = await fetch(path, init);
    } catch (exc) {
      throw new ApiError(0, null, `${method} ${path}: network error (${exc.message}); is pysched ui still running?`);
    }
    const text = await resp.text();
    let data = null;
    if (text) {
      try { data = JSON.parse(text); } catch { data = null; }
    }
    if (!resp.ok) {
      let msg = `${method} ${path}: HTTP ${resp.status}`;
      if (resp.status === 401) msg += ': not authenticated (open the URL pysched ui printed, with its ?token=)';
      else if (data && Array.isArray(data.errors)) {
        msg += `: ${data.errors.map((e) => (e.field ? `${e.field}: ` : '') + e.message).join('; ')}`;
      } else if (data && (data.error || data.message)) msg += `: ${data.error || data.message}`;
      else if (text) msg += `: ${text.slice(0, 300)}`;
      throw new ApiError(resp.status, data, msg);
    }
    return data;
  } finally {
    setBusy(-1);
  }
}

export const get = (path) => api('GET', path);
export const post = (path, body = {}) => api('POST', path, body);
export const put = (path, body = {}) => api('PUT', path, body);
// DELETE carries an empty JSON body too: the server may require Content-Type on every state change.
export const del = (path) => api('DELETE', path, {});

/** Path segment escaping for /api/nodes/{name} and /api/pods/{ns}/{name}. */
export const seg = (s) => encodeURIComponent(s);
