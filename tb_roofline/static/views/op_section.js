// The op-level section: its filters, chart, category bars, table, top opportunities and the
// selected op. An object that gets what it needs explicitly: `ctx` (view state, loaded data,
// tooltip, theme, timings; see app.js `sectionContext`) and owns its DOM, charts and table.
import {Chart, categorySpec, opSpec, placePoints, POINT_FLAGS, roofGeometry} from '../charts.js';
import {OP_COLUMNS, OP_ESSENTIAL, TOOLTIP_COLUMNS, fmtInt, perUnit, visibleColumns, withDeviceMemories}
  from '../columns.js';
import {filterRows} from '../filter_rule.js';
import {exportButtons, h, setChildren} from './dom.js';
import {roofLegend} from './roof_legend.js';
import {errorBox} from './states.js';
import {capNote, loadMore} from './op_cap.js';
import {DataTable} from './table.js';
import {detailsTable} from './tooltip.js';
import {topOpsSummary} from './top_ops.js';

const now = () => performance.now();
const nextFrame = () => new Promise((resolve) => requestAnimationFrame(() => resolve()));
// Which filter pass last kept a row (Chart.showOnly's predicate); a symbol, so exports and
// tooltips never see it.
const SHOWN = Symbol('shown');
// The "Rows" choice: the API's op views and groupings (`/ops?view=` / `/ops?rows=`).
export const ROW_LABELS = {op: 'Ops', shapes: 'Ops × input shapes', kernel: 'GPU kernels',
  kernel_hw: 'GPU kernels (HW counters)'};

/** An op's identity (not its rank, which changes with the infeed/outfeed variant): the key of
 * its table row, its selection and the `op` URL parameter. */
export const opKey = (r) => JSON.stringify([r.program_id, r.operation, r.precision, r.host,
  ...(r.shapes ? [r.shapes] : [])]);

/** The key (opKey) of the op row with this identity (guidance findings link by identity). */
export function opKeyOf(ops, op) {
  const row = (ops || []).find((r) => r.program_id === op.program_id &&
      r.operation === op.operation && r.precision === op.precision);
  return row ? opKey(row) : null;
}

/** 1 / the variant's time denominator (µs): time share = total time × this. */
export function timeShareOf(rows) {
  let best = null;
  for (const r of rows || []) {
    if (r.total_time_us > 0 && r.time_fraction > 0 &&
        (!best || r.total_time_us > best.total_time_us)) best = r;
  }
  return best ? best.time_fraction / best.total_time_us : 0;
}

export class OpSection {
  /**
   * @param ctx {state, data, dark, tooltip, timings, persist(), bump(name), subtitle(),
   *   memoryIds(), setRows(value), exportTable(), exportChart()}
   */
  constructor(ctx) {
    this.ctx = ctx;
    this.filtered = [];
    this.chartEl = h('div', {id: 'op-chart', class: 'chart'});
    this.catChartEl = h('div', {id: 'category-chart', class: 'chart'});
    this.tableEl = h('div', {id: 'op-table-wrap'});
    this.errorEl = h('div', {class: 'section-error'});
    this.capEl = h('div', {id: 'op-cap-wrap'});  // an answer cut at the server's size cap
    this.statusEl = h('div', {id: 'op-status', class: 'muted'});
    this.selectionEl = h('div', {id: 'op-selection', class: 'selection'});
    this.topOpsEl = h('div', {id: 'top-ops', class: 'top-ops'});
    this.legendEl = h('div', {class: 'roof-legend', id: 'op-roofs'});
    this.emptyFilterText = h('span', {}, 'No op matches the filters. ');
    this.emptyFilterEl = h('p', {id: 'no-match', class: 'notice', hidden: true},
        this.emptyFilterText, h('button', {type: 'button',
          onclick: () => this.clearFilters()}, 'Clear filters'));
    this.viewSelect = h('select', {id: 'view-select', 'aria-label': 'Rows of the op table',
      onchange: () => ctx.setRows(this.viewSelect.value)});
    this.viewLabel = h('label', {hidden: true, title: 'one row per op, per op and input ' +
      'shapes, or per GPU kernel'}, 'Rows: ', this.viewSelect);
    this.categoryMenu = h('div', {class: 'menu-list', id: 'category-options'});
    this.boundMenu = h('div', {class: 'menu-list', id: 'bound-options'});
    this.categorySummary = h('summary', {}, 'Category: all');
    this.boundSummary = h('summary', {}, 'Bound by: all');
    // No fixed debounce: a keystroke is applied at once; keystrokes typed while a filter pass
    // runs are coalesced into one pass after it (queueFilter).
    this.nameInput = h('input', {type: 'search', id: 'name-filter', placeholder: 'Op name contains…',
      'aria-label': 'Filter ops by name',
      oninput: () => this.queueFilter({name: this.nameInput.value.trim()})});
    this.el = h('section', {id: 'op-section'},
        h('div', {class: 'section-head'}, h('h2', {}, 'Op-level roofline'),
            exportButtons('op', [
              ['CSV', () => ctx.exportTable('op', 'csv', this.table)],
              ['JSON', () => ctx.exportTable('op', 'json', this.table)],
              ['PNG', () => ctx.exportChart(this.chart, 'ops', 'png')],
              ['SVG', () => ctx.exportChart(this.chart, 'ops', 'svg')]])),
        h('div', {class: 'filters', id: 'op-filters'},
            this.viewLabel,
            h('details', {class: 'menu', id: 'category-filter'}, this.categorySummary,
                this.categoryMenu),
            h('details', {class: 'menu', id: 'bound-filter'}, this.boundSummary, this.boundMenu),
            this.nameInput,
            h('button', {type: 'button', id: 'clear-filters', onclick: () => this.clearFilters()},
                'Clear filters'),
            this.statusEl),
        this.errorEl, this.capEl, this.emptyFilterEl, this.chartEl, this.legendEl,
        h('p', {class: 'hint'}, 'Colour: category · size: share of time · shape: measured ' +
            '(●), not a measurement (◆, see its caveat) or above its roof (▲) · ✚ Program. ' +
            'Scroll to zoom, drag to pan, double-click to reset, click a point for every metric.'),
        this.selectionEl, this.topOpsEl,
        h('h3', {}, 'Ops'), this.tableEl,
        h('div', {class: 'cat-wrap'},
            h('div', {class: 'section-head'}, h('h3', {}, 'Self time per category'),
                exportButtons('category', [
                  ['PNG', () => ctx.exportChart(this.catChart, 'categories', 'png')],
                  ['SVG', () => ctx.exportChart(this.catChart, 'categories', 'svg')]])),
            this.catChartEl));
    this.chart = new Chart(this.chartEl, {tooltip: ctx.tooltip.handler,
      onHover: (datum) => this.highlight(datum),
      onClick: (datum) => {
        if (datum && datum.record_type === 'op') this.selectOp(opKey(datum), {fromChart: true});
      }});
    this.chart.prerenderSubsets = () => this.prerenderSubsets();
    this.catChart = new Chart(this.catChartEl, {tooltip: ctx.tooltip.handler,
      onClick: (datum) => {
        if (datum && datum.category && datum.self_time_us !== undefined) {
          this.setFilter({categories: [datum.category]});
        }
      }});
    // The category bars have a fixed plot width (see categorySpec): re-fit them to their card
    // when it changes size.
    this.catWidth = 0;
    if (typeof ResizeObserver !== 'undefined') {
      new ResizeObserver(() => this.refitCategories()).observe(this.catChartEl);
    }
    this.table = new DataTable(this.tableEl, {id: 'op-table', columns: OP_COLUMNS,
      rowKey: opKey, pageSize: 50, defaultSort: {key: 'rank', dir: 'asc'},
      essential: OP_ESSENTIAL, stickyKey: 'operation',
      searchKeys: ['operation', 'shapes', 'category', 'program', 'source', 'tf_op', 'caveat'],
      onRowClick: (r) => this.selectOp(opKey(r), {fromTable: true})});
  }

  get state() {
    return this.ctx.state;
  }

  /** 'kernels' in the kernel views, else 'ops'. */
  opNoun() {
    return this.state.view && this.state.view.startsWith('kernel') ? 'kernels' : 'ops';
  }

  renderViewSelect() {
    const d = this.ctx.data;
    const views = [...new Set([...((d && d.rowChoices) || ['op'])])];
    setChildren(this.viewSelect, views.map((v) => h('option', {value: v}, ROW_LABELS[v] || v)));
    this.viewSelect.value = views.includes(this.state.view) ? this.state.view : views[0];
    this.viewLabel.hidden = views.length < 2;
  }

  /** The op chart's geometry: its ops and the program's Total. */
  geometry() {
    const d = this.ctx.data;
    const total = (d.program || []).find((r) => r.record_type === 'total');
    return roofGeometry(d.device, [...(d.ops || []), ...(total ? [total] : [])],
        {dark: this.ctx.dark, roofRecords: d.ops || []});
  }

  async render() {
    const d = this.ctx.data;
    this.renderViewSelect();
    const hideAll = (hidden) => {
      for (const el of [this.chartEl, this.catChartEl, this.tableEl, this.legendEl]) {
        el.hidden = hidden;
      }
    };
    setChildren(this.capEl, d.ops && !d.errors.ops ?
        capNote(d, this.state, this.opNoun(), () => this.loadMore()) : null);
    if (d.errors.ops || !d.ops) {
      setChildren(this.errorEl, errorBox(d.errors.ops, 'the op-level roofline'));
      this.dispose();
      hideAll(true);
      return;
    }
    setChildren(this.errorEl);
    const none = !d.ops.length;
    hideAll(none);
    if (none) {
      this.dispose();
      setChildren(this.errorEl, h('p', {class: 'notice', id: 'no-ops'},
          'No op-level records: this profile has no ops with FLOPs or bytes ' +
          '(see the diagnostics above).'));
      this.filtered = [];
      this.table.setRows([]);
      this.statusEl.dataset.plotted = '0';
      this.statusEl.dataset.total = '0';
      setChildren(this.statusEl);
      setChildren(this.topOpsEl);
      return;
    }
    const g = this.geometry();
    this.geometryNow = g;
    placePoints(d.ops, g);
    // The filter menus list the server's facets (of every row, not only those loaded).
    const facets = d.facets || {};
    this.categories = facets.category || [];
    this.bounds = facets.bound_by || [];
    // Drop filter values (e.g. from a link) the run does not have.
    this.state.categories = this.state.categories.filter((c) => this.categories.includes(c));
    this.state.boundBy = this.state.boundBy.filter((c) => this.bounds.includes(c));
    this.renderFilterMenus();
    this.table.setColumns(perUnit(visibleColumns(
        withDeviceMemories(OP_COLUMNS, d.device && d.device.memories), this.ctx.memoryIds(),
        d.ops, d.opColumns, d.device && d.device.kind), d.device));
    setChildren(this.legendEl, roofLegend(g, d.device));
    const programTotal = this.programTotal(d.program);
    // The chart holds every op; filters only choose which of its items are shown.
    this.chartCategories = this.categories;
    const t0 = now();
    const flags = [...new Set(d.ops.map((r) => r.flag))];
    await this.chart.setSpec(opSpec(g, this.categories, this.ctx.dark, timeShareOf(d.ops),
        {flags, subtitle: this.ctx.subtitle(), what: this.opNoun()}),
    {ops: d.ops, program: programTotal, selected: []});
    this.ctx.timings.opChartMs = now() - t0;
    this.filtered = this.markShown();
    await this.chart.showOnly('points', 'ops', this.shownPredicate(),
        {cacheKey: this.filterKey()});
    this.ctx.timings.opChartPoints = this.filtered.length;
    await this.renderCategories();
    this.table.setRows(this.filtered, {base: d.ops});
    this.updateStatus();
    if (this.state.op) {
      if (d.ops.some((r) => opKey(r) === this.state.op)) await this.selectOp(this.state.op, {});
      else this.clearSelection();
    }
  }

  /** The next page of a capped answer, appended; the section drawn again with it. */
  async loadMore() {
    const button = this.capEl.querySelector('button');
    if (button) button.disabled = true;
    try {
      await loadMore(this.ctx.data, this.state);
    } catch (e) {
      setChildren(this.errorEl, errorBox(e, 'the next page of ' + this.opNoun()));
      if (button) button.disabled = false;
      return;
    }
    await this.render();
  }

  async renderCategories() {
    this.catWidth = this.catChartEl.clientWidth;
    await this.catChart.setSpec(categorySpec(this.categories, this.ctx.dark, this.catWidth),
        {cats: this.categoryRows(this.filtered)});
  }

  refitCategories() {
    const width = this.catChartEl.clientWidth;
    if (!this.catChart.view || !width || Math.abs(width - this.catWidth) < 8) return;
    clearTimeout(this.catTimer);
    this.catTimer = setTimeout(() => this.renderCategories(), 100);
  }

  /** A copy of the program's Total placed on this chart's axes (the ✚ Program point). */
  programTotal(program) {
    const g = this.geometryNow;
    return placePoints((program || []).filter((r) => r.record_type === 'total')
        .map((r) => ({...r})), g);
  }

  dispose() {
    this.chart.dispose();
    this.catChart.dispose();
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

  /** The ops the filters keep: the API's rule (filter_rule.js). */
  applyFilterRows(ops = (this.ctx.data && this.ctx.data.ops) || [], state = this.state) {
    return filterRows(ops, state);
  }

  /**
   * The op chart's subsets worth pre-rendering while the user does nothing (Chart
   * .prerenderSubsets): every op (clearing the filters) and the other infeed/outfeed variant,
   * with the current filters and without, each named as showOnly will name it.
   */
  prerenderSubsets() {
    const d = this.ctx.data;
    if (!d || !d.ops || !this.chart.view) return [];
    const s = this.state;
    const other = s.infeed === 'include' ? 'exclude' : 'include';
    const cleared = {...s, categories: [], boundBy: [], name: ''};
    const all = this.chart.view.data('ops').length;
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

  /** The status line, the empty-filter notice and the top opportunities of the shown ops. */
  updateStatus() {
    const d = this.ctx.data;
    const n = this.filtered.length;
    const noun = this.opNoun();
    const floor = this.filtered.reduce((acc, r) => acc + (r.at_floor ? 1 : 0), 0);
    const caveated = this.filtered.reduce((acc, r) => acc +
        (r.flag && r.flag !== POINT_FLAGS[0] ? 1 : 0), 0);
    setChildren(this.statusEl, `Plotted ${fmtInt(n)} of ${fmtInt(d.ops.length)} ${noun}`,
        floor ? ` · ${fmtInt(floor)} without a FLOP rate in the box at the bottom left` : '',
        caveated ? ` · ${fmtInt(caveated)} not a roofline measurement (◆/▲, see Caveat)` : '',
        this.state.infeed === 'exclude' ? ' · infeed/outfeed excluded' : '');
    this.statusEl.dataset.plotted = String(n);
    this.statusEl.dataset.total = String(d.ops.length);
    this.emptyFilterEl.hidden = n > 0 || !d.ops.length;
    this.catChartEl.hidden = n === 0;
    setChildren(this.emptyFilterText, `No ${noun} match the filters. `);
    // Top opportunities follow the filters: the shown ops only.
    const filtered = n !== d.ops.length;
    setChildren(this.topOpsEl, topOpsSummary(this.filtered, noun,
        (row) => this.selectOp(opKey(row), {fromChart: true}), {filtered}));
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
    const all = this.chart.view ? this.chart.view.data('ops').length : -1;
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
    this.table.setRows(this.filtered, {base: this.ctx.data.ops});
    this.updateStatus();
    // One run of the op chart (the shown points and whatever the caller changed with
    // `run: false`); the category bars are updated in place (changeset `modify`).
    await Promise.all([
      this.chart.showOnly('points', 'ops', this.shownPredicate(),
          {cacheKey: this.filterKey(), run: false})
          .then(() => this.chart.view && this.chart.view.runAsync()),
      this.catChart.updateRows('cats', this.categoryRows(this.filtered), 'category',
          ['self_time_us', 'ops', 'share']),
    ]);
  }

  async setFilter(patch) {
    Object.assign(this.state, patch);
    if ('name' in patch && this.nameInput.value.trim() !== patch.name) {
      this.nameInput.value = patch.name;
    }
    this.ctx.persist();
    const d = this.ctx.data;
    if (!d || !d.ops) return;
    const t0 = now();
    await this.applyFilters();
    this.ctx.timings.lastFilterMs = now() - t0;
    this.ctx.bump('filterSeq');
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

  /** The hovered point's binding roof drawn thicker (the selected op's when none). */
  highlight(datum) {
    const row = datum && datum.roof_id !== undefined ? datum : this.selectedRow();
    this.chart.setParam('hl_roof', row ? row.roof_id || '' : '');
  }

  selectedRow() {
    const d = this.ctx.data;
    return this.state.op && d && d.ops ? d.ops.find((r) => opKey(r) === this.state.op) || null :
      null;
  }

  /** Selects an op by its identity (opKey): table row, chart ring, details, URL. */
  async selectOp(key, {fromChart = false} = {}) {
    const d = this.ctx.data;
    const row = d && d.ops ? d.ops.find((r) => opKey(r) === key) : null;
    if (!row) return;
    this.state.op = key;
    this.ctx.persist();
    const inTable = this.table.select(key);
    await this.chart.setData({selected: [row]});
    this.highlight(null);
    const tooltip = this.ctx.tooltip;
    setChildren(this.selectionEl,
        h('div', {class: 'selection-head'}, h('span', {}, 'Selected: ',
            h('strong', {class: 'selected-name', title: row.operation}, row.operation),
            ` (rank ${row.rank}, ${row.category}${row.precision ? `, ${row.precision}` : ''}, ` +
            `bound by ${row.bound_by}${row.binding_roof ? `: ${row.binding_roof}` : ''})`),
        inTable ? '' : h('span', {class: 'muted'}, ' — hidden by the current filters'), ' ',
        h('button', {type: 'button', onclick: () => this.clearSelection()}, 'Clear')),
        h('details', {class: 'selection-details'}, h('summary', {}, 'Every metric'),
            detailsTable(row, tooltip.columns || TOOLTIP_COLUMNS, tooltip.memoryIds)));
    this.selectionEl.dataset.key = key;
    this.selectionEl.dataset.rank = String(row.rank);
    if (fromChart) {
      const tr = this.tableEl.querySelector('tr.selected');
      if (tr && tr.scrollIntoView) tr.scrollIntoView({block: 'center'});
    }
  }

  clearSelection() {
    this.state.op = '';
    this.ctx.persist();
    this.table.select(null);
    this.chart.setData({selected: []});
    this.highlight(null);
    setChildren(this.selectionEl);
    delete this.selectionEl.dataset.key;
    delete this.selectionEl.dataset.rank;
  }
}
