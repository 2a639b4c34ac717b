// Wiring: view state, URL, runs and data loading, the layout, and the reactions that span
// sections. Data access lives in api.js, TensorBoard integration in tbhost.js, the sections in
// views/program_section.js and views/op_section.js (methods of App), the infeed/outfeed switch
// in infeed_switch.js, exports in exports.js, charts in charts.js.
import {api, ApiError, tableToObjects} from './api.js';
import {onReload, onUrlChange, readUrlState, watchDarkMode, writeUrlState} from './tbhost.js';
import {Chart, loadVega, roofGeometry} from './charts.js';
import {OP_COLUMNS, PROGRAM_COLUMNS, TOOLTIP_COLUMNS, TOOLTIP_KEYS, withDeviceMemories}
  from './columns.js';
import {Exports} from './exports.js';
import {InfeedSwitch} from './infeed_switch.js';
import {h, setChildren} from './views/dom.js';
import {devicePanel} from './views/device.js';
import {OpSection, opKey, opKeyOf} from './views/op_section.js';
import {ProgramSection} from './views/program_section.js';
import {LoadingIndicator, diagnosticsList, emptyState, errorBox} from './views/states.js';
import {DataTable} from './views/table.js';
import {Tooltip} from './views/tooltip.js';
import {OpportunitiesPanel} from './views/opportunities.js';  // guidance (issue #10)
import {attachCompare} from './views/compare.js';  // "Compare with" (issue #9)

const now = () => performance.now();

class App {
  constructor(root) {
    this.root = root;
    this.state = {run: '', host: '*', infeed: 'include', view: 'op', categories: [], boundBy: [],
      name: '', op: ''};
    this.runs = [];
    this.logdir = '';
    this.data = null;  // {device, diagnostics, program, ops, opColumns, programColumns, facets}
    this.filtered = [];
    this.dark = false;
    this.loadToken = 0;
    this.timings = {};
    this.status = 'starting';
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
    this.viewSelect = h('select', {id: 'view-select', 'aria-label': 'Op table view',
      onchange: () => this.setView(this.viewSelect.value)});
    this.viewLabel = h('label', {hidden: true}, 'Rows: ', this.viewSelect);
    this.loadingEl = h('div', {id: 'loading'});
    this.loading = new LoadingIndicator(this.loadingEl);
    this.noticeEl = h('div', {id: 'notice', class: 'notice', hidden: true});
    this.runErrorEl = h('div', {id: 'run-error'});

    this.devicePanelEl = h('div', {id: 'device-panel'});
    this.diagSummary = h('summary', {}, 'Diagnostics');
    this.diagnosticsEl = h('div', {id: 'diagnostics'});
    this.programChartEl = h('div', {id: 'program-chart', class: 'chart'});
    this.programTableEl = h('div', {id: 'program-table-wrap'});
    this.programErrorEl = h('div', {class: 'section-error'});
    this.opChartEl = h('div', {id: 'op-chart', class: 'chart'});
    this.catChartEl = h('div', {id: 'category-chart', class: 'chart'});
    this.opTableEl = h('div', {id: 'op-table-wrap'});
    this.opErrorEl = h('div', {class: 'section-error'});
    this.opStatusEl = h('div', {id: 'op-status', class: 'muted'});
    this.selectionEl = h('div', {id: 'op-selection', class: 'selection'});
    this.topOpsEl = h('div', {id: 'top-ops', class: 'top-ops'});
    this.emptyFilterText = h('span', {}, 'No op matches the filters. ');
    this.emptyFilterEl = h('p', {id: 'no-match', class: 'notice', hidden: true},
        this.emptyFilterText, h('button', {type: 'button',
          onclick: () => this.clearFilters()}, 'Clear filters'));

    this.categoryMenu = h('div', {class: 'menu-list', id: 'category-options'});
    this.boundMenu = h('div', {class: 'menu-list', id: 'bound-options'});
    this.categorySummary = h('summary', {}, 'Category: all');
    this.boundSummary = h('summary', {}, 'Bound by: all');
    // No fixed debounce: a keystroke is applied at once; keystrokes typed while a filter pass
    // runs are coalesced into one pass after it (queueFilter).
    this.nameInput = h('input', {type: 'search', id: 'name-filter', placeholder: 'Op name contains…',
      'aria-label': 'Filter ops by name',
      oninput: () => this.queueFilter({name: this.nameInput.value.trim()})});

    const exportButtons = (prefix, items) => h('div', {class: 'export-buttons'},
        h('span', {class: 'muted'}, 'Export:'),
        items.map(([label, fn]) => h('button', {type: 'button',
          id: `${prefix}-export-${label.toLowerCase().replace(/[^a-z]+/g, '-')}`,
          onclick: () => fn()}, label)));

    this.programSection = h('section', {id: 'program-section'},
        h('div', {class: 'section-head'}, h('h2', {}, 'Program-level roofline'),
            exportButtons('program', [
              ['CSV', () => this.exportTable('program', 'csv')],
              ['JSON', () => this.exportTable('program', 'json')],
              ['PNG', () => this.exportChart(this.programChart, 'program', 'png')],
              ['SVG', () => this.exportChart(this.programChart, 'program', 'svg')]])),
        this.programErrorEl,
        h('p', {class: 'hint'}, 'Log-log. One roof per memory level (▼ ridge point). ' +
            'Scroll to zoom, drag to pan, double-click to reset.'),
        this.programChartEl, this.programTableEl);
    // Guidance (issue #10): the Opportunities panel on top, the throughput line above.
    this.opportunities = new OpportunitiesPanel({
      findRank: (op) => opKeyOf(this.data && this.data.ops, op),
      selectOp: (key) => this.selectOp(key, {fromChart: true})});
    this.programSection.insertBefore(this.opportunities.throughputEl, this.programChartEl);

    this.opSection = h('section', {id: 'op-section'},
        h('div', {class: 'section-head'}, h('h2', {}, 'Op-level roofline'),
            exportButtons('op', [
              ['CSV', () => this.exportTable('op', 'csv')],
              ['JSON', () => this.exportTable('op', 'json')],
              ['PNG', () => this.exportChart(this.opChart, 'ops', 'png')],
              ['SVG', () => this.exportChart(this.opChart, 'ops', 'svg')]])),
        h('div', {class: 'filters', id: 'op-filters'},
            this.viewLabel,
            h('details', {class: 'menu', id: 'category-filter'}, this.categorySummary,
                this.categoryMenu),
            h('details', {class: 'menu', id: 'bound-filter'}, this.boundSummary, this.boundMenu),
            this.nameInput,
            h('button', {type: 'button', id: 'clear-filters', onclick: () => this.clearFilters()},
                'Clear filters')),
        this.opErrorEl, this.topOpsEl, this.opStatusEl,
        h('p', {class: 'hint'}, 'Colour: category · size: share of time · shape: measured ' +
            '(●), not a measurement (◆, see its caveat) or above its roof (▲) · ✚ Program · ' +
            'ops without FLOPs or bytes sit in the strip at the bottom. Scroll to zoom, drag ' +
            'to pan, double-click to reset, click a point for every metric.'),
        this.emptyFilterEl, this.opChartEl, this.selectionEl,
        h('div', {class: 'two-col'},
            h('div', {class: 'cat-wrap'},
                h('div', {class: 'section-head'}, h('h3', {}, 'Self time per category'),
                    exportButtons('category', [
                      ['PNG', () => this.exportChart(this.catChart, 'categories', 'png')],
                      ['SVG', () => this.exportChart(this.catChart, 'categories', 'svg')]])),
                this.catChartEl)),
        h('h3', {}, 'Ops'), this.opTableEl);

    this.deviceSection = h('section', {id: 'device-section'},
        h('h2', {}, 'Device'), this.devicePanelEl,
        h('details', {id: 'diagnostics-section', open: true}, this.diagSummary,
            this.diagnosticsEl));

    this.contentEl = h('div', {id: 'content'}, this.opportunities.el, this.deviceSection,
        this.programSection, this.opSection);
    this.app = h('div', {id: 'roofline-app', class: 'app', dataset: {status: 'starting'}},
        h('header', {class: 'toolbar'},
            h('label', {}, 'Run ', this.runSelect),
            h('label', {}, 'Host ', this.hostSelect),
            this.infeedLabel = h('label', {class: 'check', title: 'Applies to both charts, ' +
              'the tables and the exports'}, this.infeedToggle,
            ' Include infeed/outfeed (both charts)'),
            this.loadingEl),
        this.noticeEl, this.runErrorEl, this.contentEl);
    setChildren(this.root, this.app);
    this.tooltip = new Tooltip();  // Appended to <body>, after the root was filled.
    this.tooltip.keys = TOOLTIP_KEYS;  // compact: every metric is in the selection's details

    this.programChart = new Chart(this.programChartEl, {tooltip: this.tooltip.handler});
    this.opChart = new Chart(this.opChartEl, {tooltip: this.tooltip.handler,
      onClick: (datum) => {
        if (datum && datum.record_type === 'op') this.selectOp(opKey(datum), {fromChart: true});
      }});
    this.opChart.prerenderSubsets = () => this.prerenderSubsets();
    this.catChart = new Chart(this.catChartEl, {tooltip: this.tooltip.handler,
      onClick: (datum) => {
        if (datum && datum.category && datum.self_time_us !== undefined) {
          this.setFilter({categories: [datum.category]});
        }
      }});
    this.programTable = new DataTable(this.programTableEl, {id: 'program-table',
      columns: PROGRAM_COLUMNS, rowKey: (r) => r.series, searchable: false, paginated: false});
    this.opTable = new DataTable(this.opTableEl, {id: 'op-table', columns: OP_COLUMNS,
      rowKey: opKey, pageSize: 50, defaultSort: {key: 'rank', dir: 'asc'},
      searchKeys: ['operation', 'category', 'program', 'source', 'tf_op', 'caveat'],
      onRowClick: (r) => this.selectOp(opKey(r), {fromTable: true})});
  }

  setStatus(status) {
    this.status = status;
    this.app.dataset.status = status;
  }

  notice(text) {
    this.noticeEl.hidden = !text;
    setChildren(this.noticeEl, text || '');
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
    this.state = {run: url.run || '', host: url.host || '*',
      infeed: url.infeed === 'exclude' ? 'exclude' : 'include', view: url.view || 'op',
      categories: split(url.category), boundBy: split(url.bound), name: url.name || '',
      op: url.op || ''};
    this.infeedToggle.checked = this.state.infeed === 'include';
    this.nameInput.value = this.state.name;
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
      this.bump('runsSeq');
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
    this.bump('runsSeq');
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

  async setView(value) {
    this.state.view = value || 'op';
    this.state.categories = [];  // Kernel views have their own categories.
    this.state.boundBy = [];
    this.persist();
    await this.loadView({only: ['ops']});
  }

  // ---------------------------------------------------------------- data

  async loadView({only = null} = {}) {
    const token = ++this.loadToken;
    try {
      await this._loadView(token, only);
      this.opportunities.load(this.state);  // guidance (issue #10), in the background
    } finally {
      if (token === this.loadToken) this.bump('loadSeq');
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
    const results = await Promise.allSettled(want.map((k) =>
      this.loading.track(fetchers[k](), k === 'ops' ? 'ops' : k)));
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
    const prev = only && this.data ? this.data : {};
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
    } else if (errors.program) data.program = null;
    if (got.ops) {
      data.ops = tableToObjects(got.ops);
      data.opColumns = got.ops.columns;
      data.facets = got.ops.facets || {};
      data.views = got.ops.views || ['op'];
      data.opsTotal = got.ops.total_count;
    } else if (errors.ops) data.ops = null;
    this.data = data;

    const errs = Object.values(data.errors);
    const allFailed = errs.length && ['device', 'diagnostics', 'program', 'ops']
        .every((k) => data.errors[k]);
    if (allFailed) {
      // The run as a whole cannot be read: one clear message in place of the views.
      this.contentEl.hidden = true;
      setChildren(this.runErrorEl, errorBox(data.errors.program || errs[0],
          `run “${sel.run}”${sel.host !== '*' ? ` (host ${sel.host})` : ''}`));
      this.setStatus('error');
      this.destroyCharts();
      return;
    }
    this.contentEl.hidden = false;
    await this.renderAll();
    if (token !== this.loadToken) return;
    this.setStatus(errs.length ? 'partial' : 'ready');
    this.prefetchInfeed();
  }

  destroyCharts() {
    this.programChart.dispose();
    this.opChart.dispose();
    this.catChart.dispose();
  }

  // ---------------------------------------------------------------- rendering

  memoryIds() {
    const d = this.data && this.data.device;
    return d && d.memories ? d.memories.filter((m) => m.peak_gbs > 0 || m.peak_gibs > 0)
        .map((m) => m.id) : ['hbm'];
  }

  async renderAll() {
    const d = this.data;
    // Device + diagnostics.
    setChildren(this.devicePanelEl, d.errors.device ? errorBox(d.errors.device,
        'the device information') : devicePanel(d.device,
        (d.program || []).find((r) => r.record_type === 'total')));
    if (d.errors.diagnostics) {
      setChildren(this.diagnosticsEl, errorBox(d.errors.diagnostics, 'the diagnostics'));
    } else {
      setChildren(this.diagnosticsEl, diagnosticsList(d.diagnostics));
      const n = (d.diagnostics || []).length;
      const worst = (d.diagnostics || []).some((x) => x.severity === 'error') ? 'error' :
        (d.diagnostics || []).some((x) => x.severity === 'warning') ? 'warning' : 'info';
      setChildren(this.diagSummary, `Diagnostics (${n})`);
      this.diagSummary.dataset.severity = n ? worst : 'none';
    }
    await loadVega();
    this.tooltip.memoryIds = d.device ? this.memoryIds() : null;
    this.tooltip.columns = withDeviceMemories(TOOLTIP_COLUMNS, d.device && d.device.memories);
    // Each chart spans its own records (and the ridge points): program points are not lost in
    // the op chart's wider range. Both draw the program's FLOP-mix roof (the Total's).
    const total = (d.program || []).find((r) => r.record_type === 'total');
    const roofs = {mixPeak: total ? total.peak_flop_rate : null, dark: this.dark};
    const geometry = roofGeometry(d.device, [...(d.program || []), ...(d.ops || [])], roofs);
    this.geometry = geometry;
    this.programGeometry = roofGeometry(d.device, d.program || [], roofs);
    await Promise.all([this.renderProgram(this.programGeometry), this.renderOps(geometry)]);
  }

  // ---------------------------------------------------------------- theme & reload

  async setDark(dark) {
    this.dark = dark;
    this.app.classList.toggle('dark', dark);
    document.documentElement.classList.toggle('dark', dark);
    if (this.data && (this.status === 'ready' || this.status === 'partial')) {
      await this.renderAll();
    }
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

// The sections' methods are the app's: one object with one state, split by concern.
for (const part of [ProgramSection, OpSection, InfeedSwitch, Exports]) {
  for (const name of Object.getOwnPropertyNames(part.prototype)) {
    if (name !== 'constructor') {
      Object.defineProperty(App.prototype, name,
          Object.getOwnPropertyDescriptor(part.prototype, name));
    }
  }
}

let app = null;

/** Builds the tab into `root` (TensorBoard calls render() once per iframe). */
export async function start(root) {
  app = new App(root);
  app.build();
  attachCompare(app);  // "Compare with" (issue #9): its own toolbar controls and section
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
