// The op-level section: its filters, chart, category bars, table, top opportunities and the
// selected op. Methods of App (installed by app.js): `this` is the app.
import {categorySpec, opSpec, placePoints, POINT_FLAGS} from '../charts.js';
import {OP_COLUMNS, TOOLTIP_COLUMNS, fmtInt, visibleColumns, withDeviceMemories}
  from '../columns.js';
import {h, setChildren} from './dom.js';
import {errorBox} from './states.js';
import {detailsTable} from './tooltip.js';
import {topOpsSummary} from './top_ops.js';

const now = () => performance.now();
const nextFrame = () => new Promise((resolve) => requestAnimationFrame(() => resolve()));
// Which filter pass last kept a row (Chart.showOnly's predicate); a symbol, so exports and
// tooltips never see it.
const SHOWN = Symbol('shown');

/** An op's identity (not its rank, which changes with the infeed/outfeed variant): the key of
 * its table row, its selection and the `op` URL parameter. */
export const opKey = (r) => JSON.stringify([r.program_id, r.operation, r.precision, r.host]);

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
  /** 'kernels' in the kernel views, else 'ops'. */
  opNoun() {
    return this.state.view && this.state.view.startsWith('kernel') ? 'kernels' : 'ops';
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
}
