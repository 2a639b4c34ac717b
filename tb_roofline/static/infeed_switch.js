// The infeed/outfeed switch without a request or a re-render: the other variant of /ops and
// /program is fetched in the background after each load and swapped in. Methods of App
// (installed by app.js): `this` is the app.
import {api, tableToObjects} from './api.js';
import {placePoints} from './charts.js';
import {opKey, timeShareOf} from './views/op_section.js';

const now = () => performance.now();
// Columns that place, colour or size an op: the infeed/outfeed switch without a re-render
// needs them equal in both variants (they are: each op's own sums do not change).
const PLACED = ['operation', 'category', 'bottleneck_operational_intensity', 'flop_rate',
  'total_time_us', 'px', 'py', 'at_floor', 'caveat'];

export class InfeedSwitch {
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
}
