// Wiring: view state and URL, runs and data loading, the layout, and the events other views
// follow. The sections are objects (views/program_section.js, views/op_section.js, the
// infeed/outfeed switch in infeed_switch.js) that get the view context (`sectionContext`)
// explicitly; the compare view (views/compare.js) follows the app through its events
// (`app.events`: `runs`, `loaded`, `theme`). Data access lives in api.js, TensorBoard
// integration in tbhost.js, charts in charts.js, exports in exports.js.
import {api, ApiError, tableToObjects} from './api.js';
import {onReload, onUrlChange, readUrlState, watchDarkMode, writeUrlState} from './tbhost.js';
import {loadVega} from './charts.js';
import {TOOLTIP_COLUMNS, TOOLTIP_KEYS, perUnit, withDeviceMemories} from './columns.js';
import {exportChart, exportTable} from './exports.js';
import {InfeedSwitch} from './infeed_switch.js';
import {h, setChildren} from './views/dom.js';
import {renderDeviceSection} from './views/device.js';
import {OpSection, opKeyOf} from './views/op_section.js';
import {capOf} from './views/op_cap.js';
import {ProgramSection} from './views/program_section.js';
import {LoadingIndicator, emptyState, errorBox} from './views/states.js';
import {Tooltip} from './views/tooltip.js';
import {OpportunitiesPanel} from './views/opportunities.js';  // guidance
import {attachCompare} from './views/compare.js';  // "Compare with"
import {CommChartSection} from './comm_chart.js';  // the communication roofline

const now = () => performance.now();

class App {
  constructor(root) {
    this.root = root;
    this.state = {run: '', host: '*', infeed: 'include', view: 'op', categories: [], boundBy: [],
      name: '', op: ''};
    this.runs = [];
    this.logdir = '';
    this.data = null;  // {device, diagnostics, program, ops, opColumns, programColumns, facets}
    this.dark = false;
    this.loadToken = 0;
    this.timings = {};
    this.status = 'starting';
    /** What other views follow: `runs` (the run list changed), `loaded` (a load or an
     * infeed/outfeed switch finished), `theme` (dark mode changed). */
    this.events = new EventTarget();
  }

  emit(name) {
    this.events.dispatchEvent(new Event(name));
  }

  /** What the sections get: the view state, the loaded data, theme, tooltip and helpers. */
  sectionContext() {
    const app = this;
    return {
      get state() { return app.state; },
      get data() { return app.data; },
      get dark() { return app.dark; },
      tooltip: this.tooltip,
      timings: this.timings,
      persist: () => this.persist(),
      bump: (name) => this.bump(name),
      subtitle: () => this.subtitle(),
      memoryIds: () => this.memoryIds(),
      setRows: (value) => this.setView(value),
      exportTable: (level, format, table) => exportTable(this.state, this.data, level, format,
          table),
      exportChart: (chart, what, format) => exportChart(this.state, chart, what, format),
    };
  }

  // ---------------------------------------------------------------- layout

  build() {
    const css = h('link', {rel: 'stylesheet', href: new URL('./style.css', import.meta.url).href});
    document.head.appendChild(css);
    this.cssLoaded = new Promise((resolve) => {
      css.onload = resolve;
      css.onerror = resolve;
    });
    this.runSelect = h('select', {id: 'run-select', 'aria-label': 'Run',
      onchange: () => this.selectRun(this.runSelect.value, {fromUser: true})});
    this.hostSelect = h('select', {id: 'host-select', 'aria-label': 'Host',
      onchange: () => this.selectHost(this.hostSelect.value)});
    this.infeedToggle = h('input', {type: 'checkbox', id: 'infeed-toggle', checked: true,
      onchange: () => this.setInfeed(this.infeedToggle.checked ? 'include' : 'exclude')});
    this.loadingEl = h('div', {id: 'loading'});
    this.loading = new LoadingIndicator(this.loadingEl);
    this.noticeEl = h('div', {id: 'notice', class: 'notice', hidden: true});
    this.runErrorEl = h('div', {id: 'run-error'});
    this.tooltip = new Tooltip();
    this.tooltip.keys = TOOLTIP_KEYS;  // compact: every metric is in the selection's details

    const ctx = this.sectionContext();
    this.program = new ProgramSection(ctx);
    this.ops = new OpSection(ctx);
    this.infeed = new InfeedSwitch(ctx, api, {program: this.program, ops: this.ops});
    // Guidance: a compact Opportunities summary beside the device; the throughput
    // line in the program section.
    this.opportunities = new OpportunitiesPanel({
      findRank: (op) => opKeyOf(this.data && this.data.ops, op),
      selectOp: (key) => this.ops.selectOp(key, {fromChart: true})});
    this.program.extraEl.appendChild(this.opportunities.throughputEl);

    this.devicePanelEl = h('div', {id: 'device-panel'});
    this.diagSummary = h('summary', {}, 'Diagnostics');
    this.diagnosticsEl = h('div', {id: 'diagnostics'});
    this.deviceSection = h('section', {id: 'device-section'},
        h('h2', {}, 'Device'), this.devicePanelEl,
        h('details', {id: 'diagnostics-section'}, this.diagSummary, this.diagnosticsEl));
    // XProf's order: device, program roofline + table, op roofline + table; the compare view
    // goes first when it is on.
    this.topEl = h('div', {class: 'top-row'}, this.deviceSection, this.opportunities.el);
    this.comm = new CommChartSection();
    // The diagnostics' warnings, where they are read before the numbers they qualify.
    this.bannerEl = h('div', {id: 'warnings-banner', class: 'warnings-banner', role: 'status',
      hidden: true});
    this.contentEl = h('div', {id: 'content'}, this.bannerEl, this.topEl, this.program.el,
        this.ops.el, this.comm.el);
    this.app = h('div', {id: 'roofline-app', class: 'app', dataset: {status: 'starting'}},
        h('header', {class: 'toolbar'},
            h('label', {}, 'Run ', this.runSelect),
            h('label', {}, 'Host ', this.hostSelect),
            this.infeedLabel = h('label', {class: 'check', title: 'Count infeed/outfeed ops: ' +
              'applies to both charts, the tables and the exports'}, this.infeedToggle,
            ' Include infeed/outfeed',
            this.infeedNote = h('span', {class: 'muted', id: 'infeed-note', hidden: true},
                ' (no infeed/outfeed ops)')),
            this.loadingEl),
        this.noticeEl, this.runErrorEl, this.contentEl);
    setChildren(this.root, this.app);
    document.body.appendChild(this.tooltip.el);  // after the root was filled
  }

  // The charts and tables under their old names (tests, benchmark).
  get programChart() { return this.program.chart; }
  get commChart() { return this.comm.chart; }
  get opChart() { return this.ops.chart; }
  get catChart() { return this.ops.catChart; }
  get opTable() { return this.ops.table; }
  get programTable() { return this.program.table; }
  get geometry() { return this.ops.geometryNow; }
  get programGeometry() { return this.program.geometryNow; }
  get filtered() { return this.ops.filtered; }
  get categories() { return this.ops.categories; }
  get bounds() { return this.ops.bounds; }
  setFilter(patch) { return this.ops.setFilter(patch); }
  selectOp(key, opts) { return this.ops.selectOp(key, opts); }
  clearSelection() { return this.ops.clearSelection(); }

  setStatus(status) {
    this.status = status;
    this.app.dataset.status = status;
  }

  notice(text) {
    this.noticeEl.hidden = !text;
    setChildren(this.noticeEl, text || '');
  }

  /** Run, host and device: every chart says what it shows (also in PNG/SVG exports). */
  subtitle() {
    const d = this.data || {};
    const s = this.state;
    return [`run ${s.run}`, s.host === '*' ? 'all hosts' : `host ${s.host}`,
      d.device ? d.device.type : null, s.infeed === 'exclude' ? 'infeed/outfeed excluded' : null]
        .filter(Boolean).join(' · ');
  }

  // ---------------------------------------------------------------- state & URL

  persist() {
    const s = this.state;
    writeUrlState({run: s.run, host: s.host === '*' ? '' : s.host,
      infeed: s.infeed === 'exclude' ? 'exclude' : '', view: s.view === 'op' ? '' : s.view,
      category: s.categories.join(','),
      bound: s.boundBy.join(','), name: s.name, op: s.op || ''});
  }

  async restore() {
    const url = await readUrlState();
    const split = (v) => (v ? String(v).split(',').filter(Boolean) : []);
    // Mutated in place: the sections hold the same object.
    Object.assign(this.state, {run: url.run || '', host: url.host || '*',
      infeed: url.infeed === 'exclude' ? 'exclude' : 'include', view: url.view || 'op',
      categories: split(url.category), boundBy: split(url.bound), name: url.name || '',
      op: url.op || ''});
    this.infeedToggle.checked = this.state.infeed === 'include';
    this.ops.nameInput.value = this.state.name;
  }

  // ---------------------------------------------------------------- runs

  async loadRuns({keepView = false} = {}) {
    let answer;
    try {
      answer = await this.loading.track(api.runs(), 'runs');
    } catch (e) {
      this.setStatus('error');
      setChildren(this.runErrorEl, errorBox(e, 'the list of runs'));
      return;
    }
    this.runs = answer.runs || [];
    this.logdir = answer.logdir || '';
    clearTimeout(this.scanTimer);
    if (answer.scanning) {
      this.scanTimer = setTimeout(() => this.loadRuns({keepView: true}), 2000);
    }
    if (!this.runs.length) {
      if (answer.scanning) {
        this.setStatus('scanning');
        setChildren(this.runErrorEl, h('p', {class: 'muted', id: 'scanning'},
            'Scanning the logdir for profiles…'));
        return;
      }
      this.showEmpty();
      this.runsChanged();
      return;
    }
    this.contentEl.hidden = false;
    setChildren(this.runSelect, this.runs.map((r) =>
      h('option', {value: r.run}, r.run + (r.format && r.format !== 'xplane' ? ` (${r.format})` : ''))));
    const wanted = this.state.run;
    const known = this.runs.some((r) => r.run === wanted);
    if (wanted && !known) {
      this.notice(`Run “${wanted}” from the link is not in this logdir; showing the newest run.`);
    }
    const run = known ? wanted : this.runs[0].run;
    // On TensorBoard's reload (also its 30 s auto-reload) keep the view as it is (zoom,
    // selection) unless the selected run's files changed.
    const entry = this.runs.find((r) => r.run === run);
    const signature = JSON.stringify([entry.run, entry.mtime, entry.hosts]);
    const unchanged = keepView && this.data && run === this.state.run &&
        signature === this.runSignature && this.status !== 'error';
    this.runSignature = signature;
    if (unchanged) {
      this.runSelect.value = run;
    } else {
      await this.selectRun(run, {keepHost: true, reload: true});
    }
    this.runsChanged();
  }

  runsChanged() {
    this.bump('runsSeq');
    this.emit('runs');
  }

  /** Counters the tests wait on (`data-load-seq`, `data-runs-seq`, `data-filter-seq`). */
  bump(name) {
    this.app.dataset[name] = String((+this.app.dataset[name] || 0) + 1);
  }

  showEmpty() {
    this.setStatus('empty');
    setChildren(this.runSelect, h('option', {value: ''}, '(no runs)'));
    setChildren(this.hostSelect, h('option', {value: '*'}, 'All hosts'));
    this.contentEl.hidden = true;
    setChildren(this.runErrorEl, emptyState(this.logdir));
  }

  async selectRun(run, {keepHost = false, fromUser = false, reload = true} = {}) {
    if (fromUser) this.notice('');
    const changed = run !== this.state.run;
    this.state.run = run;
    this.runSelect.value = run;
    const entry = this.runs.find((r) => r.run === run) || {};
    let hosts = entry.hosts;
    if (!hosts) {
      try {
        hosts = (await api.hosts(run)).hosts || [];
      } catch (e) {
        hosts = [];
      }
    }
    setChildren(this.hostSelect, h('option', {value: '*'}, `All hosts (${hosts.length})`),
        hosts.map((x) => h('option', {value: x}, x)));
    if (!(keepHost && (this.state.host === '*' || hosts.includes(this.state.host)))) {
      if (this.state.host !== '*' && keepHost) {
        this.notice(`Host “${this.state.host}” is not in run “${run}”; showing all hosts.`);
      }
      this.state.host = '*';
    }
    this.hostSelect.value = this.state.host;
    if (changed && fromUser) {
      this.state.categories = [];
      this.state.boundBy = [];
      this.state.view = 'op';
    }
    this.persist();
    if (reload || changed) await this.loadView();
  }

  async selectHost(host) {
    this.state.host = host || '*';
    this.notice('');
    this.persist();
    await this.loadView();
  }

  /** The "Rows" choice: ops, ops × input shapes, GPU kernels (and with HW counters). */
  async setView(value) {
    this.state.view = value || 'op';
    this.state.categories = [];  // Kernel views have their own categories.
    this.state.boundBy = [];
    this.persist();
    await this.loadView({only: ['ops']});
  }

  async setInfeed(value) {
    this.state.infeed = value;
    this.persist();
    const t0 = now();
    if (await this.infeed.switchTo(value)) {
      this.opportunities.load(this.state);  // guidance
      this.comm.load(this.state);
      this.timings.lastInfeedMs = now() - t0;
      this.bump('filterSeq');
      this.loaded();
      return;
    }
    await this.loadView({only: ['program', 'ops']});
  }

  loaded() {
    this.bump('loadSeq');
    this.emit('loaded');
  }

  // ---------------------------------------------------------------- data

  async loadView({only = null} = {}) {
    const token = ++this.loadToken;
    try {
      await this._loadView(token, only);
      this.opportunities.load(this.state);  // guidance, in the background
      this.comm.load(this.state);
    } finally {
      if (token === this.loadToken) this.loaded();
    }
  }

  async _loadView(token, only) {
    const sel = {run: this.state.run, host: this.state.host, infeed: this.state.infeed,
      view: this.state.view};
    if (!sel.run) return;
    this.setStatus('loading');
    setChildren(this.runErrorEl);
    const onRetry = (err, attempt) => this.loading.note(
        `The profile is still being written; retrying (${attempt})…`);
    const want = only || ['device', 'diagnostics', 'program', 'ops'];
    const fetchers = {
      device: () => api.device(sel, {onRetry}),
      diagnostics: () => api.diagnostics(sel, {onRetry}),
      program: () => api.program(sel, {onRetry}),
      ops: () => api.ops(sel, {onRetry}),
    };
    const started = now();
    const pending = want.map((k) => this.loading.track(fetchers[k](), k === 'ops' ? 'ops' : k));
    this.loading.watchProgress(() => api.progress(sel.run));
    const results = await Promise.allSettled(pending);
    if (token !== this.loadToken) return;  // A newer selection superseded this one.
    this.timings.fetchMs = now() - started;
    const got = {};
    const errors = {};
    want.forEach((k, i) => {
      if (results[i].status === 'fulfilled') got[k] = results[i].value;
      else errors[k] = results[i].reason;
    });
    if (errors.ops && sel.view !== 'op' && errors.ops.code === 'invalid_argument') {
      // A view from a link that this run does not have: fall back to the op view.
      this.state.view = 'op';
      this.persist();
      return this._loadView(token, only);
    }
    this.data = this.merge(only && this.data ? this.data : {}, want, got, errors);
    const data = this.data;
    const errs = Object.values(data.errors);
    const allFailed = errs.length && ['device', 'diagnostics', 'program', 'ops']
        .every((k) => data.errors[k]);
    if (allFailed) {
      // The run as a whole cannot be read: one clear message in place of the views.
      this.contentEl.hidden = true;
      setChildren(this.runErrorEl, errorBox(data.errors.program || errs[0],
          `run “${sel.run}”${sel.host !== '*' ? ` (host ${sel.host})` : ''}`));
      this.setStatus('error');
      this.program.chart.dispose();
      this.ops.dispose();
      return;
    }
    this.contentEl.hidden = false;
    await this.renderAll();
    if (token !== this.loadToken) return;
    this.setStatus(errs.length ? 'partial' : 'ready');
    this.infeed.prefetch();
  }

  /** The loaded data: the previous answers with the new ones (`want`) merged in. */
  merge(prev, want, got, errors) {
    const data = {...prev, errors: {...(prev.errors || {}), ...errors}};
    for (const k of want) if (!errors[k]) delete data.errors[k];
    if (got.device) data.device = got.device.device;
    if (errors.device) data.device = null;
    if (got.diagnostics) data.diagnostics = got.diagnostics.diagnostics || [];
    if (errors.diagnostics) data.diagnostics = null;
    if (got.program) {
      data.program = tableToObjects(got.program);
      data.programColumns = got.program.columns;
      data.numSteps = got.program.num_steps;
      data.hasHw = got.program.has_hw_counters;
      data.servingSteps = got.program.serving_steps || [];
    } else if (errors.program) data.program = null;
    if (got.ops) {
      data.ops = tableToObjects(got.ops);
      data.opColumns = got.ops.columns;
      data.facets = got.ops.facets || {};
      data.views = got.ops.views || ['op'];
      // The "Rows" choices: ops, ops × shapes (where the run has shapes), the kernel views.
      const groupings = got.ops.row_groupings || ['op'];
      data.rowChoices = ['op', ...(groupings.includes('shapes') ? ['shapes'] : []),
        ...data.views.filter((v) => v !== 'op')];
      data.opsTotal = got.ops.total_count;
      data.opsCap = capOf(got.ops);  // cut at the server's size cap: the note, "Load more"
    } else if (errors.ops) data.ops = null;
    return data;
  }

  // ---------------------------------------------------------------- rendering

  memoryIds() {
    const d = this.data && this.data.device;
    return d && d.memories ? d.memories.filter((m) => m.peak_gbs > 0 || m.peak_gibs > 0)
        .map((m) => m.id) : ['hbm'];
  }

  renderDevice() {
    renderDeviceSection({panel: this.devicePanelEl, list: this.diagnosticsEl,
      summary: this.diagSummary, banner: this.bannerEl}, this.data);
  }

  async renderAll() {
    const d = this.data;
    this.renderDevice();
    await loadVega();
    this.tooltip.memoryIds = d.device ? this.memoryIds() : null;
    this.tooltip.device = d.device || null;
    this.tooltip.columns = perUnit(withDeviceMemories(TOOLTIP_COLUMNS,
        d.device && d.device.memories), d.device);
    // The op section first: it places the program's Total on its own axes from a copy.
    await Promise.all([this.program.render(), this.ops.render()]);
    // Always there (as in XProf); without such ops it changes nothing, and says so.
    const none = this.state.infeed === 'include' && !!d.ops &&
        !d.ops.some((r) => r.is_infeed_outfeed);
    this.infeedToggle.disabled = none;
    this.infeedNote.hidden = !none;
    this.infeedLabel.classList.toggle('disabled', none);
  }

  // ---------------------------------------------------------------- theme & reload

  async setDark(dark) {
    this.dark = dark;
    this.app.classList.toggle('dark', dark);
    document.documentElement.classList.toggle('dark', dark);
    if (this.data && (this.status === 'ready' || this.status === 'partial')) {
      await this.renderAll();
    }
    this.emit('theme');
  }

  /** The URL was changed from outside (a pasted link, back/forward): show what it says. */
  async followUrl() {
    const before = JSON.stringify(this.state);
    await this.restore();
    if (JSON.stringify(this.state) !== before) await this.loadRuns();
  }

  async reload() {
    await this.loadRuns({keepView: true});
  }
}

let app = null;

/** Builds the tab into `root` (TensorBoard calls render() once per iframe). */
export async function start(root) {
  app = new App(root);
  app.build();
  // "Compare with": its own toolbar controls and section, fed by the app's events.
  app.compare = attachCompare({
    events: app.events,
    get state() { return app.state; },
    get runs() { return app.runs; },
    get dark() { return app.dark; },
    loading: app.loading,
    toolbar: app.app.querySelector('header.toolbar'),
    toolbarBefore: app.loadingEl,
    root: app.app,
    content: app.contentEl,
  });
  window.__roofline = app;  // For the e2e tests and the benchmark.
  await app.cssLoaded;
  watchDarkMode((dark) => app.setDark(dark));
  onReload(() => app.reload());
  onUrlChange(() => app.followUrl());
  await app.restore();
  await app.loadRuns();
  return app;
}

export {ApiError};
