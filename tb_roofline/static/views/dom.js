// Tiny DOM helpers shared by the views.

/** h('div', {class: 'x', onclick: fn, dataset: {k: v}}, child, 'text', [more]) */
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key === 'class') el.className = value;
    else if (key === 'dataset') Object.assign(el.dataset, value);
    else if (key === 'style' && typeof value === 'object') Object.assign(el.style, value);
    else if (key.startsWith('on') && typeof value === 'function') {
      el.addEventListener(key.slice(2), value);
    } else if (key in el && typeof value !== 'string') el[key] = value;
    else el.setAttribute(key, value === true ? '' : value);
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue;
    if (Array.isArray(child)) append(el, child);
    else if (child instanceof Node) el.appendChild(child);
    else el.appendChild(document.createTextNode(String(child)));
  }
}

export function clear(el) {
  while (el.firstChild) el.removeChild(el.firstChild);
  return el;
}

/** Replaces the children of `el`. */
export function setChildren(el, ...children) {
  clear(el);
  append(el, children);
  return el;
}

/** Starts a download of `url` (data:, blob: or same-origin) under `filename`. */
export function download(url, filename) {
  const a = h('a', {href: url, download: filename, style: {display: 'none'}});
  document.body.appendChild(a);
  a.click();
  a.remove();
}

export function downloadText(text, filename, type) {
  const url = URL.createObjectURL(new Blob([text], {type}));
  download(url, filename);
  setTimeout(() => URL.revokeObjectURL(url), 10000);
}

/** A file-name-safe version of a run/host name. */
export function slug(text) {
  return String(text || 'all').replace(/[^A-Za-z0-9._-]+/g, '_').replace(/^_+|_+$/g, '') || 'all';
}

/** "Export: CSV JSON PNG SVG" buttons: `items` = [[label, fn]]; ids `<prefix>-export-<label>`. */
export function exportButtons(prefix, items) {
  return h('div', {class: 'export-buttons'}, h('span', {class: 'muted'}, 'Export:'),
      items.map(([label, fn]) => h('button', {type: 'button',
        id: `${prefix}-export-${label.toLowerCase().replace(/[^a-z]+/g, '-')}`,
        onclick: () => fn()}, label)));
}
