// Exports of what the tab shows: the tables as CSV/JSON (rows after filters, search and
// sort), the charts as PNG/SVG. Methods of App (installed by app.js): `this` is the app.
import {toCsv} from './columns.js';
import {download, downloadText, slug} from './views/dom.js';

// Columns the tab adds to the API's rows (placement, labels): never exported.
const DERIVED = new Set(['px', 'py', 'at_floor', 'kind', 'series', 'flag']);

export class Exports {
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
}
