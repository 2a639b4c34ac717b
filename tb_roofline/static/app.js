// Wiring: view state, data loading and the reactions to user input. Data access lives in
// api.js, TensorBoard integration in tbhost.js, rendering in views/ and charts.js.
import {api, ApiError, tableToObjects} from './api.js';
import {onReload, onUrlChange, readUrlState, watchDarkMode, writeUrlState} from './tbhost.js';
import {Chart, POINT_FLAGS, categorySpec, loadVega, opSpec, placePoints, programSpec,
  roofGeometry} from './charts.js';
import {OP_COLUMNS, PROGRAM_COLUMNS, TOOLTIP_COLUMNS, TOOLTIP_KEYS, fmtInt, toCsv, visibleColumns,
  withDeviceMemories}
  from './columns.js';
import {topOpsSummary} from './views/top_ops.js';
import {download, downloadText, h, setChildren, slug} from './views/dom.js';
import {devicePanel} from './views/device.js';
import {LoadingIndicator, diagnosticsList, emptyState, errorBox} from './views/states.js';
import {DataTable} from './views/table.js';
import {Tooltip, detailsTable} from './views/tooltip.js';
import {OpportunitiesPanel} from './views/opportunities.js';  // guidance (issue #10)
import {attachCompare} from './views/compare.js';  // "Compare with" (issue #9)

const KIND_LABEL = {total: 'Total', total_hw: 'Total (HW)', host: 'Host', average: 'Average',
                    step: 'Step'};
const DERIVED = new Set(['px', 'py', 'at_floor', 'kind', 'series', 'flag']);
const now = () => performance.now();
const nextFrame = () => new Promise((resolve) => requestAnimationFrame(() => resolve()));
// Which filter pass last kept a row (Chart.showOnly's predicate); a symbol, so exports and
// tooltips never see it.
const SHOWN = Symbol('shown');
// Columns that place, colour or size an op: the infeed/outfeed switch without a re-render
// needs them equal in both variants (they are: each op's own sums do not change).
const PLACED = ['operation', 'category', 'bottleneck_operational_intensity', 'flop_rate',
  'total_time_us', 'px', 'py', 'at_floor', 'caveat'];
/** An op's identity (not its rank, which changes with the infeed/outfeed variant): the key of
 * its table row, its selection and the `op` URL parameter. */
export const opKey = (r) => JSON.stringify([r.program_id, r.operation, r.precision, r.host]);
/** 1 / the variant's time denominator (µs): time share = total time × this. */
function timeShareOf(rows) {
  let best = null;
  for (const r of rows || []) {
    if (r.total_time_us > 0 && r.time_fraction > 0 &&
        (!best || r.total_time_us > best.total_time_us)) best = r;
  }
  return best ? best.time_fraction / best.total_time_us : 0;
}

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
    let url = {};
    try {
      url = await readUrlState();
    } catch (e) {
      url = {};
    }
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

  async setInfeed(value) {
    this.state.infeed = value;
    this.persist();
    const t0 = now();
    if (await this.switchInfeed(value)) {
      this.opportunities.load(this.state);  // guidance (issue #10)
      this.timings.lastInfeedMs = now() - t0;
      this.bump('filterSeq');
      this.bump('loadSeq');
      return;
    }
    await this.loadView({only: ['program', 'ops']});
  }

  /**
   * After a load, fetches the other infeed/outfeed variant of /ops and /program in the
   * background, so the toggle needs no request and no re-render (switchInfeed).
   */
  prefetchInfeed() {
    const d = this.data;
    if (!d || !d.ops || !d.ops.length || !d.program || d.errors.ops || d.errors.program ||
        !this.opChart.view) return;
    const loaded = this.state.infeed;
    const other = loaded === 'include' ? 'exclude' : 'include';
    const sel = {run: this.state.run, host: this.state.host, infeed: other, view: this.state.view};
    const byKey = new Map();
    for (const r of d.ops) byKey.set(opKey(r), r);
    if (byKey.size !== d.ops.length) return;  // No unique key: the toggle refetches.
    d.variants = {[loaded]: {ops: d.ops, program: d.program, facets: d.facets,
      opsTotal: d.opsTotal}};
    d.variantsReady = Promise.all([api.ops(sel), api.program(sel)]).then(([ops, program]) => {
      if (this.data !== d) return;
      const rows = tableToObjects(ops);
      const objects = [];
      const changed = new Set();
      for (const raw of rows) {
        const obj = byKey.get(opKey(raw));
        if (!obj) return;  // An op the loaded variant lacks: the toggle refetches.
        objects.push(obj);
        for (const c of ops.columns) if (raw[c] !== obj[c] && !changed.has(c)) changed.add(c);
      }
      const cols = [...changed];
      if (cols.some((c) => PLACED.includes(c))) return;
      // The values of the changed columns in each variant, in that variant's row order.
      const vals = (list) => list.map((r) => cols.map((c) => r[c]));
      d.variants[loaded].values = vals(d.ops);
      d.variants[loaded].cols = cols;
      d.variants[other] = {ops: objects, values: vals(rows), cols, facets: ops.facets || {},
        opsTotal: ops.total_count, program: tableToObjects(program)};
      this.opChart.schedulePrerender();  // Its bitmap, in idle time.
    }).catch(() => {});  // The toggle then refetches as before.
  }

  /**
   * The infeed/outfeed toggle without a request or a re-render: the op rows stay the same
   * objects (so the chart keeps its items), their changed columns (time share, rank, self-time
   * percentages) are swapped in, the ops the variant lacks are hidden like filtered ones, and
   * the program records are replaced. Returns false (the caller reloads) when the prefetched
   * variant is missing or its points do not fit the current axes.
   */
  async switchInfeed(value) {
    const d = this.data;
    if (!d || !d.variantsReady) return false;
    await d.variantsReady;
    if (this.data !== d || !d.variants[value] || !d.variants[value].values) return false;
    const v = d.variants[value];
    if (v.ops === d.ops) return true;
    if ((v.facets.category || []).some((c) => !this.chartCategories.includes(c))) return false;
    // Program records of that variant, placed on the current axes; they must fit.
    const program = v.program.map((r) => ({...r}));
    const total = program.filter((r) => r.record_type === 'total').map((r) => ({...r}));
    const pg = this.programGeometry;
    placePoints(program, pg.floorX, pg.floorY, pg.x0, pg.x1);
    placePoints(total, this.geometry.floorX, this.geometry.floorY, this.geometry.x0,
        this.geometry.x1);
    const inside = (g, rows) => rows.every((r) => r.px >= g.xDomain[0] && r.px <= g.xDomain[1] &&
        r.py >= g.yDomain[0] && r.py <= g.yDomain[1]);
    if (!inside(this.programGeometry, program) || !inside(this.geometry, total)) return false;
    const selected = this.state.op ? d.ops.find((r) => opKey(r) === this.state.op) : null;
    const cols = v.cols;
    v.ops.forEach((obj, i) => {
      const values = v.values[i];
      for (let j = 0; j < cols.length; j++) obj[cols[j]] = values[j];
    });
    d.ops = v.ops;
    d.facets = v.facets;
    d.opsTotal = v.opsTotal;
    d.program = program;
    this.decorateProgram(program);
    this.categories = d.facets.category && d.facets.category.length ? d.facets.category :
      this.categories;
    this.bounds = d.facets.bound_by && d.facets.bound_by.length ? d.facets.bound_by : this.bounds;
    this.state.categories = this.state.categories.filter((c) => this.categories.includes(c));
    this.state.boundBy = this.state.boundBy.filter((c) => this.bounds.includes(c));
    this.programTable.setRows(program);
    // One run of the op chart for the Program point, the legend and the shown ops.
    await this.opChart.setData({program: total}, {run: false});
    await this.opChart.setParam('time_share', timeShareOf(d.ops), {run: false});
    await Promise.all([this.programChart.setData({records: program}), this.applyFilters()]);
    if (selected && d.ops.includes(selected)) await this.selectOp(opKey(selected), {});
    else if (selected) this.clearSelection();
    return true;
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

  async renderProgram(geometry) {
    const d = this.data;
    if (d.errors.program || !d.program) {
      setChildren(this.programErrorEl, errorBox(d.errors.program, 'the program-level roofline'));
      this.programChart.dispose();
      this.programChartEl.hidden = true;
      this.programTableEl.hidden = true;
      return;
    }
    setChildren(this.programErrorEl);
    this.programChartEl.hidden = false;
    this.programTableEl.hidden = false;
    const rows = this.decorateProgram(placePoints(d.program, geometry.floorX, geometry.floorY,
        geometry.x0, geometry.x1));
    if (!rows.length) {
      setChildren(this.programErrorEl, h('p', {class: 'muted'}, 'No program-level records.'));
    }
    this.programTable.setColumns(visibleColumns(
        withDeviceMemories(PROGRAM_COLUMNS, d.device && d.device.memories), this.memoryIds(), rows,
        d.programColumns, d.device && d.device.kind));
    this.programTable.setRows(rows);
    await this.programChart.setSpec(programSpec(geometry, this.dark,
        {kinds: [...new Set(rows.map((r) => r.kind))], subtitle: this.subtitle()}),
    {records: rows});
  }

  /** Run, host and device: every chart says what it shows (also in PNG/SVG exports). */
  subtitle() {
    const d = this.data || {};
    const s = this.state;
    return [`run ${s.run}`, s.host === '*' ? 'all hosts' : `host ${s.host}`,
      d.device ? d.device.type : null, s.infeed === 'exclude' ? 'infeed/outfeed excluded' : null]
        .filter(Boolean).join(' · ');
  }

  /** 'kernels' in the kernel views, else 'ops'. */
  opNoun() {
    return this.state.view && this.state.view.startsWith('kernel') ? 'kernels' : 'ops';
  }

  decorateProgram(rows) {
    for (const r of rows) {
      r.kind = KIND_LABEL[r.record_type] || r.record_type;
      r.series = r.record_type === 'host' ? `Host ${r.host}` :
        r.record_type === 'step' ? `Step ${r.step}` : r.step;
    }
    return rows;
  }

  renderViewSelect() {
    const views = (this.data && this.data.views) || ['op'];
    const labels = {op: 'Ops', kernel: 'GPU kernels', kernel_hw: 'GPU kernels (HW counters)'};
    setChildren(this.viewSelect, views.map((v) => h('option', {value: v}, labels[v] || v)));
    this.viewSelect.value = views.includes(this.state.view) ? this.state.view : views[0];
    this.viewLabel.hidden = views.length < 2;
  }

  async renderOps(geometry) {
    const d = this.data;
    this.renderViewSelect();
    if (d.errors.ops || !d.ops) {
      setChildren(this.opErrorEl, errorBox(d.errors.ops, 'the op-level roofline'));
      this.opChart.dispose();
      this.catChart.dispose();
      for (const el of [this.opChartEl, this.catChartEl, this.opTableEl]) el.hidden = true;
      return;
    }
    setChildren(this.opErrorEl);
    const none = !d.ops.length;
    for (const el of [this.opChartEl, this.catChartEl, this.opTableEl]) el.hidden = none;
    if (none) {
      this.opChart.dispose();
      this.catChart.dispose();
      setChildren(this.opErrorEl, h('p', {class: 'notice', id: 'no-ops'},
          'No op-level records: this profile has no ops with FLOPs or bytes ' +
          '(see the diagnostics above).'));
      this.filtered = [];
      this.opTable.setRows([]);
      this.opStatusEl.dataset.plotted = '0';
      this.opStatusEl.dataset.total = '0';
      setChildren(this.opStatusEl);
      return;
    }
    placePoints(d.ops, geometry.floorX, geometry.floorY, geometry.x0, geometry.x1);
    const facets = d.facets || {};
    const uniq = (key) => [...new Set(d.ops.map((r) => r[key]))].filter((x) => x !== null).sort();
    this.categories = facets.category && facets.category.length ? facets.category : uniq('category');
    this.bounds = facets.bound_by && facets.bound_by.length ? facets.bound_by : uniq('bound_by');
    // Drop filter values (e.g. from a link) the run does not have.
    this.state.categories = this.state.categories.filter((c) => this.categories.includes(c));
    this.state.boundBy = this.state.boundBy.filter((c) => this.bounds.includes(c));
    this.renderFilterMenus();
    // The infeed/outfeed switch only matters where such ops exist (TPU).
    this.infeedLabel.hidden = this.state.infeed === 'include' &&
        !d.ops.some((r) => r.is_infeed_outfeed);
    this.opTable.setColumns(visibleColumns(
        withDeviceMemories(OP_COLUMNS, d.device && d.device.memories), this.memoryIds(), d.ops,
        d.opColumns, d.device && d.device.kind));
    setChildren(this.topOpsEl, topOpsSummary(d.ops, this.opNoun(),
        (row) => this.selectOp(opKey(row), {fromChart: true})));
    // A copy: the program table's rows are placed on the program chart's axes.
    const programTotal = placePoints((d.program || []).filter((r) => r.record_type === 'total')
        .map((r) => ({...r})), geometry.floorX, geometry.floorY, geometry.x0, geometry.x1);
    // The chart holds every op; filters only choose which of its items are shown.
    this.chartCategories = this.categories;
    const t0 = now();
    const flags = [...new Set(d.ops.map((r) => r.flag))];
    await this.opChart.setSpec(opSpec(geometry, this.categories, this.dark, timeShareOf(d.ops),
        {flags, subtitle: this.subtitle(), what: this.opNoun()}),
    {ops: d.ops, program: programTotal, selected: []});
    this.timings.opChartMs = now() - t0;
    this.filtered = this.markShown();
    await this.opChart.showOnly('points', 'ops', this.shownPredicate(),
        {cacheKey: this.filterKey()});
    this.timings.opChartPoints = this.filtered.length;
    await this.catChart.setSpec(categorySpec(this.categories, this.dark, this.catChartEl.clientWidth),
        {cats: this.categoryRows(this.filtered)});
    this.opTable.setRows(this.filtered, {base: d.ops});
    this.updateOpStatus();
    if (this.state.op) {
      if (d.ops.some((r) => opKey(r) === this.state.op)) await this.selectOp(this.state.op, {});
      else this.clearSelection();
    }
  }

  renderFilterMenus() {
    const menu = (el, values, selected, key) => setChildren(el, values.map((v) =>
      h('label', {class: 'check'}, h('input', {type: 'checkbox', value: v,
        checked: selected.includes(v), onchange: () => {
          const checked = [...el.querySelectorAll('input:checked')].map((i) => i.value);
          this.setFilter({[key]: checked});
        }}), ` ${v}`)));
    menu(this.categoryMenu, this.categories, this.state.categories, 'categories');
    menu(this.boundMenu, this.bounds, this.state.boundBy, 'boundBy');
    const label = (name, sel) => `${name}: ${sel.length ? sel.join(', ') : 'all'}`;
    setChildren(this.categorySummary, label('Category', this.state.categories));
    setChildren(this.boundSummary, label('Bound by', this.state.boundBy));
  }

  /** The same semantics as the API's filters: exact category/bound_by, name substring. */
  applyFilterRows(ops = (this.data && this.data.ops) || [], state = this.state) {
    const cats = state.categories.length ? new Set(state.categories) : null;
    const bounds = state.boundBy.length ? new Set(state.boundBy) : null;
    const name = state.name.toLowerCase();
    if (!cats && !bounds && !name) return ops;
    return ops.filter((r) => (!cats || cats.has(r.category)) &&
        (!bounds || bounds.has(r.bound_by)) &&
        (!name || String(r.operation || '').toLowerCase().includes(name)));
  }

  /**
   * The op chart's subsets worth pre-rendering while the user does nothing (Chart
   * .prerenderSubsets): every op (clearing the filters) and the other infeed/outfeed variant,
   * with the current filters and without, each named as showOnly will name it.
   */
  prerenderSubsets() {
    const d = this.data;
    if (!d || !d.ops || !this.opChart.view) return [];
    const s = this.state;
    const other = s.infeed === 'include' ? 'exclude' : 'include';
    const cleared = {...s, categories: [], boundBy: [], name: ''};
    const all = this.opChart.view.data('ops').length;
    const out = [];
    for (const st of [cleared, {...s, infeed: other}, {...cleared, infeed: other}]) {
      const v = st.infeed === s.infeed ? {ops: d.ops} : d.variants && d.variants[st.infeed];
      if (!v || !v.ops || (v.ops !== d.ops && !v.values)) continue;
      const rows = this.applyFilterRows(v.ops, st);
      if (rows.length === all) {
        out.push({cacheKey: '', keep: null});
      } else {
        const kept = new Set(rows);
        out.push({cacheKey: this.filterKey(st), keep: (datum) => kept.has(datum)});
      }
    }
    const current = this.filterKey();
    return out.filter((x) => x.cacheKey !== current);
  }

  categoryRows(rows) {
    const by = new Map();
    let total = 0;
    for (const r of rows) {
      const t = r.total_self_time_us || 0;
      total += t;
      const e = by.get(r.category) || {category: r.category, self_time_us: 0, ops: 0};
      e.self_time_us += t;
      e.ops += 1;
      by.set(r.category, e);
    }
    const out = [...by.values()];
    for (const e of out) {
      e.self_time_us = Math.round(e.self_time_us * 1000) / 1000;
      e.share = total ? e.self_time_us / total : 0;
    }
    return out;
  }

  updateOpStatus() {
    const d = this.data;
    const n = this.filtered.length;
    const noun = this.opNoun();
    const floor = this.filtered.reduce((acc, r) => acc + (r.at_floor ? 1 : 0), 0);
    const caveated = this.filtered.reduce((acc, r) => acc +
        (r.flag && r.flag !== POINT_FLAGS[0] ? 1 : 0), 0);
    setChildren(this.opStatusEl, `Plotted ${fmtInt(n)} of ${fmtInt(d.ops.length)} ${noun}`,
        floor ? ` · ${fmtInt(floor)} without FLOPs or bytes in the strip at the bottom` : '',
        caveated ? ` · ${fmtInt(caveated)} not a roofline measurement (◆/▲, see Caveat)` : '',
        this.state.infeed === 'exclude' ? ' · infeed/outfeed excluded' : '');
    this.opStatusEl.dataset.plotted = String(n);
    this.opStatusEl.dataset.total = String(d.ops.length);
    this.emptyFilterEl.hidden = n > 0 || !d.ops.length;
    this.catChartEl.hidden = n === 0;
    setChildren(this.emptyFilterText, `No ${noun} match the filters. `);
  }

  /** Filters the rows and stamps the kept ones (for Chart.showOnly's predicate). */
  markShown() {
    const rows = this.applyFilterRows();
    this.shownStamp = (this.shownStamp || 0) + 1;
    const stamp = this.shownStamp;
    for (const r of rows) r[SHOWN] = stamp;
    return rows;
  }

  /** Which chart items to show: null (all) when every op of the chart is kept. */
  shownPredicate() {
    const all = this.opChart.view ? this.opChart.view.data('ops').length : -1;
    if (this.filtered.length === all) return null;
    const stamp = this.shownStamp;
    return (datum) => datum[SHOWN] === stamp;
  }

  /** The filter state (its bitmap of the op chart's points is kept for a while). */
  filterKey(s = this.state) {
    return JSON.stringify([s.infeed, s.categories, s.boundBy, s.name]);
  }

  /** Applies the current filters to the op chart, the category bars, the table and status. */
  async applyFilters() {
    this.filtered = this.markShown();
    this.renderFilterMenus();
    this.opTable.setRows(this.filtered, {base: this.data.ops});
    this.updateOpStatus();
    // One run of the op chart (the shown points and whatever the caller changed with
    // `run: false`); the category bars are updated in place (changeset `modify`).
    await Promise.all([
      this.opChart.showOnly('points', 'ops', this.shownPredicate(),
          {cacheKey: this.filterKey(), run: false})
          .then(() => this.opChart.view && this.opChart.view.runAsync()),
      this.catChart.updateRows('cats', this.categoryRows(this.filtered), 'category',
          ['self_time_us', 'ops', 'share']),
    ]);
  }

  async setFilter(patch) {
    Object.assign(this.state, patch);
    if ('name' in patch && this.nameInput.value.trim() !== patch.name) {
      this.nameInput.value = patch.name;
    }
    this.persist();
    if (!this.data || !this.data.ops) return;
    const t0 = now();
    await this.applyFilters();
    this.timings.lastFilterMs = now() - t0;
    this.bump('filterSeq');
  }

  /**
   * Applies a filter change now, or, while a filter pass runs, once it is done: keystrokes typed
   * during a pass are coalesced into one pass (the latest text wins).
   */
  queueFilter(patch) {
    this.pendingFilter = {...(this.pendingFilter || {}), ...patch};
    if (this.filterBusy) return;
    this.filterBusy = true;
    (async () => {
      try {
        while (this.pendingFilter) {
          const next = this.pendingFilter;
          this.pendingFilter = null;
          await this.setFilter(next);
          if (this.pendingFilter) await nextFrame();  // Let the browser paint in between.
        }
      } finally {
        this.filterBusy = false;
      }
    })();
  }

  clearFilters() {
    this.setFilter({categories: [], boundBy: [], name: ''});
  }

  /** Selects an op by its identity (opKey): table row, chart ring, details, URL. */
  async selectOp(key, {fromChart = false} = {}) {
    const row = this.data && this.data.ops ? this.data.ops.find((r) => opKey(r) === key) : null;
    if (!row) return;
    this.state.op = key;
    this.persist();
    const inTable = this.opTable.select(key);
    await this.opChart.setData({selected: [row]});
    setChildren(this.selectionEl,
        h('div', {class: 'selection-head'}, h('span', {}, 'Selected: ',
            h('strong', {}, row.operation),
            ` (rank ${row.rank}, ${row.category}${row.precision ? `, ${row.precision}` : ''}, ` +
            `bound by ${row.bound_by})`),
        inTable ? '' : h('span', {class: 'muted'}, ' — hidden by the current filters'), ' ',
        h('button', {type: 'button', onclick: () => this.clearSelection()}, 'Clear')),
        h('details', {class: 'selection-details'}, h('summary', {}, 'Every metric'),
            detailsTable(row, this.tooltip.columns || TOOLTIP_COLUMNS, this.tooltip.memoryIds)));
    this.selectionEl.dataset.key = key;
    this.selectionEl.dataset.rank = String(row.rank);
    if (fromChart) {
      const tr = this.opTableEl.querySelector('tr.selected');
      if (tr && tr.scrollIntoView) tr.scrollIntoView({block: 'center'});
    }
  }

  clearSelection() {
    this.state.op = '';
    this.persist();
    this.opTable.select(null);
    this.opChart.setData({selected: []});
    setChildren(this.selectionEl);
    delete this.selectionEl.dataset.key;
    delete this.selectionEl.dataset.rank;
  }

  // ---------------------------------------------------------------- export

  fileBase(what) {
    return `roofline_${slug(this.state.run)}_${slug(this.state.host === '*' ? 'all-hosts' :
      this.state.host)}_${what}`;
  }

  exportTable(level, format) {
    const d = this.data;
    if (!d) return;
    const rows = level === 'program' ? this.programTable.visibleRows() :
      this.opTable.visibleRows();
    const apiColumns = (level === 'program' ? d.programColumns : d.opColumns) ||
        Object.keys(rows[0] || {}).filter((k) => !DERIVED.has(k));
    const name = this.fileBase(level === 'program' ? 'program' : 'ops');
    if (format === 'csv') {
      downloadText(toCsv(rows, apiColumns), `${name}.csv`, 'text/csv');
    } else {
      const clean = rows.map((r) => Object.fromEntries(apiColumns.map((k) => [k, r[k] ?? null])));
      const doc = {run: this.state.run, host: this.state.host, infeed_outfeed: this.state.infeed,
        view: level === 'program' ? undefined : this.state.view,
        filters: level === 'program' ? {} : {category: this.state.categories,
          bound_by: this.state.boundBy, name: this.state.name, search: this.opTable.search},
        columns: apiColumns, rows: clean};
      downloadText(JSON.stringify(doc, null, 1), `${name}.json`, 'application/json');
    }
  }

  async exportChart(chart, what, format) {
    const url = await chart.imageUrl(format);
    download(url, `${this.fileBase(what)}.${format}`);
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

/** The key (opKey) of the op row with this identity (guidance findings link by identity). */
function opKeyOf(ops, op) {
  const row = (ops || []).find((r) => r.program_id === op.program_id &&
      r.operation === op.operation && r.precision === op.precision);
  return row ? opKey(row) : null;
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
