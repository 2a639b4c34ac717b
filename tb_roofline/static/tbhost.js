// Integration with the TensorBoard page that hosts our iframe: the plugin IPC channel
// (reload button), view state kept in the URL, and dark mode. No rendering here.
//
// TensorBoard (2.x, tensorboard/components/experimental/plugin_util) listens on the parent
// window for a 'experimental.bootstrap' message carrying a MessagePort; messages on that port
// are JSON strings {type, id, payload, error, isReply}. It broadcasts
// 'experimental.DataReloaded' when the user presses the reload button and answers
// 'experimental.GetURLPluginData' with the `p.<plugin>.<key>` entries of its URL hash.
// The iframe is same-origin, so when the parent is reachable we also read/write those hash
// entries directly through window.tensorboard.tf_storage (TensorBoard's own URL storage);
// opened on its own (no parent), the frame keeps the state in its own URL hash.

const PLUGIN = 'roofline';
const PREFIX = `p.${PLUGIN}.`;

function parentWindow() {
  try {
    if (window.parent && window.parent !== window) {
      void window.parent.document;  // Throws when cross-origin.
      return window.parent;
    }
  } catch (e) {
    // Cross-origin parent: IPC only.
  }
  return null;
}

class HostIpc {
  constructor() {
    this.listeners = new Map();
    this.waits = new Map();
    this.nextId = 0;
    this.port = null;
    if (window.parent === window) return;
    const channel = new MessageChannel();
    this.port = channel.port1;
    this.port.addEventListener('message', (event) => this._onMessage(event));
    this.port.start();
    window.parent.postMessage('experimental.bootstrap', '*', [channel.port2]);
  }

  listen(type, callback) {
    this.listeners.set(type, callback);
  }

  send(type, payload, timeoutMs = 1500) {
    if (!this.port) return Promise.reject(new Error('no TensorBoard host'));
    const id = this.nextId++;
    this.port.postMessage(JSON.stringify({type, id, payload, error: null, isReply: false}));
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.waits.delete(id);
        reject(new Error(`${type}: no answer from TensorBoard`));
      }, timeoutMs);
      this.waits.set(id, {resolve, reject, timer});
    });
  }

  async _onMessage(event) {
    let message;
    try {
      message = JSON.parse(event.data);
    } catch (e) {
      return;
    }
    const {type, id, payload, error, isReply} = message;
    if (isReply) {
      const wait = this.waits.get(id);
      if (!wait) return;
      this.waits.delete(id);
      clearTimeout(wait.timer);
      if (error) wait.reject(new Error(error));
      else wait.resolve(payload);
      return;
    }
    let result = null;
    let err = null;
    const listener = this.listeners.get(type);
    if (listener) {
      try {
        result = await listener(payload);
      } catch (e) {
        err = String(e);
      }
    }
    this.port.postMessage(JSON.stringify({type, id, payload: result ?? null, error: err,
                                          isReply: true}));
  }
}

let ipc = null;
function getIpc() {
  if (!ipc) ipc = new HostIpc();
  return ipc;
}

/** Calls `callback` when the user presses TensorBoard's reload button (or auto-reload fires). */
export function onReload(callback) {
  getIpc().listen('experimental.DataReloaded', () => {
    callback();
    return null;
  });
}

/** The `key=value` pairs of a location hash, in order (malformed escapes kept as written). */
function hashPairs(hash) {
  const decode = (text) => {
    try {
      return decodeURIComponent(text);
    } catch (e) {
      return text;
    }
  };
  const pairs = [];
  for (const part of hash.replace(/^#/, '').split('&')) {
    const eq = part.indexOf('=');
    if (eq > 0) pairs.push([decode(part.slice(0, eq)), decode(part.slice(eq + 1))]);
  }
  return pairs;
}

function ownHashDict() {
  return Object.fromEntries(hashPairs(window.location.hash));
}

/** The view state (`{run, host, ...}`) from the URL; never throws (a bad hash reads as is). */
export async function readUrlState() {
  const parent = parentWindow();
  const storage = parent && parent.tensorboard && parent.tensorboard.tf_storage;
  if (storage && storage.getUrlHashDict) {
    const out = {};
    // tf_storage's cached dict is refreshed on hashchange; parse the live hash to be safe.
    for (const [key, value] of hashPairs(parent.location.hash)) {
      if (key.startsWith(PREFIX)) out[key.slice(PREFIX.length)] = value;
    }
    return out;
  }
  if (window.parent !== window) {
    try {
      return (await getIpc().send('experimental.GetURLPluginData', {pluginName: PLUGIN})) || {};
    } catch (e) {
      // Fall through to our own hash.
    }
  }
  return ownHashDict();
}

/**
 * Writes the view state to the URL (TensorBoard's hash when hosted, else our own), replacing
 * the history entry. Empty values are removed.
 */
export function writeUrlState(state) {
  const parent = parentWindow();
  if (parent && parent.tensorboard && parent.tensorboard.tf_storage) {
    // The same hash format as TensorBoard's tf_storage (`<tab>&key=value&…`), written with one
    // replaceState (tf_storage.setString would write once per key).
    const parts = parent.location.hash.replace(/^#/, '').split('&').filter(Boolean);
    const tab = parts.length && !parts[0].includes('=') ? parts.shift() : '';
    const dict = new Map(hashPairs(parts.join('&')));
    for (const [key, value] of Object.entries(state)) {
      if (value === undefined || value === null || value === '') dict.delete(PREFIX + key);
      else dict.set(PREFIX + key, String(value));
    }
    const rest = [...dict].map(([k, v]) => `${encodeURIComponent(k)}=${encodeURIComponent(v)}`);
    const hash = [tab, ...rest].filter(Boolean).join('&');
    if (hash !== parent.location.hash.replace(/^#/, '')) {
      const url = new URL(parent.location.href);
      url.hash = hash;
      parent.history.replaceState(parent.history.state, '', url.toString());
    }
    return;
  }
  const dict = ownHashDict();
  for (const [key, value] of Object.entries(state)) {
    if (value === undefined || value === null || value === '') delete dict[key];
    else dict[key] = String(value);
  }
  const hash = Object.entries(dict)
      .map(([k, v]) => `${encodeURIComponent(k)}=${encodeURIComponent(v)}`).join('&');
  if (hash === window.location.hash.replace(/^#/, '')) return;
  const url = new URL(window.location.href);
  url.hash = hash;
  window.history.replaceState(window.history.state, '', url.toString());
}

/** Calls `callback()` when the URL hash is changed by the user (links, back/forward). */
export function onUrlChange(callback) {
  const target = parentWindow() || window;
  target.addEventListener('hashchange', () => callback());
}

/**
 * Follows TensorBoard's dark mode (the `dark-mode` class on the parent's body); without a
 * readable parent, follows the browser's prefers-color-scheme. Calls `callback(isDark)` now and
 * on every change.
 */
export function watchDarkMode(callback) {
  const parent = parentWindow();
  if (parent && parent.document && parent.document.body) {
    const body = parent.document.body;
    let last = null;
    const check = () => {
      const dark = body.classList.contains('dark-mode');
      if (dark !== last) {
        last = dark;
        callback(dark);
      }
    };
    check();
    new MutationObserver(check).observe(body, {attributes: true, attributeFilter: ['class']});
    return;
  }
  const query = window.matchMedia ? window.matchMedia('(prefers-color-scheme: dark)') : null;
  const forced = ownHashDict().dark;
  if (forced === '1' || forced === '0') {
    callback(forced === '1');
    return;
  }
  callback(Boolean(query && query.matches));
  if (query) query.addEventListener('change', (e) => callback(e.matches));
}
