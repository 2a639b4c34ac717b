// Host of the one-file HTML report (`tb-roofline html`, serve/web/html_report.py): a classic script
// inlined into the report. Nothing here renders; it makes the unchanged tab run from file://
// with the network off:
//  - the tab's ES modules are inlined (#roofline-modules); each becomes a blob: module whose
//    relative imports were turned into `__ROOFLINE_MODULE__(path)` tokens by the report
//    writer, replaced here by the blob URLs of the modules they name (dependencies first: the
//    writer gives the order). Stylesheets and the vendored Vega builds alike.
//  - every module's `import.meta.url` reads `roofline-report:/<path>`, so api.js's API base is
//    `roofline-report:/`; fetch() of such a URL answers from the embedded API answers
//    (#roofline-data, keyed by route and sorted query), any other fetch fails (no network).
// Both blocks are JSON, gzipped and base64-encoded (a third of the size of the plain JSON),
// inflated with the browser's DecompressionStream.
(() => {
  const SCHEME = 'roofline-report:';

  async function unpack(id) {
    const binary = atob(document.getElementById(id).textContent.trim());
    const bytes = new Uint8Array(binary.length);
    for (let i = 0; i < binary.length; i++) bytes[i] = binary.charCodeAt(i);
    const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream('gzip'));
    return JSON.parse(await new Response(stream).text());
  }

  const cmp = (a, b) => (a < b ? -1 : a > b ? 1 : 0);
  function keyOf(url) {
    const route = url.pathname.replace(/^\/+/, '');
    const params = [...url.searchParams].filter(([, v]) => v !== '')
        .sort((a, b) => cmp(a[0], b[0]) || cmp(a[1], b[1]));
    return params.length ? `${route}?${params.map(([k, v]) => `${k}=${v}`).join('&')}` : route;
  }

  // {answers: {key: [status, answer]}, missing: text, hash: the view it was written for}
  const dataReady = unpack('roofline-data');
  const realFetch = window.fetch.bind(window);
  window.fetch = async (input, init) => {
    const url = String(typeof input === 'string' ? input :
      input instanceof URL ? input.href : input.url);
    if (!url.startsWith(SCHEME)) {
      if (/^(blob|data):/.test(url)) return realFetch(input, init);
      throw new TypeError(`an offline report makes no network request (${url})`);
    }
    const data = await dataReady;
    const key = keyOf(new URL(url));
    const [status, answer] = data.answers[key] || [404, {error: {status: 404,
      code: 'not_found', message: `${data.missing} (${key})`}}];
    // Answers are embedded as JSON values (the report's data is encoded once, as a whole).
    return new Response(JSON.stringify(answer), {status, headers: {'Content-Type': 'application/json'}});
  };

  async function start() {
    const data = await dataReady;
    // The view the report was written for (run, host, compare), unless a link says otherwise
    // (an absolute URL: in a notebook's srcdoc frame a bare `#...` would resolve against the
    // notebook's URL).
    if (!window.location.hash && data.hash) {
      const url = new URL(window.location.href);
      url.hash = data.hash;
      window.history.replaceState(window.history.state, '', url.toString());
    }
    const bundle = await unpack('roofline-modules');  // {entry, order, files: {path: [type, text]}}
    const urls = {};
    for (const path of bundle.order) {
      const [type, text] = bundle.files[path];
      const source = text.replace(/__ROOFLINE_MODULE__\(([^)]+)\)/g, (_, dep) => urls[dep]);
      urls[path] = URL.createObjectURL(new Blob([source], {type}));
    }
    const mod = await import(urls[bundle.entry]);
    return mod.start(document.getElementById('roofline-root'));
  }

  window.__rooflineReport = {ready: start()};
})();
