// Formatting and the column definitions of the tables, tooltips and exports. No DOM here.

const EMPTY = '—';

const formatters = new Map();
function formatter(digits) {
  // Number.prototype.toLocaleString builds a formatter per call (slow on 20k-row tables).
  let f = formatters.get(digits);
  if (!f) {
    f = new Intl.NumberFormat('en-US', {maximumFractionDigits: digits});
    formatters.set(digits, f);
  }
  return f;
}

export function fmtNum(value, digits = 2) {
  if (value === null || value === undefined || value === '') return EMPTY;
  if (typeof value !== 'number') return String(value);
  if (!Number.isFinite(value)) return String(value);
  const abs = Math.abs(value);
  if (abs !== 0 && (abs < 10 ** -digits || abs >= 1e15)) return value.toExponential(digits);
  return formatter(digits).format(value);
}

export const fmtInt = (v) => fmtNum(v, 0);
/** A 0..1 fraction as a percentage. */
export const fmtFrac = (v) => (v === null || v === undefined ? EMPTY : `${fmtNum(v * 100, 2)}%`);
/** A value already in percent. */
export const fmtPct = (v) => (v === null || v === undefined ? EMPTY : `${fmtNum(v, 2)}%`);
export const fmtText = (v) => (v === null || v === undefined || v === '' ? EMPTY : String(v));
export const fmtBool = (v) => (v === null || v === undefined ? EMPTY : v ? 'yes' : 'no');

/** Human scale for FLOP/s given in GFLOP/s. */
export function fmtGflops(gflops) {
  if (gflops === null || gflops === undefined) return EMPTY;
  if (gflops >= 1e3) return `${fmtNum(gflops / 1e3, 2)} TFLOP/s`;
  return `${fmtNum(gflops, 2)} GFLOP/s`;
}

// key, label, format, type ('num' sorts numerically), plus optional `memory` (a memory id whose
// presence on the device decides whether the column is shown) and `title` (header tooltip).
const C = (key, label, format, extra = {}) => ({key, label, format,
  type: format === fmtText || format === fmtBool ? 'text' : 'num', ...extra});

function memoryColumns(suffix, labelSuffix, format) {
  return [
    ['hbm', 'HBM'], ['cmem_read', 'CMEM Read'], ['cmem_write', 'CMEM Write'],
    ['vmem_read', 'VMEM Read'], ['vmem_write', 'VMEM Write'], ['host', 'Host link'],
  ].map(([id, name]) => C(`${id}_${suffix}`, `${name} ${labelSuffix}`, format, {memory: id}));
}

/** Why a row is not a roofline measurement as it stands (the API's `caveat`). */
export const CAVEATS = {
  async_start: 'Issues an asynchronous copy or collective: its time is the issue, not the ' +
    'transfer (see the matching -done op). Not a roofline point.',
  async_wait: 'Waits for an asynchronous copy or collective issued earlier: its time is ' +
    'waiting, not work; "transfer time" is the real interval from issue to end.',
  host_transfer: 'Moves data between host and device memory over the host link (PCIe): its ' +
    'bytes are host-link traffic, never HBM; judged only where the link speed is known.',
  peer_transfer: 'Copies between devices over their link: not HBM traffic.',
  no_cost: 'No FLOPs or bytes are known for this op: its time counts, but it has no place ' +
    'on the roofline (shown in the strip under the plot).',
  above_roof: 'Measured above its roof: a cost or a peak is wrong for this op (e.g. work on a ' +
    'unit the trace does not show). Not counted in potential time saved.',
  container: 'Contains other ops (while/call/conditional): its children are the points to ' +
    'look at.',
};
export const fmtCaveat = (v) => (v ? String(v) : EMPTY);
const CAVEAT_CELL = {cellTitle: (v) => (v ? CAVEATS[v] || v : null),
  cellClass: (v) => (v ? `caveat caveat-${v}` : '')};

/** A FLOP rate in GFLOP/s with a readable unit at any scale (no "100m GFLOP/s"). */
export function fmtFlopRate(gflops) {
  if (gflops === null || gflops === undefined) return EMPTY;
  const units = [[1e6, 'PFLOP/s'], [1e3, 'TFLOP/s'], [1, 'GFLOP/s'], [1e-3, 'MFLOP/s'],
    [1e-6, 'kFLOP/s'], [1e-9, 'FLOP/s']];
  const abs = Math.abs(gflops);
  if (abs === 0) return '0 FLOP/s';
  const [scale, unit] = units.find(([f]) => abs >= f) || units[units.length - 1];
  return `${fmtNum(gflops / scale, abs / scale >= 100 ? 0 : 2)} ${unit}`;
}

// The actionable columns first (what binds the op, how far from its roof, what it is worth,
// and whether the numbers are a measurement), then the details XProf shows.
/** Op table: XProf's roofline op table columns, plus precision, time saved, caveat, coverage. */
export const OP_COLUMNS = [
  C('rank', 'Rank', fmtInt),
  C('operation', 'Operation', fmtText),
  C('bound_by', 'Bound by', fmtText),
  C('roofline_efficiency', 'Roofline efficiency', fmtFrac),
  C('potential_time_saved_us', 'Potential time saved if on the roof (µs)', fmtNum,
    {title: 'total time × (1 − roofline efficiency); empty when the row is not a measurement'}),
  C('caveat', 'Caveat', fmtCaveat, {title: 'why the row is not a roofline measurement as it ' +
    'stands (hover a value for the reason)', type: 'text', ...CAVEAT_CELL}),
  C('self_time_percent', 'Total self time (%)', fmtPct,
    {title: "share of all ops' self time (the column sums to 100%)"}),
  C('category', 'Category', fmtText),
  C('precision', 'Precision', fmtText,
    {title: 'the precision that ran (from the kernel name on GPU, else the data type)'}),
  C('program', 'Program', fmtText),
  C('occurrences', '# Occurrences', fmtInt),
  C('total_time_us', 'Total time (µs)', fmtNum),
  C('avg_time_us', 'Avg. time (µs)', fmtNum),
  C('total_self_time_us', 'Total self time (µs)', fmtNum),
  C('avg_self_time_us', 'Avg. self time (µs)', fmtNum),
  C('cumulative_self_time_percent', 'Cumulative total self time (%)', fmtPct),
  C('dma_stall_percent', 'DMA stall (%)', fmtPct, {tpu: true}),
  C('flop_rate', 'FLOP rate (GFLOP/s per core)', fmtNum, {title: "the chart's y"}),
  C('bottleneck_operational_intensity', 'Bottleneck op. intensity (FLOP/B)', fmtNum,
    {title: "the chart's x: operational intensity of the bound-by resource"}),
  C('model_flop_rate', 'Model FLOP rate (GFLOP/s per core)', fmtNum, {tpu: true}),
  C('memory_bw', 'Memory BW (GiB/s)', fmtNum),
  ...memoryColumns('bw', 'BW (GiB/s)', fmtNum),
  C('transfer_time_us', 'Transfer time (µs)', fmtNum,
    {title: 'async copies: from issue to end of the transfer, summed'}),
  C('transfer_bw', 'Transfer BW (GiB/s)', fmtNum),
  C('operational_intensity', 'Operational intensity (FLOP/B)', fmtNum),
  ...memoryColumns('operational_intensity', 'op. intensity (FLOP/B)', fmtNum),
  C('peak_flop_rate', 'Compute roof (GFLOP/s)', fmtNum,
    {title: "the peak FLOP rate of the op's precision"}),
  C('compute_efficiency', 'Compute efficiency (% of peak FLOP rate)', fmtFrac),
  C('max_mem_bw_utilization', 'Max memory BW utilization', fmtFrac),
  C('flop_coverage', 'FLOPs known (share of time)', fmtFrac),
  C('include_infeed_outfeed', 'Include infeed/outfeed', fmtBool, {tpu: true}),
  C('source', 'Source (file:line)', fmtText),
];

/** Program-level table (Total, Total (HW), Average, steps). */
export const PROGRAM_COLUMNS = [
  C('series', 'Record', fmtText, {title: 'Total, Total (HW), a host, Average or a step'}),
  C('bound_by', 'Bound by', fmtText),
  C('roofline_efficiency', 'Roofline efficiency', fmtFrac),
  C('flop_coverage', 'FLOPs known (share of op time)', fmtFrac,
    {title: 'the share of the op time whose FLOPs are known: below 100%, the rates describe ' +
      'only that part'}),
  C('bytes_coverage', 'Bytes known (share of op time)', fmtFrac),
  C('caveat', 'Caveat', fmtCaveat, {type: 'text', ...CAVEAT_CELL}),
  C('total_time_per_core_us', 'Time per core (µs)', fmtNum),
  C('total_time_us', 'Total time (µs)', fmtNum),
  C('flop_rate', 'FLOP rate (GFLOP/s per core)', fmtNum, {title: "the chart's y"}),
  C('bottleneck_operational_intensity', 'Bottleneck op. intensity (FLOP/B)', fmtNum,
    {title: "the chart's x"}),
  C('memory_bw', 'Memory BW (GiB/s)', fmtNum),
  ...memoryColumns('bw', 'BW (GiB/s)', fmtNum),
  C('operational_intensity', 'Operational intensity (FLOP/B)', fmtNum),
  C('peak_flop_rate', 'Compute roof (GFLOP/s)', fmtNum,
    {title: 'for a mix of precisions: the rate if each part ran at its own ceiling ' +
      '(FLOPs ÷ Σ FLOPs_p / peak_p); drawn as the dotted "program mix" roof'}),
  C('compute_efficiency', '% of peak FLOP rate', fmtFrac),
  C('max_mem_bw_utilization', 'Max memory BW utilization', fmtFrac),
];

/** What the chart tooltip shows at once (details: click the point). */
export const TOOLTIP_KEYS = ['operation', 'step', 'category', 'precision', 'bound_by',
  'roofline_efficiency', 'potential_time_saved_us', 'self_time_percent', 'total_time_us',
  'flop_rate', 'bottleneck_operational_intensity', 'flop_coverage', 'caveat', 'host'];

const uniqueByKey = (cols) => cols.filter((c, i) => cols.findIndex((d) => d.key === c.key) === i);

/** Every metric of a record, for the details of a selected point (in this order). */
export const TOOLTIP_COLUMNS = uniqueByKey([
  C('operation', 'Operation', fmtText),
  C('step', 'Step', fmtText),
  C('category', 'Category', fmtText),
  C('program', 'Program', fmtText),
  C('bound_by', 'Bound by', fmtText),
  C('bottleneck_operational_intensity', 'Bottleneck op. intensity (FLOP/B)', fmtNum),
  C('flop_rate', 'FLOP rate (per core)', fmtFlopRate),
  C('time_fraction', 'Share of the profiled span', fmtFrac),
  ...OP_COLUMNS.filter((c) => !['operation', 'category', 'program', 'bound_by',
    'include_infeed_outfeed', 'flop_rate', 'bottleneck_operational_intensity'].includes(c.key)),
  C('bytes_coverage', 'Bytes known (share of time)', fmtFrac),
  C('total_time_per_core_us', 'Time per core (µs)', fmtNum),
  C('flops', 'FLOPs', fmtNum),
  C('bytes', 'Bytes accessed', fmtNum),
  C('tf_op', 'Framework op', fmtText),
  C('flops_source', 'FLOPs source', fmtText),
  C('host', 'Host', fmtText),
]);

/**
 * Adds per-memory columns for device memories beyond HBM/CMEM/VMEM (e.g. GPU `l2`), named like
 * the others (`<id>_bw`, `<id>_operational_intensity`); `visibleColumns` keeps those the API has.
 */
export function withDeviceMemories(columns, memories) {
  const known = new Set(['hbm', 'cmem_read', 'cmem_write', 'vmem_read', 'vmem_write', 'host']);
  const extra = (memories || []).filter((m) => !known.has(m.id));
  if (!extra.length) return columns;
  const out = columns.slice();
  for (const [suffix, label] of [['bw', 'BW (GiB/s)'],
    ['operational_intensity', 'op. intensity (FLOP/B)']]) {
    let at = -1;
    out.forEach((c, i) => { if (c.memory && c.key.endsWith(`_${suffix}`)) at = i; });
    if (at < 0) continue;
    out.splice(at + 1, 0, ...extra.map((m) =>
      C(`${m.id}_${suffix}`, `${m.name} ${label}`, fmtNum, {memory: m.id})));
  }
  return out;
}

/**
 * The columns to show for a device: drops per-memory columns of memories the device lacks,
 * TPU-only columns on GPU/CPU runs, and columns no row has a value for.
 */
export function visibleColumns(columns, memoryIds, rows, apiColumns, kind = null) {
  const ids = new Set(memoryIds);
  const known = apiColumns ? new Set(apiColumns) : null;
  const has = (key) => rows.some((r) => r[key] !== null && r[key] !== undefined && r[key] !== '');
  return columns.filter((c) => {
    if (c.key === 'series') return true;  // Derived by the frontend.
    if (known && !known.has(c.key)) return false;
    if (c.memory && !ids.has(c.memory)) return false;
    if (c.tpu && kind && kind !== 'tpu') return false;
    if (['dma_stall_percent', 'source', 'model_flop_rate', 'precision', 'caveat',
      'transfer_time_us', 'transfer_bw', 'program'].includes(c.key)) return has(c.key);
    return true;
  });
}

const FORMULA_START = /^[=+\-@\t\r]/;
const PLAIN_NUMBER = /^[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?$/;

/**
 * One CSV field that a spreadsheet opens as data, never as a formula (OWASP's rule, the same
 * as `csv_cell` in serve/service.py): a text starting with = + - @, a tab or a CR gets a
 * leading ' (a plain number such as -1.5 stays a number); a field holding a comma, a quote, a
 * CR or a LF is quoted (RFC 4180), so a lone CR cannot split a row.
 */
export function csvCell(v) {
  if (v === null || v === undefined) return '';
  let s = String(v);
  if (FORMULA_START.test(s) && !PLAIN_NUMBER.test(s)) s = `'${s}`;
  return /[",\n\r]/.test(s) ? `"${s.replace(/"/g, '""')}"` : s;
}

/** CSV text of `rows` with `keys` as the header. */
export function toCsv(rows, keys) {
  const lines = [keys.map(csvCell).join(',')];
  for (const row of rows) lines.push(keys.map((k) => csvCell(row[k])).join(','));
  return lines.join('\r\n') + '\r\n';
}
