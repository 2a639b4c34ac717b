// The infeed/outfeed switch without a request or a re-render: the other variant of /ops and
// /program is fetched in the background after each load and swapped in. An object that gets
// the view context, the API and the two sections explicitly.
import {tableToObjects} from './api.js';
import {opKey, timeShareOf} from './views/op_section.js';

// Columns that place, colour or size an op: the infeed/outfeed switch without a re-render
// needs them equal in both variants (they are: each op's own sums do not change).
const PLACED = ['operation', 'category', 'bottleneck_operational_intensity', 'flop_rate',
  'total_time_us', 'px', 'py', 'at_floor', 'caveat', 'measurement'];

export class InfeedSwitch {
  /** @param ctx the sections' context (app.js), `api` the data access, `sections`
   * {program: ProgramSection, ops: OpSection} */
  constructor(ctx, api, {program, ops}) {
    this.ctx = ctx;
    this.api = api;
    this.program = program;
    this.ops = ops;
  }

  /**
   * After a load, fetches the other infeed/outfeed variant of /ops and /program in the
   * background, so the toggle needs no request and no re-render (switchTo).
   */
  prefetch() {
    const d = this.ctx.data;
    const state = this.ctx.state;
    if (!d || !d.ops || !d.ops.length || !d.program || d.errors.ops || d.errors.program ||
        d.opsCap || !this.ops.chart.view) return;  // a capped answer: the toggle refetches
    const loaded = state.infeed;
    const other = loaded === 'include' ? 'exclude' : 'include';
    const sel = {run: state.run, host: state.host, infeed: other, view: state.view};
    const byKey = new Map();
    for (const r of d.ops) byKey.set(opKey(r), r);
    if (byKey.size !== d.ops.length) return;  // No unique key: the toggle refetches.
    d.variants = {[loaded]: {ops: d.ops, program: d.program, facets: d.facets,
      opsTotal: d.opsTotal}};
    d.variantsReady = Promise.all([this.api.ops(sel), this.api.program(sel)]).then(
        ([ops, program]) => {
          if (this.ctx.data !== d) return;
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
          this.ops.chart.schedulePrerender();  // Its bitmap, in idle time.
        }).catch(() => {});  // The toggle then refetches as before.
  }

  /**
   * The infeed/outfeed toggle without a request or a re-render: the op rows stay the same
   * objects (so the chart keeps its items), their changed columns (time share, rank, self-time
   * percentages) are swapped in, the ops the variant lacks are hidden like filtered ones, and
   * the program records are replaced. Returns false (the caller reloads) when the prefetched
   * variant is missing or its points do not fit the current axes.
   */
  async switchTo(value) {
    const d = this.ctx.data;
    if (!d || !d.variantsReady) return false;
    await d.variantsReady;
    if (this.ctx.data !== d || !d.variants[value] || !d.variants[value].values) return false;
    const v = d.variants[value];
    if (v.ops === d.ops) return true;
    const opSection = this.ops;
    if ((v.facets.category || []).some((c) => !opSection.chartCategories.includes(c))) {
      return false;
    }
    // Program records of that variant, placed on the current axes; they must fit.
    const program = v.program.map((r) => ({...r}));
    const total = opSection.programTotal(program);
    const g = opSection.geometryNow;
    if (!total.every((r) => r.px >= g.xDomain[0] && r.px <= g.xDomain[1] &&
        r.py >= g.yDomain[0] && r.py <= g.yDomain[1])) return false;
    const previous = d.program;
    if (!(await this.program.replaceRecords(program))) {
      d.program = previous;
      return false;
    }
    const state = this.ctx.state;
    const selected = state.op ? d.ops.find((r) => opKey(r) === state.op) : null;
    const cols = v.cols;
    v.ops.forEach((obj, i) => {
      const values = v.values[i];
      for (let j = 0; j < cols.length; j++) obj[cols[j]] = values[j];
    });
    d.ops = v.ops;
    d.facets = v.facets;
    d.opsTotal = v.opsTotal;
    d.program = program;
    opSection.categories = d.facets.category && d.facets.category.length ? d.facets.category :
      opSection.categories;
    opSection.bounds = d.facets.bound_by && d.facets.bound_by.length ? d.facets.bound_by :
      opSection.bounds;
    state.categories = state.categories.filter((c) => opSection.categories.includes(c));
    state.boundBy = state.boundBy.filter((c) => opSection.bounds.includes(c));
    // One run of the op chart for the Program point, the legend and the shown ops.
    await opSection.chart.setData({program: total}, {run: false});
    await opSection.chart.setParam('time_share', timeShareOf(d.ops), {run: false});
    await opSection.applyFilters();
    if (selected && d.ops.includes(selected)) await opSection.selectOp(opKey(selected), {});
    else if (selected) opSection.clearSelection();
    return true;
  }
}
