// Data of a run comparison (the /compare answer, docs/compare.md): columnar values to row
// objects, the browser-side filters (the API's semantics), table columns, CSV. No DOM.
import {fmtBool, fmtFrac, fmtNum, fmtText} from './columns.js';

/** `{columns, values}` (one array per column) → row objects, each with its index `_i`. */
export function columnarToObjects(table) {
  const columns = table.columns || [];
  const values = table.values || [];
  const n = values.length ? values[0].length : 0;
  const rows = new Array(n);
  for (let i = 0; i < n; i++) rows[i] = {_i: i};
  for (let j = 0; j < columns.length; j++) {
    const key = columns[j];
    const col = values[j];
    for (let i = 0; i < n; i++) rows[i][key] = col[i];
  }
  for (const r of rows) r.abs_delta_time_us = Math.abs(r.delta_time_us || 0);
  return rows;
}

/**
 * The /compare filters in the browser: category and bound-by exact on either side, name a
 * case-insensitive substring of either side's op name; plus the change (faster, slower, same,
 * new, removed, or `matched` for the first three).
 */
export function filterPairs(rows, {categories = [], boundBy = [], name = '', change = ''} = {}) {
  const cats = categories.length ? new Set(categories) : null;
  const bounds = boundBy.length ? new Set(boundBy) : null;
  const needle = (name || '').toLowerCase();
  if (!cats && !bounds && !needle && !change) return rows;
  const either = (set, r, key) => set.has(r[`base_${key}`]) || set.has(r[`cand_${key}`]);
  const has = (v) => v !== null && v !== undefined && String(v).toLowerCase().includes(needle);
  return rows.filter((r) => (!cats || either(cats, r, 'category')) &&
      (!bounds || either(bounds, r, 'bound_by')) &&
      (!needle || has(r.base_operation) || has(r.cand_operation)) &&
      (!change || (change === 'matched' ? r.status === 'matched' : r.change === change)));
}

const C = (key, label, format, extra = {}) => ({key, label, format,
  type: format === fmtText || format === fmtBool ? 'text' : 'num', ...extra});
const fmtSigned = (v) => (v === null || v === undefined ? '—' :
  `${v > 0 ? '+' : ''}${fmtNum(v)}`);
const fmtSignedPct = (v) => (v === null || v === undefined ? '—' :
  `${v > 0 ? '+' : ''}${fmtNum(v)}%`);
const fmtSignedFrac = (v) => (v === null || v === undefined ? '—' :
  `${v > 0 ? '+' : ''}${fmtNum(v * 100)} pt`);
const fmtX = (v) => (v === null || v === undefined ? '—' : `${fmtNum(v, 3)}×`);
const fmtShapes = (v) => (v && v.startsWith('shapes:') ? v.slice(7) :
  v && v.startsWith('grid:') ? v : '');

/** The op pairs table. */
export const PAIR_COLUMNS = [
  C('change', 'Change', fmtText, {title: 'faster / slower / same (matched), new, removed'}),
  C('match_rule', 'Matched by', fmtText,
    {title: 'name: same name and work; fingerprint: renamed, same work; name_only: same ' +
      'name, other shapes'}),
  C('program', 'Program', fmtText),
  C('cand_operation', 'Operation', fmtText),
  C('base_operation', 'Base operation', fmtText),
  C('cand_fingerprint', 'Shapes / grid', fmtShapes, {type: 'text',
    title: 'PyTorch input shapes or GPU kernel grid (candidate)'}),
  C('base_fingerprint', 'Base shapes / grid', fmtShapes, {type: 'text'}),
  C('cand_category', 'Category', fmtText),
  C('abs_delta_time_us', '|Δ time| (µs)', fmtNum, {title: 'size of the change in self time'}),
  C('delta_time_us', 'Δ self time (µs)', fmtSigned),
  C('delta_time_percent', 'Δ self time (%)', fmtSignedPct),
  C('speedup', 'Speedup', fmtX, {title: 'base time / candidate time'}),
  C('share_of_change', 'Share of the time change', fmtFrac),
  C('base_total_self_time_us', 'Base self time (µs)', fmtNum),
  C('cand_total_self_time_us', 'Self time (µs)', fmtNum),
  C('base_flop_rate', 'Base FLOP rate (GFLOP/s)', fmtNum),
  C('cand_flop_rate', 'FLOP rate (GFLOP/s)', fmtNum),
  C('delta_flop_rate', 'Δ FLOP rate', fmtSigned),
  C('base_operational_intensity', 'Base op. intensity (FLOP/B)', fmtNum),
  C('cand_operational_intensity', 'Op. intensity (FLOP/B)', fmtNum),
  C('delta_operational_intensity', 'Δ op. intensity', fmtSigned),
  C('base_bound_by', 'Base bound by', fmtText),
  C('cand_bound_by', 'Bound by', fmtText),
  C('base_roofline_efficiency', 'Base roofline efficiency', fmtFrac),
  C('cand_roofline_efficiency', 'Roofline efficiency', fmtFrac),
  C('delta_roofline_efficiency', 'Δ efficiency', fmtSignedFrac,
    {title: 'null when a side carries a caveat (not a measurement under its roof)'}),
  C('base_peak_flop_rate', 'Base roof (GFLOP/s)', fmtNum),
  C('cand_peak_flop_rate', 'Roof (GFLOP/s)', fmtNum),
  C('base_precision', 'Base precision', fmtText),
  C('cand_precision', 'Precision', fmtText),
  C('base_caveat', 'Base caveat', fmtText),
  C('cand_caveat', 'Caveat', fmtText),
  C('base_occurrences', 'Base # occurrences', fmtNum),
  C('cand_occurrences', '# Occurrences', fmtNum),
];

/** The program pairs table. */
export const PROGRAM_PAIR_COLUMNS = [
  C('record', 'Record', fmtText),
  C('match_rule', 'Matched by', fmtText),
  C('base_total_time_per_core_us', 'Base time per core (µs)', fmtNum),
  C('cand_total_time_per_core_us', 'Time per core (µs)', fmtNum),
  C('delta_time_percent', 'Δ time (%)', fmtSignedPct),
  C('speedup', 'Speedup', fmtX),
  C('base_flop_rate', 'Base FLOP rate (GFLOP/s)', fmtNum),
  C('cand_flop_rate', 'FLOP rate (GFLOP/s)', fmtNum),
  C('base_bound_by', 'Base bound by', fmtText),
  C('cand_bound_by', 'Bound by', fmtText),
  C('base_roofline_efficiency', 'Base roofline efficiency', fmtFrac),
  C('cand_roofline_efficiency', 'Roofline efficiency', fmtFrac),
  C('base_peak_flop_rate', 'Base roof (GFLOP/s)', fmtNum),
  C('cand_peak_flop_rate', 'Roof (GFLOP/s)', fmtNum),
];

/** Tooltip of a compared point or arrow (the pair's values). */
export const PAIR_TOOLTIP_COLUMNS = [
  C('side_label', 'Point', fmtText),
  C('record', 'Record', fmtText),
  ...PAIR_COLUMNS.filter((c) => !['abs_delta_time_us', 'share_of_change'].includes(c.key)),
  C('base_total_time_per_core_us', 'Base time per core (µs)', fmtNum),
  C('cand_total_time_per_core_us', 'Time per core (µs)', fmtNum),
];

/** A program pair's label: `Total`, `Average`, `Step 3`, `Host h0`, `Step 3 → 4`. */
export function programLabel(r) {
  const one = (side) => {
    const kind = r[`${side}_record_type`];
    if (kind === null || kind === undefined) return null;
    if (kind === 'step') return `Step ${r[`${side}_step`]}`;
    if (kind === 'host') return `Host ${r[`${side}_host`]}`;
    return r[`${side}_step`];
  };
  const b = one('base');
  const c = one('cand');
  return b === c || c === null ? b : b === null ? c : `${b} → ${c}`;
}

/** Columns (in API order) of the rows a CSV/JSON export writes: no derived keys. */
export function exportColumns(apiColumns) {
  return apiColumns.filter((c) => c !== '_i');
}

/** What a hovered point or arrow shows: its pair, which side it is, whether it is on the floor. */
export function tooltipDatum(datum) {
  const side = datum.side ? {side_label: datum.side === 'base' ? 'base' : 'candidate'} :
    {side_label: 'arrow: base → candidate'};
  return {...datum.pair, ...side, at_floor: datum.at_floor};
}
