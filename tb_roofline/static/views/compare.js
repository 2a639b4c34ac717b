// "Compare with": the selected run (the candidate) against another run, host or step (the base)
// on one roofline (docs/compare.md). Attached by one call (attachCompare) with what it needs
// of the app, explicitly: its state, runs, theme and loading bar, where to put its controls
// and section, and its events (`runs`, `loaded`, `theme`), which it follows. Its own state
// lives in the URL (`compare*` keys). While a comparison is shown, the single-run sections
// are hidden (the `comparing` class) and this section takes their place, at the top.
import {api, getJson} from '../api.js';
import {Chart, loadVega} from '../charts.js';
import {CHANGES, bySide, compareGeometry, compareSpec, pairArrows, pairPoints, sidesXY}
  from '../compare_charts.js';
import {PAIR_COLUMNS, PAIR_TOOLTIP_COLUMNS, PROGRAM_PAIR_COLUMNS, columnarToObjects,
  filterPairs, programLabel, tooltipDatum, PAIR_ESSENTIAL} from '../compare_data.js';
import {summaryPanel} from './compare_summary.js';
import {fmtInt, perUnit} from '../columns.js';
import {exportCompareChart, exportPairs} from './compare_exports.js';
import {onUrlChange, readUrlState, writeUrlState} from '../tbhost.js';
import {h, setChildren} from './dom.js';
import {errorBox} from './states.js';
import {DataTable} from './table.js';
import {Tooltip} from './tooltip.js';

const now = () => performance.now();
const frame = () => new Promise((resolve) => requestAnimationFrame(() => setTimeout(resolve, 0)));
const KEYS = {base: 'compare', baseHost: 'compare_host', baseStep: 'compare_base_step',
  step: 'compare_step', categories: 'compare_category', boundBy: 'compare_bound',
  name: 'compare_name', change: 'compare_change', allBase: 'compare_all_base'};
const LISTS = new Set(['categories', 'boundBy']);
const EMPTY = {base: '', baseHost: '*', baseStep: '', step: '', categories: [], boundBy: [],
  name: '', change: '', allBase: ''};
// Above this many grey base points, only those of the pairs with arrows are drawn unless asked
// for all (readability, and 20,000 more points cost ~0.5 s to draw).
const BASE_POINTS_LIMIT = 10000;

/**
 * @param host {events: EventTarget, state, runs, dark, loading: LoadingIndicator,
 *   toolbar: Element, toolbarBefore: Element, root: Element, content: Element}
 */
export function attachCompare(host) {
  const view = new CompareView(host);
  view.install();
  window.__rooflineCompare = view;  // For the e2e tests and the benchmark.
  return view;
}

/**
 * A chart with no point either run can place (no pair has a FLOP rate and an intensity: graph
 * replays, ops without cost) shrinks to nothing and a line says why, instead of an empty
 * full-size plot. Filters never collapse it: `count` is every placeable point.
 */
function collapseIfEmpty(chartEl, noteEl, count, what) {
  chartEl.classList.toggle('chart-empty', count === 0);
  chartEl.dataset.points = String(count);
  noteEl.hidden = count > 0;
  setChildren(noteEl, count > 0 ? [] : `No ${what} of either run has a FLOP rate and an ` +
    'intensity to place on a roofline (no known cost): the table below lists them by time.');
}

class CompareView {
  constructor(app) {
    this.app = app;
    this.state = {...EMPTY};
    this.answer = null;
    this.pairs = [];
    this.filtered = [];
    this.timings = {};
    this.loadToken = 0;
  }

  // ---------------------------------------------------------------- layout

  install() {
    const css = h('link', {rel: 'stylesheet', href: new URL('../compare.css', import.meta.url).href});
    document.head.appendChild(css);
    const sel = (id, label, onchange) => h('select', {id, 'aria-label': label, onchange});
    this.runSelect = sel('compare-run', 'Compare with run', () => this.setState(
        {base: this.runSelect.value, baseHost: '*', baseStep: ''}));
    this.hostSelect = sel('compare-host', 'Base host', () => this.setState(
        {baseHost: this.hostSelect.value}));
    this.baseStepSelect = sel('compare-base-step', 'Base step', () => this.setState(
        {baseStep: this.baseStepSelect.value}));
    this.stepSelect = sel('compare-step', 'Step of the selected run', () => this.setState(
        {step: this.stepSelect.value}));
    this.stepsEl = h('span', {class: 'compare-steps', hidden: true},
        h('label', {}, 'Base step ', this.baseStepSelect),
        h('label', {}, 'Step ', this.stepSelect));
    this.hostLabel = h('label', {hidden: true}, 'Base host ', this.hostSelect);
    this.controls = h('span', {class: 'compare-controls', id: 'compare-controls'},
        h('label', {}, 'Compare with ', this.runSelect), this.hostLabel, this.stepsEl);
    this.app.toolbar.insertBefore(this.controls, this.app.toolbarBefore);

    this.headEl = h('div', {id: 'compare-head'});
    this.errorEl = h('div', {class: 'section-error'});
    this.notesEl = h('ul', {id: 'compare-notes', class: 'compare-notes'});
    this.summaryEl = h('div', {id: 'compare-summary', class: 'compare-summary'});
    this.programChartEl = h('div', {id: 'compare-program-chart', class: 'chart'});
    this.programTableEl = h('div', {id: 'compare-program-table-wrap'});
    this.opChartEl = h('div', {id: 'compare-op-chart', class: 'chart'});
    this.programEmptyEl = h('p', {id: 'compare-program-empty', class: 'muted', hidden: true});
    this.opEmptyEl = h('p', {id: 'compare-op-empty', class: 'muted', hidden: true});
    this.opTableEl = h('div', {id: 'compare-op-table-wrap'});
    this.opStatusEl = h('div', {id: 'compare-op-status', class: 'muted'});
    this.categoryMenu = h('div', {class: 'menu-list', id: 'compare-category-options'});
    this.boundMenu = h('div', {class: 'menu-list', id: 'compare-bound-options'});
    this.categorySummary = h('summary', {}, 'Category: all');
    this.boundSummary = h('summary', {}, 'Bound by: all');
    this.changeSelect = h('select', {id: 'compare-change-filter', 'aria-label': 'Change',
      onchange: () => this.setFilter({change: this.changeSelect.value})},
    [['', 'All pairs'], ['matched', 'Matched'], ...CHANGES.map((c) => [c, c[0].toUpperCase() +
      c.slice(1)])].map(([v, l]) => h('option', {value: v}, l)));
    this.allBaseToggle = h('input', {type: 'checkbox', id: 'compare-all-base',
      onchange: () => this.setFilter({allBase: this.allBaseToggle.checked ? '1' : ''})});
    this.allBaseLabel = h('label', {class: 'check', hidden: true,
      title: `more than ${BASE_POINTS_LIMIT} pairs: by default only the base points of the ` +
        'pairs with arrows are drawn'}, this.allBaseToggle, ' All base points');
    this.nameInput = h('input', {type: 'search', id: 'compare-name-filter',
      placeholder: 'Op name contains…', 'aria-label': 'Filter pairs by op name',
      oninput: () => this.setFilter({name: this.nameInput.value.trim()})});
    const exportButtons = (prefix, items) => h('div', {class: 'export-buttons'},
        h('span', {class: 'muted'}, 'Export:'), items.map(([label, fn]) => h('button', {
          type: 'button', id: `${prefix}-export-${label.toLowerCase()}`, onclick: fn}, label)));
    this.section = h('section', {id: 'compare-section', hidden: true,
      dataset: {status: 'off', seq: '0'}},
    h('div', {class: 'section-head'}, h('h2', {}, 'Comparison'), this.headEl,
        exportButtons('compare', [['CSV', () => this.exportTable('csv')],
          ['JSON', () => this.exportTable('json')]])),
    this.errorEl, this.notesEl, this.summaryEl,
    h('div', {class: 'section-head'}, h('h3', {}, 'Program records'),
        exportButtons('compare-program', [
          ['PNG', () => this.exportChart(this.programChart, 'program', 'png')],
          ['SVG', () => this.exportChart(this.programChart, 'program', 'svg')]])),
    h('p', {class: 'hint'}, 'Grey: a record in the base; an arrow to its candidate, coloured ' +
        "(green faster, red slower). Each side under its own device's roofs. Scroll to zoom, " +
        'drag to pan, double-click to reset.'),
    this.programEmptyEl, this.programChartEl, this.programTableEl,
    h('div', {class: 'section-head'}, h('h3', {}, 'Ops'),
        exportButtons('compare-op', [
          ['PNG', () => this.exportChart(this.opChart, 'ops', 'png')],
          ['SVG', () => this.exportChart(this.opChart, 'ops', 'svg')]])),
    h('div', {class: 'filters', id: 'compare-filters'},
        h('details', {class: 'menu', id: 'compare-category-filter'}, this.categorySummary,
            this.categoryMenu),
        h('details', {class: 'menu', id: 'compare-bound-filter'}, this.boundSummary,
            this.boundMenu),
        this.changeSelect, this.nameInput, this.allBaseLabel,
        h('button', {type: 'button', id: 'compare-clear-filters',
          onclick: () => this.setFilter({categories: [], boundBy: [], name: '', change: ''})},
        'Clear filters')),
    this.opStatusEl,
    h('p', {class: 'hint'}, 'Grey: an op in the base; coloured: the same op in the candidate ' +
        '(green faster, red slower, grey-blue unchanged), or an op only one side has (blue new, ' +
        'orange removed). Arrows for the pairs that explain most of the time change, the others ' +
        'as points; ops that are not roofline measurements (see their caveat) or have no FLOP ' +
        'rate are listed in the table, not placed. Click a point to find its pair.'),
    this.opEmptyEl, this.opChartEl, this.opTableEl);
    this.app.content.insertBefore(this.section, this.app.content.firstChild);

    this.tooltip = new Tooltip();
    this.tooltip.el.id = 'compare-tooltip';  // #chart-tooltip is the app's
    this.tooltip.columns = PAIR_TOOLTIP_COLUMNS;
    const onPoint = (datum) => {
      if (datum && datum.pair) this.selectPair(datum.pair._i, {fromChart: true});
    };
    this.programChart = new Chart(this.programChartEl, {});
    this.opChart = new Chart(this.opChartEl, {onClick: onPoint});
    this.programTable = new DataTable(this.programTableEl, {id: 'compare-program-table',
      columns: PROGRAM_PAIR_COLUMNS, rowKey: (r) => r._i, searchable: false, paginated: false,
      stickyKey: 'record'});
    this.opTable = new DataTable(this.opTableEl, {id: 'compare-op-table', columns: PAIR_COLUMNS,
      rowKey: (r) => r._i, pageSize: 50, defaultSort: {key: 'abs_delta_time_us', dir: 'desc'},
      essential: PAIR_ESSENTIAL, stickyKey: 'pair_operation',
      searchKeys: ['pair_operation', 'base_operation', 'program', 'cand_category'],
      placeholder: 'Search operation, base operation, program, category',
      onRowClick: (r) => this.selectPair(r._i, {})});

    // The app's events: its run list changed, a load finished, the theme changed.
    this.seen = {};
    for (const name of ['runs', 'loaded', 'theme']) {
      this.app.events.addEventListener(name, () => this.onAppEvent(name));
    }
    onUrlChange(() => this.followUrl());
    this.ready = this.restore();
  }

  // ---------------------------------------------------------------- state

  async restore() {
    const url = await readUrlState();
    const state = {...EMPTY};
    for (const [key, name] of Object.entries(KEYS)) {
      const v = url[name];
      if (v === undefined || v === null || v === '') continue;
      state[key] = LISTS.has(key) ? String(v).split(',').filter(Boolean) : String(v);
    }
    this.state = state;
    this.nameInput.value = state.name;
    this.changeSelect.value = state.change;
    this.allBaseToggle.checked = state.allBase === '1';
  }

  persist() {
    const s = this.state;
    const out = {};
    for (const [key, name] of Object.entries(KEYS)) {
      const v = s[key];
      out[name] = LISTS.has(key) ? v.join(',') : key === 'baseHost' && v === '*' ? '' : v;
    }
    if (!s.base) for (const name of Object.values(KEYS)) out[name] = '';
    writeUrlState(out);
  }

  async followUrl() {
    const before = JSON.stringify(this.state);
    await this.restore();
    if (JSON.stringify(this.state) !== before) await this.load();
  }

  async setState(patch) {
    Object.assign(this.state, patch);
    if ('base' in patch) Object.assign(this.state, {categories: [], boundBy: []});
    this.persist();
    await this.load();
  }

  setFilter(patch) {
    Object.assign(this.state, patch);
    if ('name' in patch && this.nameInput.value.trim() !== patch.name) this.nameInput.value = patch.name;
    if ('change' in patch) this.changeSelect.value = patch.change;
    this.persist();
    const t0 = now();
    this.applyFilters().then(() => {
      this.timings.lastFilterMs = now() - t0;
      this.bump('filterSeq');
    });
  }

  bump(name) {
    this.section.dataset[name] = String((+this.section.dataset[name] || 0) + 1);
  }

  setStatus(status) {
    this.section.dataset.status = status;
  }

  /** The app loaded its runs, finished a load or changed its theme: follow it. */
  async onAppEvent(name) {
    await this.ready;
    if (name === 'runs') this.renderRunOptions();
    const target = this.target();
    if (name !== 'theme' && target !== this.loadedFor) {
      await this.load();
    } else if (name === 'theme' && this.answer && this.section.dataset.status === 'ready') {
      const token = ++this.loadToken;  // Dark mode: the same answer drawn in the other theme.
      await this.render(this.answer, token);
    }
  }

  /** What the comparison depends on: both selections and both runs' files (TensorBoard's
   * reload button reloads it only when a run changed). */
  target() {
    const a = this.app.state;
    const s = this.state;
    const mtime = (run) => ((this.app.runs || []).find((r) => r.run === run) || {}).mtime;
    return JSON.stringify([a.run, a.host, a.infeed, a.view, s.base, s.baseHost, s.baseStep,
      s.step, mtime(a.run), mtime(s.base)]);
  }

  renderRunOptions() {
    const runs = this.app.runs || [];
    setChildren(this.runSelect, h('option', {value: ''}, '— nothing —'),
        runs.map((r) => h('option', {value: r.run}, r.run)));
    this.runSelect.value = runs.some((r) => r.run === this.state.base) ? this.state.base : '';
  }

  // ---------------------------------------------------------------- loading

  async load() {
    const token = ++this.loadToken;
    const s = this.state;
    const a = this.app.state;
    this.renderRunOptions();
    const active = Boolean(s.base && a.run && (this.app.runs || []).some((r) => r.run === s.base));
    this.app.root.classList.toggle('comparing', active);
    this.section.hidden = !active;
    this.hostLabel.hidden = !active;
    this.stepsEl.hidden = !active;
    this.loadedFor = this.target();
    if (!active) {
      this.disposeCharts();
      this.answer = null;
      this.setStatus('off');
      return;
    }
    this.setStatus('loading');
    const t0 = now();
    const cand = {run: a.run, host: a.host};
    const base = {run: s.base, host: s.baseHost};
    const params = {base: s.base, run: a.run, base_host: s.baseHost === '*' ? '' : s.baseHost,
      host: a.host === '*' ? '' : a.host, base_step: s.baseStep, step: s.step,
      infeed_outfeed: a.infeed || 'include',
      view: a.view && !['op', 'shapes'].includes(a.view) ? a.view : undefined};
    const [answer, hosts, baseProgram, candProgram] = await Promise.allSettled([
      this.app.loading.track(getJson('compare', params), 'comparison'),
      api.hosts(s.base), api.program(base), api.program(cand)]);
    if (token !== this.loadToken) return;
    this.timings.fetchMs = now() - t0;
    this.renderSideOptions(hosts.value, baseProgram.value, candProgram.value);
    if (answer.status === 'rejected') {
      this.disposeCharts();
      setChildren(this.errorEl, errorBox(answer.reason, 'the comparison'));
      for (const el of [this.summaryEl, this.notesEl, this.headEl]) setChildren(el);
      this.setContentHidden(true);
      this.setStatus('error');
      this.bump('seq');
      return;
    }
    setChildren(this.errorEl);
    this.setContentHidden(false);
    await this.render(answer.value, token);
    if (token !== this.loadToken) return;
    await frame();
    this.timings.totalMs = now() - t0;
    this.setStatus('ready');
    this.bump('seq');
  }

  setContentHidden(hidden) {
    for (const el of [this.programChartEl, this.programTableEl, this.opChartEl,
      this.opTableEl]) el.hidden = hidden;
  }

  renderSideOptions(hosts, baseProgram, candProgram) {
    const hostList = (hosts && hosts.hosts) || [];
    setChildren(this.hostSelect, h('option', {value: '*'}, `All hosts (${hostList.length})`),
        hostList.map((x) => h('option', {value: x}, x)));
    this.hostSelect.value = hostList.includes(this.state.baseHost) ? this.state.baseHost : '*';
    const steps = (program) => {
      const out = ['Total'];
      if (!program) return out;
      const col = program.columns.indexOf('step');
      const kind = program.columns.indexOf('record_type');
      for (const r of program.rows) {
        if (r[kind] === 'average') out.push('Average');
        if (r[kind] === 'step') out.push(r[col]);
      }
      return out;
    };
    const fill = (el, labels, value) => {
      setChildren(el, h('option', {value: ''}, 'Total (default)'),
          labels.filter((l) => l !== 'Total').map((l) => h('option', {value: l},
              l === 'Average' ? 'Average (per step)' : `Step ${l}`)));
      el.value = labels.includes(value) ? value : '';
    };
    fill(this.baseStepSelect, steps(baseProgram), this.state.baseStep || this.state.step);
    fill(this.stepSelect, steps(candProgram), this.state.step);
  }

  // ---------------------------------------------------------------- rendering

  async render(answer, token) {
    const t0 = now();
    this.answer = answer;
    this.pairs = columnarToObjects(answer);
    this.program = columnarToObjects(answer.program);
    for (const r of this.program) {
      r.record = programLabel(r);
      r.label = r.record;
    }
    this.timings.convertMs = now() - t0;
    const {base, cand} = answer;
    const side = (x) => `${x.run} (${x.host === '*' ? 'all hosts' : `host ${x.host}`}, ` +
        `${x.step === 'Total' ? 'Total' : x.step === 'Average' ? 'per step' : `step ${x.step}`})`;
    setChildren(this.headEl, h('span', {class: 'muted'}, 'base ', h('strong', {id: 'compare-base-label'},
        side(base)), ' → candidate ', h('strong', {id: 'compare-cand-label'}, side(cand))));
    setChildren(this.notesEl, (answer.notes || []).map((n) => h('li', {}, n)));
    setChildren(this.summaryEl, ...summaryPanel(answer.summary, base, cand));
    // "per core" in the candidate device's words (per GPU, per chip, per TensorCore).
    this.programTable.setColumns(perUnit(PROGRAM_PAIR_COLUMNS, cand.device));
    this.opTable.setColumns(perUnit(PAIR_COLUMNS, cand.device));
    await loadVega();
    if (token !== this.loadToken) return;
    const t1 = now();
    await this.renderProgram();
    this.timings.programChartMs = now() - t1;
    const t2 = now();
    await this.renderOps();
    this.timings.opChartMs = now() - t2;
    this.timings.renderMs = now() - t0;
  }

  async renderProgram() {
    const rows = this.program;
    // Each side's FLOP-mix roof is its Total's compute roof, as in the single-run chart.
    const total = rows.find((r) => r.cand_record_type === 'total' ||
        r.base_record_type === 'total');
    const mixPeak = total ? {base: total.base_peak_flop_rate, cand: total.cand_peak_flop_rate} :
      {};
    const g = compareGeometry(this.answer.base.device, this.answer.cand.device, sidesXY(rows),
        {dark: this.app.dark, mixPeak});
    const {points} = pairPoints(rows, g, 'total_time_us');
    const arrows = pairArrows(points, {all: true});
    const labels = points.filter((p) => p.side === 'cand' && p.pair.cand_record_type === 'total')
        .map((p) => ({px: p.px, py: p.py, label: p.pair.label}));
    this.programTable.setRows(rows);
    collapseIfEmpty(this.programChartEl, this.programEmptyEl, points.length, 'record');
    await this.programChart.setSpec(compareSpec(g, this.app.dark, {height: 340, labels: true,
      sizeTitle: 'Time (µs)'}), {...bySide(points), arrows, selected: [], labels});
    this.hover(this.programChart);
  }

  /** Tooltips from the view's pointer events: a point or arrow shows its pair and side. */
  hover(chart) {
    if (!chart.view) return;
    chart.view.addEventListener('mousemove', (event, item) => {
      const d = item && item.datum;
      this.tooltip.show(event, d && (d.pair ? tooltipDatum(d) : d.label ? d : null));
    });
    chart.view.addEventListener('mouseout', () => this.tooltip.hide());
  }

  async renderOps() {
    const g = compareGeometry(this.answer.base.device, this.answer.cand.device,
        sidesXY(this.pairs), {dark: this.app.dark});
    this.opGeometry = g;
    const {points, caveated, unplaced} = pairPoints(this.pairs, g, 'total_self_time_us');
    this.points = points;
    this.caveated = caveated;
    this.unplaced = unplaced;
    collapseIfEmpty(this.opChartEl, this.opEmptyEl, points.length, 'op');
    this.renderFilterMenus();
    this.filtered = filterPairs(this.pairs, this.state);
    const kept = new Set(this.filtered);
    this.arrows = pairArrows(points.filter((p) => kept.has(p.pair)));
    const shown = kept.size === this.pairs.length ? points : points.filter((p) => kept.has(p.pair));
    await this.opChart.setSpec(compareSpec(g, this.app.dark), {...this.chartSets(shown),
      arrows: this.arrows, selected: []});
    this.hover(this.opChart);
    this.opTable.setRows(this.filtered, {base: this.pairs});
    this.updateStatus();
  }

  renderFilterMenus() {
    const facets = (this.answer && this.answer.facets) || {};
    const cats = facets.category || [];
    const bounds = facets.bound_by || [];
    this.state.categories = this.state.categories.filter((c) => cats.includes(c));
    this.state.boundBy = this.state.boundBy.filter((c) => bounds.includes(c));
    const menu = (el, values, selected, key) => setChildren(el, values.map((v) =>
      h('label', {class: 'check'}, h('input', {type: 'checkbox', value: v,
        checked: selected.includes(v), onchange: () => this.setFilter({[key]:
          [...el.querySelectorAll('input:checked')].map((i) => i.value)})}), ` ${v}`)));
    menu(this.categoryMenu, cats, this.state.categories, 'categories');
    menu(this.boundMenu, bounds, this.state.boundBy, 'boundBy');
    const label = (name, sel) => `${name}: ${sel.length ? sel.join(', ') : 'all'}`;
    setChildren(this.categorySummary, label('Category', this.state.categories));
    setChildren(this.boundSummary, label('Bound by', this.state.boundBy));
  }

  async applyFilters() {
    if (!this.answer) return;
    this.renderFilterMenus();
    this.filtered = filterPairs(this.pairs, this.state);
    const kept = new Set(this.filtered);
    this.opTable.setRows(this.filtered, {base: this.pairs});
    const shown = this.points.filter((p) => kept.has(p.pair));
    this.arrows = pairArrows(shown);
    // Only the difference goes through the dataflow (Chart.setData): narrowing removes tuples.
    await this.opChart.setData({...this.chartSets(shown), arrows: this.arrows});
    this.updateStatus();
  }

  /**
   * The op chart's point sets for the shown points: every grey base point up to
   * BASE_POINTS_LIMIT (or when asked), else those of the pairs with arrows.
   */
  chartSets(shown) {
    const sets = bySide(shown);
    const total = sets.base_points.length;
    const limited = total > BASE_POINTS_LIMIT && this.state.allBase !== '1';
    if (limited) {
      const withArrow = new Set(this.arrows.map((a) => a.pair));
      sets.base_points = sets.base_points.filter((p) => withArrow.has(p.pair));
    }
    this.allBaseLabel.hidden = total <= BASE_POINTS_LIMIT;
    this.drawn = {base: sets.base_points.length, baseTotal: total,
      cand: sets.cand_points.length, limited};
    return sets;
  }

  updateStatus() {
    const d = this.drawn;
    setChildren(this.opStatusEl, `${fmtInt(this.filtered.length)} of ${fmtInt(this.pairs.length)} ` +
        `pairs: ${fmtInt(d.cand)} coloured and ${fmtInt(d.base)} grey base points` +
        (d.limited ? ` (of ${fmtInt(d.baseTotal)}: those with arrows; tick “All base points” ` +
          'to draw every one)' : '') + `, ${fmtInt(this.arrows.length)} arrows`,
    this.caveated ? ` · ${fmtInt(this.caveated)} records that are not roofline measurements ` +
      'listed, not placed' : '',
    this.unplaced ? ` · ${fmtInt(this.unplaced)} records without a FLOP rate listed, not ` +
      'placed' : '');
    Object.assign(this.opStatusEl.dataset, {pairs: String(this.filtered.length),
      basePoints: String(d.base), baseTotal: String(d.baseTotal), candPoints: String(d.cand),
      arrows: String(this.arrows.length), caveated: String(this.caveated),
      unplaced: String(this.unplaced || 0)});
  }

  async selectPair(index, {fromChart = false} = {}) {
    const pair = this.pairs[index];
    if (!pair) return;
    this.opTable.select(index);
    const selected = this.points.filter((p) => p.pair === pair);
    await this.opChart.setData({selected});
    this.section.dataset.selected = String(index);
    if (fromChart) {
      const tr = this.opTableEl.querySelector('tr.selected');
      if (tr && tr.scrollIntoView) tr.scrollIntoView({block: 'center'});
    }
  }

  disposeCharts() {
    this.programChart.dispose();
    this.opChart.dispose();
  }

  // ---------------------------------------------------------------- export

  exportTable(format) {
    if (this.answer) exportPairs(this.answer, this.opTable, this.state, format);
  }

  async exportChart(chart, what, format) {
    if (this.answer) await exportCompareChart(this.answer, chart, what, format);
  }
}
