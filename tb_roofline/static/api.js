// Data access: the JSON API of docs/http_api.md. No DOM here.
//
// URLs are resolved against this module's own URL (…/data/plugin/roofline/static/api.js), so
// they follow TensorBoard's --path_prefix and work both inside TensorBoard's plugin iframe and
// when the frame is opened on its own.

const API_BASE = new URL('../', import.meta.url);

/** An error answered by the API (`{"error": {status, code, message}}`) or by the network. */
export class ApiError extends Error {
  constructor(status, code, message, route) {
    super(message);
    this.name = 'ApiError';
    this.status = status;
    this.code = code;
    this.route = route;
  }
}

export function apiUrl(route, params = {}) {
  const url = new URL(route, API_BASE);
  for (const [key, value] of Object.entries(params)) {
    if (value === undefined || value === null || value === '') continue;
    if (Array.isArray(value)) {
      for (const v of value) url.searchParams.append(key, v);
    } else {
      url.searchParams.set(key, value);
    }
  }
  return url;
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * GET a JSON route. Retries `503 profile_incomplete` (the profile is still being written)
 * a few times, calling `onRetry(error, attempt)` so the view can say so.
 */
export async function getJson(route, params = {}, {signal, onRetry, retries = 5} = {}) {
  const url = apiUrl(route, params);
  for (let attempt = 0; ; attempt++) {
    let response;
    try {
      response = await fetch(url, {signal, headers: {Accept: 'application/json'}});
    } catch (e) {
      if (e.name === 'AbortError') throw e;
      throw new ApiError(0, 'network', `cannot reach TensorBoard: ${e.message}`, route);
    }
    let body = null;
    const text = await response.text();
    try {
      body = text ? JSON.parse(text) : null;
    } catch (e) {
      body = null;
    }
    if (response.ok && body && !body.error) return body;
    const err = body && body.error ? body.error : {};
    const error = new ApiError(
      err.status || response.status,
      err.code || (response.status === 404 ? 'not_found' : 'http_error'),
      err.message || `${response.status} ${response.statusText} from ${route}` +
        (text && !body ? `: ${text.slice(0, 200)}` : ''),
      route);
    if (error.status === 503 && attempt < retries) {
      if (onRetry) onRetry(error, attempt + 1);
      await sleep(Math.min(8000, 1000 * 2 ** attempt));
      continue;
    }
    throw error;
  }
}

/** `{columns, rows}` (rows as arrays) → array of objects keyed by column name. */
export function tableToObjects(table) {
  const columns = table.columns || [];
  const rows = table.rows || [];
  const out = new Array(rows.length);
  for (let i = 0; i < rows.length; i++) {
    const row = rows[i];
    if (!Array.isArray(row)) {  // Tolerate a backend answering objects already.
      out[i] = {...row};
      continue;
    }
    const obj = {};
    for (let j = 0; j < columns.length; j++) obj[columns[j]] = row[j];
    out[i] = obj;
  }
  return out;
}

const commonParams = ({run, host}) => ({run, host: host && host !== '*' ? host : '*'});

export const api = {
  runs: (opts) => getJson('runs', {}, opts),
  hosts: (run, opts) => getJson('hosts', {run}, opts),
  // Whether the run's hosts are being read, k of N (cheap: asked while the others wait).
  progress: (run) => getJson('progress', {run}, {retries: 0}),
  device: (sel, opts) => getJson('device', commonParams(sel), opts),
  program: (sel, opts) => getJson('program',
      {...commonParams(sel), infeed_outfeed: sel.infeed || 'include'}, opts),
  // `view`: the "Rows" choice: op (default), shapes (`rows=shapes`: op × input shapes), or an
  // op view of the API (kernel, kernel_hw).
  ops: (sel, opts) => getJson('ops', {...commonParams(sel), infeed_outfeed: sel.infeed || 'include',
    view: sel.view && !['op', 'shapes'].includes(sel.view) ? sel.view : undefined,
    rows: sel.view === 'shapes' ? 'shapes' : undefined, offset: sel.offset || undefined}, opts),
  diagnostics: (sel, opts) => getJson('diagnostics', commonParams(sel), opts),
  exportUrl: (sel, level, format, filters = {}) => apiUrl('export', {
    ...commonParams(sel), infeed_outfeed: sel.infeed || 'include', level, format, ...filters,
  }),
};
