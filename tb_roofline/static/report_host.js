// Host of the one-file HTML report (`tb-roofline html`, serve/html_report.py): a classic script
// inlined into the report. Nothing here renders; it makes the unchanged tab run from file://
// with the network off:
//  - the tab's ES modules are inlined as text (#roofline-modules); each becomes a blob: module
//    whose relative imports were turned into `__ROOFLINE_MODULE__(path)` tokens by the
//    report writer, replaced here by the blob URLs of the modules they name (dependencies
//    first: the writer gives the order). Stylesheets and the vendored Vega builds alike.
//  - every module's `import.meta.url` reads `roofline-report:/<path>`, so api.js's API base is
//    `roofline-report:/`; fetch() of such a URL answers from the embedded API answers
//    (#roofline-data, keyed by route and sorted query), any other fetch fails (no network).
(() => {
  const SCHEME = 'roofline-report:';
  const read = (id) => JSON.parse(document.getElementById(id).textContent);
  const bundle = read('roofline-modules');  // {order: [path], files: {path: [type, text]}}
  const data = read('roofline-data');  // {answers: {key: [status, body]}, missing: text}

  function keyOf(url) {
    const route = url.pathname.replace(/^\/+/, '');
    const params = [...url.searchParams].filter(([, v]) => v !== '')
        .sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : a[1] < b[1] ? -1 : a[1] > b[1]));
    return params.length ? `${route}?${params.map(([k, v]) => `${k}=${v}`).join('&')}` : route;
  }

  const realFetch = window.fetch.bind(window);
  window.fetch = async (input, init) => {
    const text = typeof input === 'string' ? input : input instanceof URL ? input.href : input.url;
    if (!String(text).startsWith(SCHEME)) {
      if (/^(blob|data):/.test(String(text))) return realFetch(input, init);
      throw new TypeError(`an offline report makes no network request (${text})`);
    }
    const key = keyOf(new URL(text));
    const hit = data.answers[key];
    const [status, body] = hit || [404, JSON.stringify({error: {status: 404, code: 'not_found',
      message: `${data.missing} (${key})`}})];
    return new Response(body, {status, headers: {'Content-Type': 'application/json'}});
  };

  // The view the report was written for (run, host, compare), unless a link says otherwise.
  // (An absolute URL: in a notebook's srcdoc frame a bare `#...` would resolve against the
  // notebook's URL.)
  if (!window.location.hash && data.hash) {
    const url = new URL(window.location.href);
    url.hash = data.hash;
    window.history.replaceState(window.history.state, '', url.toString());
  }

  const urls = {};
  for (const path of bundle.order) {
    const [type, text] = bundle.files[path];
    const source = text.replace(/__ROOFLINE_MODULE__\(([^)]+)\)/g, (_, dep) => urls[dep]);
    urls[path] = URL.createObjectURL(new Blob([source], {type}));
  }
  window.__rooflineReport = {data, ready: import(urls[bundle.entry]).then(
      (mod) => mod.start(document.getElementById('roofline-root')))};
})();
