// Data of a run comparison (the /compare answer, docs/compare.md): columnar values to row
// objects, the browser-side filters (the API's semantics), table columns, CSV. No DOM.
import {fmtBool, fmtFrac, fmtNum, fmtText, fmtTime, sideColumn, sideMeasured}
  from './columns.js';
import {filterRows} from './filter_rule.js';

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
  for (const r of rows) {
    r.abs_delta_time_us = Math.abs(r.delta_time_us || 0);
    // Removed ops have no candidate name: the pair is named by the side that has it.
    r.pair_operation = r.cand_operation ?? r.base_operation ?? null;
  }
  return rows;
}

/**
 * The /compare filters in the browser (serve/service/compare.py `filter_pairs`): the API's rule on
 * either side (filter_rule.js), then the change (faster, slower, same, new, removed, or
 * `matched`: the pairs both sides have).
 */
export function filterPairs(rows, {categories = [], boundBy = [], name = '', change = ''} = {}) {
  const kept = filterRows(rows, {categories, boundBy, name}, ['base_', 'cand_']);
  if (!change) return kept;
  return kept.filter((r) => (change === 'matched' ? r.status === 'matched' : r.change === change));
}

const C = (key, label, format, extra = {}) => ({key, label, format: (v) => format(v),
  type: format === fmtText || format === fmtBool ? 'text' : 'num', ...extra});
const fmtSigned = (v) => (v === null || v === undefined ? '—' :
  `${v > 0 ? '+' : ''}${fmtNum(v)}`);
const fmtSignedTime = (v) => (v === null || v === undefined ? '—' :
  `${v > 0 ? '+' : ''}${fmtTime(v)}`);
const fmtSignedPct = (v) => (v === null || v === undefined ? '—' :
  `${v > 0 ? '+' : ''}${fmtNum(v)}%`);
const fmtSignedFrac = (v) => (v === null || v === undefined ? '—' :
  `${v > 0 ? '+' : ''}${fmtNum(v * 100)} pt`);
const fmtX = (v) => (v === null || v === undefined ? '—' : `${fmtNum(v, 3)}×`);
const fmtShapes = (v) => (v && v.startsWith('shapes:') ? v.slice(7) :
  v && v.startsWith('grid:') ? `grid ${v.slice(5)}` : '—');
/**
 * A change between the sides of a measured quantity: "—" unless both sides measure it
 * (`needs`, sideMeasured), so an op without FLOPs never reads "Δ 0".
 */
const D = (key, label, format, needs, extra = {}) => {
  const known = (v, row) => sideMeasured(row, 'base', needs) && sideMeasured(row, 'cand', needs);
  return {key, label, type: 'num', known,
    format: (v, row) => (row && !known(v, row) ? '—' : format(v)), ...extra};
};
// One side's column of the registry (columns.js): `cand_<key>` / `base_<key>`.
const cand = (key, extra = {}) => sideColumn('cand', key, extra);
const base = (key, extra = {}) => sideColumn('base', key, extra);

/** The op pairs table: what changed first (Δ columns), then both sides. */
export const PAIR_COLUMNS = [
  C('change', 'Change', fmtText, {title: 'faster / slower / same (matched), new, removed'}),
  C('pair_operation', 'Operation', fmtText, {wide: true,
    title: "the candidate's op name (the base's for a removed op)"}),
  C('delta_time_us', 'Δ self time', fmtSignedTime),
  C('delta_time_percent', 'Δ self time (%)', fmtSignedPct),
  C('speedup', 'Speedup', fmtX, {title: 'base time / candidate time'}),
  C('share_of_change', 'Share of the time change', fmtFrac),
  D('delta_roofline_efficiency', 'Δ efficiency', fmtSignedFrac, ['peak', 'flops'],
    {title: 'null when a side carries a caveat (not a measurement under its roof)'}),
  D('delta_flop_rate', 'Δ FLOP rate (GFLOP/s)', fmtSigned, ['flops']),
  D('delta_operational_intensity', 'Δ op. intensity', fmtSigned, ['flops', 'bytes']),
  C('abs_delta_time_us', '|Δ time|', fmtTime, {title: 'size of the change in self time'}),
  C('match_rule', 'Matched by', fmtText,
    {title: 'name: same name and work; fingerprint: renamed, same work; name_only: same ' +
      'name, other shapes; op: every shape of the op merged on each side'}),
  C('program', 'Program', fmtText, {wide: true}),
  base('operation', {label: 'Base operation'}),
  C('cand_fingerprint', 'Shapes / grid', fmtShapes, {type: 'text', wide: true,
    title: 'PyTorch input shapes or GPU kernel grid (candidate)'}),
  C('base_fingerprint', 'Base shapes / grid', fmtShapes, {type: 'text', wide: true}),
  cand('category'),
  base('total_self_time_us', {label: 'Base self time'}),
  cand('total_self_time_us', {label: 'Self time'}),
  base('flop_rate', {label: 'Base FLOP rate'}),
  cand('flop_rate'),
  base('operational_intensity', {label: 'Base op. intensity (FLOP/B)'}),
  cand('operational_intensity'),
  base('bound_by', {label: 'Base bound by'}),
  cand('bound_by'),
  base('roofline_efficiency', {label: 'Base roofline efficiency'}),
  cand('roofline_efficiency'),
  base('peak_flop_rate', {label: 'Base compute roof'}),
  cand('peak_flop_rate'),
  base('precision', {label: 'Base precision'}),
  cand('precision'),
  base('caveat', {label: 'Base caveat'}),
  cand('caveat'),
  base('occurrences', {label: 'Base # occurrences'}),
  cand('occurrences'),
];

/** The op pairs table's columns at first (the rest in its column chooser). */
export const PAIR_ESSENTIAL = ['change', 'pair_operation', 'delta_time_us',
  'delta_time_percent', 'speedup', 'delta_roofline_efficiency', 'match_rule', 'cand_category',
  'base_total_self_time_us', 'cand_total_self_time_us', 'base_flop_rate', 'cand_flop_rate',
  'cand_bound_by'];

/** The program pairs table. */
export const PROGRAM_PAIR_COLUMNS = [
  C('record', 'Record', fmtText),
  C('delta_time_percent', 'Δ time (%)', fmtSignedPct),
  C('speedup', 'Speedup', fmtX),
  C('match_rule', 'Matched by', fmtText),
  base('total_time_per_core_us', {label: 'Base time per core'}),
  cand('total_time_per_core_us'),
  base('flop_rate', {label: 'Base FLOP rate'}),
  cand('flop_rate'),
  base('bound_by', {label: 'Base bound by'}),
  cand('bound_by'),
  base('roofline_efficiency', {label: 'Base roofline efficiency'}),
  cand('roofline_efficiency'),
  base('peak_flop_rate', {label: 'Base compute roof'}),
  cand('peak_flop_rate'),
];

/** Tooltip of a compared point or arrow (the pair's values). */
export const PAIR_TOOLTIP_COLUMNS = [
  C('side_label', 'Point', fmtText),
  C('record', 'Record', fmtText),
  ...PAIR_COLUMNS.filter((c) => !['abs_delta_time_us', 'share_of_change'].includes(c.key)),
  base('total_time_per_core_us', {label: 'Base time per core'}),
  cand('total_time_per_core_us'),
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
  return apiColumns.filter((c) => c !== '_i' && c !== 'pair_operation');
}

/** What a hovered point or arrow shows: its pair, which side it is, whether it is on the floor. */
export function tooltipDatum(datum) {
  const side = datum.side ? {side_label: datum.side === 'base' ? 'base' : 'candidate'} :
    {side_label: 'arrow: base → candidate'};
  return {...datum.pair, ...side, at_floor: datum.at_floor};
}
