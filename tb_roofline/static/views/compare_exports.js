// Exports of the comparison: the pairs shown (after filters, search and sort) as CSV/JSON with
// both sides, the summary and the filters; the charts as PNG/SVG.
import {exportColumns} from '../compare_data.js';
import {toCsv} from '../columns.js';
import {download, downloadText, slug} from './dom.js';

function fileBase(answer, what) {
  return `roofline_compare_${slug(answer.base.run)}_vs_${slug(answer.cand.run)}_${what}`;
}

/** The visible rows of `table` (a DataTable of pairs) with the API's columns. */
export function exportPairs(answer, table, state, format) {
  const rows = table.visibleRows();
  const columns = exportColumns(answer.columns);
  const name = fileBase(answer, 'ops');
  if (format === 'csv') {
    downloadText(toCsv(rows, columns), `${name}.csv`, 'text/csv');
    return;
  }
  const s = state;
  const doc = {base: answer.base, cand: answer.cand, summary: answer.summary,
    notes: answer.notes, filters: {category: s.categories, bound_by: s.boundBy,
      name: s.name, change: s.change, search: table.search},
    columns, rows: rows.map((r) => Object.fromEntries(columns.map((k) => [k, r[k] ?? null])))};
  downloadText(JSON.stringify(doc, null, 1), `${name}.json`, 'application/json');
}

export async function exportCompareChart(answer, chart, what, format) {
  if (!chart.view) return;
  download(await chart.imageUrl(format), `${fileBase(answer, what)}.${format}`);
}
