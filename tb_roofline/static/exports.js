// Exports of what the tab shows: the tables as CSV/JSON (rows after filters, search and
// sort), the charts as PNG/SVG. Plain functions of what they export.
import {toCsv} from './columns.js';
import {download, downloadText, slug} from './views/dom.js';

// Columns the tab adds to the API's rows (placement, labels): never exported.
const DERIVED = new Set(['px', 'py', 'at_floor', 'kind', 'series', 'flag', 'roof_id',
  'binding_roof']);

export function fileBase(state, what) {
  return `roofline_${slug(state.run)}_${slug(state.host === '*' ? 'all-hosts' :
    state.host)}_${what}`;
}

/** Downloads a table's visible rows (`table`: a DataTable) with the API's columns. */
export function exportTable(state, data, level, format, table) {
  if (!data) return;
  const rows = table.visibleRows();
  const apiColumns = (level === 'program' ? data.programColumns : data.opColumns) ||
      Object.keys(rows[0] || {}).filter((k) => !DERIVED.has(k));
  const name = fileBase(state, level === 'program' ? 'program' : 'ops');
  if (format === 'csv') {
    downloadText(toCsv(rows, apiColumns), `${name}.csv`, 'text/csv');
    return;
  }
  const clean = rows.map((r) => Object.fromEntries(apiColumns.map((k) => [k, r[k] ?? null])));
  const doc = {run: state.run, host: state.host, infeed_outfeed: state.infeed,
    view: level === 'program' ? undefined : state.view,
    filters: level === 'program' ? {} : {category: state.categories,
      bound_by: state.boundBy, name: state.name, search: table.search},
    columns: apiColumns, rows: clean};
  downloadText(JSON.stringify(doc, null, 1), `${name}.json`, 'application/json');
}

export async function exportChart(state, chart, what, format) {
  if (!chart.view) return;
  const url = await chart.imageUrl(format);
  download(url, `${fileBase(state, what)}.${format}`);
}
