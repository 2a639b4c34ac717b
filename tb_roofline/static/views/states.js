// Loading indicator, empty state, in-place errors and the backend's diagnostics.
import {h, setChildren} from './dom.js';

// The run's reading progress: first asked after PROGRESS_FIRST_MS of waiting, then every
// PROGRESS_EVERY_MS while requests are pending.
const PROGRESS_FIRST_MS = 600;
const PROGRESS_EVERY_MS = 1000;

/**
 * A thin bar with a spinner shown while requests are slow (> 250 ms), with "reading k of N
 * hosts" while the server reads the run's profiles (`watchProgress`).
 */
export class LoadingIndicator {
  constructor(el) {
    this.el = el;
    this.pending = new Map();
    this.timer = null;
    this.nextId = 0;
    el.classList.add('loading-bar');
    el.hidden = true;
    el.setAttribute('role', 'status');
    el.setAttribute('aria-live', 'polite');
  }

  /** Tracks a promise; returns it. */
  track(promise, label) {
    const id = this.nextId++;
    this.pending.set(id, label);
    this._update();
    const done = () => {
      this.pending.delete(id);
      this._update();
    };
    promise.then(done, done);
    return promise;
  }

  /**
   * While requests are pending, ask `ask()` (the run's `/progress`) now and then and show how
   * many of the run's hosts the server has read. A failed ask shows nothing (a server without
   * the route: the spinner alone, as before).
   */
  watchProgress(ask) {
    this.ask = ask;
    this.progressText = '';
    clearTimeout(this.pollTimer);
    this.pollTimer = setTimeout(() => this._poll(ask), PROGRESS_FIRST_MS);
  }

  async _poll(ask) {
    this.pollTimer = null;
    if (ask !== this.ask || !this.pending.size) return;
    let answer = null;
    try {
      answer = await ask();
    } catch (e) {
      answer = null;
    }
    if (ask !== this.ask || !this.pending.size) return;
    this.progress = answer && answer.reading && answer.hosts_total ? answer : null;
    // A server whose Dask cluster is down reads the hosts itself (slower): say so.
    const here = answer && answer.cluster && answer.cluster.converting_here ?
      ' on this server (its Dask cluster is unavailable)' : '';
    this.progressText = this.progress ? `reading ${answer.hosts_done} of ` +
      `${answer.hosts_total} host${answer.hosts_total === 1 ? '' : 's'}${here}` +
      ` (${Math.round(answer.elapsed_s || 0)} s)` : '';
    this._update();
    this.pollTimer = setTimeout(() => this._poll(ask), PROGRESS_EVERY_MS);
  }

  /** A note shown while loading (e.g. "profile still being written, retrying"). */
  note(text) {
    this.noteText = text;
    this._update();
  }

  _update() {
    if (!this.pending.size) {
      clearTimeout(this.timer);
      clearTimeout(this.pollTimer);
      this.timer = this.pollTimer = this.ask = this.progress = null;
      this.noteText = this.progressText = '';
      this.el.hidden = true;
      setChildren(this.el);  // a hidden bar holds no stale "reading k of N" for anyone to read
      this.el.dataset.busy = '0';
      return;
    }
    this.el.dataset.busy = '1';
    const labels = [...new Set(this.pending.values())].join(', ');
    setChildren(this.el, h('span', {class: 'spinner', 'aria-hidden': 'true'}),
        h('span', {}, `Loading ${labels}… large profiles take a while to convert the first time.`),
        this.progressText ? h('span', {class: 'loading-note', id: 'loading-progress', dataset: {
          hostsDone: String(this.progress.hosts_done),
          hostsTotal: String(this.progress.hosts_total)}}, ` Server: ${this.progressText}.`) :
          null,
        this.noteText ? h('span', {class: 'loading-note'}, ` ${this.noteText}`) : null);
    if (!this.timer && this.el.hidden) {
      this.timer = setTimeout(() => {
        this.timer = null;
        if (this.pending.size) this.el.hidden = false;
      }, 250);
    }
  }
}

/** "No profiles in this logdir": how to capture one. */
export function emptyState(logdir) {
  return h('div', {class: 'empty-state', id: 'empty-state'},
      h('h2', {}, 'No profiles in this logdir'),
      h('p', {}, 'The Roofline tab reads profiling sessions written under ',
          h('code', {}, '<logdir>/<run>/plugins/profile/<session>/<host>.xplane.pb'),
          ' (JAX, TensorFlow, PyTorch/XLA) and PyTorch profiler traces (',
          h('code', {}, '*.pt.trace.json[.gz]'), ')',
          logdir ? [' — logdir: ', h('code', {}, logdir)] : null, '. Here is how to capture one:'),
      h('ul', {},
          h('li', {}, 'JAX: ', h('code', {}, 'jax.profiler.start_trace(logdir)'), ' … ',
              h('code', {}, 'jax.profiler.stop_trace()'), ' or ',
              h('code', {}, 'with jax.profiler.trace(logdir): …')),
          h('li', {}, 'TensorFlow: ', h('code', {}, 'tf.profiler.experimental.start(logdir)'),
              ' … ', h('code', {}, 'tf.profiler.experimental.stop()')),
          h('li', {}, 'PyTorch/XLA: ', h('code', {}, 'xp.start_server(9012)'), ' then ',
              h('code', {}, 'xp.trace("localhost:9012", logdir, duration_ms=…)')),
          h('li', {}, 'PyTorch: ', h('code', {}, 'torch.profiler.profile(record_shapes=True, ' +
              'on_trace_ready=torch.profiler.tensorboard_trace_handler(logdir))'),
              ' and ', h('code', {}, 'prof.step()'), ' every step'),
          h('li', {}, 'A running job: ', h('code', {}, 'tensorboard --logdir LOGDIR'),
              ' → Profile tab → “Capture profile”.')),
      h('p', {}, 'New sessions appear here when you press TensorBoard\'s reload button.'));
}

/** An error answered by the API, shown in place of the panel that needed the data. */
export function errorBox(error, what) {
  const code = error && error.code ? error.code : 'error';
  const hints = {
    bad_profile: 'The profile file is truncated, corrupt or holds no usable data. Other runs are ' +
        'not affected; capture the profile again.',
    profile_incomplete: 'The profile is still being written. Press reload in a few seconds.',
    too_large: 'The profile is larger than the configured limit (TB_ROOFLINE_MAX_FILE_MB).',
    not_found: 'The run or host is not in the logdir any more.',
    internal: 'This is a bug in tb-roofline; other runs keep working.',
    network: 'TensorBoard did not answer.',
  };
  return h('div', {class: 'error-box', role: 'alert', dataset: {code}},
      h('strong', {}, `Cannot show ${what}`),
      h('span', {class: 'error-code'}, ` (${error && error.status ? error.status + ' ' : ''}${code})`),
      h('div', {class: 'error-message'}, error && error.message ? error.message : String(error)),
      hints[code] ? h('div', {class: 'error-hint'}, hints[code]) : null);
}

const SEVERITY_ICON = {error: '⛔', warning: '⚠️', info: 'ℹ️'};

/** The backend's diagnostics for the selected run/host. */
export function diagnosticsList(diagnostics) {
  if (!diagnostics || !diagnostics.length) {
    return h('p', {class: 'muted'}, 'No diagnostics: the profile has everything the roofline needs.');
  }
  return h('ul', {class: 'diagnostics'}, diagnostics.map((d) =>
    h('li', {class: `diag diag-${d.severity}`, dataset: {code: d.code || '', severity: d.severity}},
        h('span', {class: 'diag-icon', 'aria-hidden': 'true'}, SEVERITY_ICON[d.severity] || '•'),
        h('span', {class: 'diag-severity'}, d.severity), ' ',
        h('code', {}, d.code || ''), ' ', h('span', {}, d.message || ''))));
}
