// Formatting and THE column registry: every column the tables, tooltips, details and exports
// show is defined once here (COLUMN); the lists (op table, program table, tooltip, the compare
// view's pair columns in compare_data.js) name registry keys. No DOM here.

export const EMPTY = '—';

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

const isNum = (v) => typeof v === 'number' && Number.isFinite(v);

/** A plain number, fixed point (never scientific notation); tiny values as "<0.01". */
export function fmtNum(value, digits = 2) {
  if (value === null || value === undefined || value === '') return EMPTY;
  if (typeof value !== 'number') return String(value);
  if (!Number.isFinite(value)) return String(value);
  const abs = Math.abs(value);
  if (abs !== 0 && abs < 10 ** -digits) return `${value < 0 ? '>-' : '<'}${10 ** -digits}`;
  return formatter(digits).format(value);
}

/** A number to `digits` significant figures ("0.0216", "1,640"): small rates keep their
 * figures, which fixed decimals would round away. */
export function fmtSig(value, digits = 3) {
  if (!isNum(value)) return value === null || value === undefined || value === '' ? EMPTY :
    String(value);
  return value.toLocaleString('en-US', {maximumSignificantDigits: digits});
}

export const fmtInt = (v) => fmtNum(v, 0);
/** A value already in percent, fixed point: "12.34%", "<0.01%". */
export const fmtPct = (v) => (isNum(v) ? `${fmtNum(v, 2)}%` : EMPTY);
/** A 0..1 fraction as a percentage. */
export const fmtFrac = (v) => (isNum(v) ? fmtPct(v * 100) : EMPTY);
export const fmtText = (v) => (v === null || v === undefined || v === '' ? EMPTY : String(v));
export const fmtBool = (v) => (v === null || v === undefined ? EMPTY : v ? 'yes' : 'no');

/** A time in µs with a unit that reads at any length: µs, ms, s. */
export function fmtTime(us) {
  if (!isNum(us)) return EMPTY;
  const abs = Math.abs(us);
  if (abs >= 1e6) return `${fmtNum(us / 1e6, 2)} s`;
  if (abs >= 1e3) return `${fmtNum(us / 1e3, 2)} ms`;
  return `${fmtNum(us, 2)} µs`;
}

function scaled(value, units, digits = 2) {
  const abs = Math.abs(value);
  if (abs === 0) return `0 ${units[units.length - 1][1]}`;
  const [scale, unit] = units.find(([f]) => abs >= f) || units[units.length - 1];
  return `${fmtNum(value / scale, abs / scale >= 100 ? 0 : digits)} ${unit}`;
}

const FLOP_UNITS = [[1e6, 'PFLOP/s'], [1e3, 'TFLOP/s'], [1, 'GFLOP/s'], [1e-3, 'MFLOP/s'],
  [1e-6, 'kFLOP/s'], [1e-9, 'FLOP/s']];
/** A FLOP rate given in GFLOP/s, with a unit that reads at any scale (no "100m GFLOP/s"). */
export const fmtFlopRate = (gflops) => (isNum(gflops) ? scaled(gflops, FLOP_UNITS) : EMPTY);
export const fmtGflops = fmtFlopRate;
/** A bandwidth given in GB/s. */
export const fmtBandwidth = (gbs) => (isNum(gbs) ? scaled(gbs, [[1e3, 'TB/s'], [1, 'GB/s'],
  [1e-3, 'MB/s'], [1e-6, 'kB/s']]) : EMPTY);

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
/**
 * Whether a record's value of a derived column is a measurement, beyond what the server
 * already answers null (the model's records._unknown_is_null: the rates and efficiencies of
 * an async half, whose issue time over the bytes of the whole transfer would read 833,333,333
 * GiB/s, and of a record with no known cost): FLOP figures need FLOPs (`flop_coverage` and
 * `flops` not 0), bandwidths bytes, efficiencies and ridges a known peak. No caveat is tested
 * here: a record that is not a roofline measurement (`measurement` false: above its roof, a
 * peer copy) keeps its figures, the evidence its caveat is read from.
 */
export function isMeasurement(row, need) {
  if (!row) return true;
  const zero = (k) => row[k] === 0;
  if (need.includes('flops') && (zero('flop_coverage') || zero('flops'))) return false;
  if (need.includes('bytes') && (zero('bytes_coverage') || zero('bytes'))) return false;
  if (need.includes('peak') && !(row.peak_flop_rate > 0)) return false;
  return true;
}

// A column: key, label, format (value, row), type ('num' sorts numerically), plus optional
// `memory` (a memory id whose presence on the device decides whether the column is shown),
// `title` (header tooltip), `needs` (what makes the value a measurement: isMeasurement),
// `wide` (a long text cell truncated with the full text on hover), `tpu` (TPU runs only).
function C(key, label, format, extra = {}) {
  const text = format === fmtText || format === fmtBool;
  const col = {key, label, type: text ? 'text' : 'num', ...extra};
  const needs = extra.needs;
  // Called as format(value, row): the formatter itself sees only the value.
  col.format = needs ? (v, row) => (isMeasurement(row, needs) ? format(v) : EMPTY) :
    (v) => format(v);
  col.raw = (v) => format(v);
  // Whether the value is shown as a number (tables sort the others, "—", last).
  col.known = needs ? (v, row) => isMeasurement(row, needs) : null;
  return col;
}

const MEMORIES = [['hbm', 'HBM'], ['cmem_read', 'CMEM Read'], ['cmem_write', 'CMEM Write'],
  ['vmem_read', 'VMEM Read'], ['vmem_write', 'VMEM Write'], ['host', 'Host link']];
export const KNOWN_MEMORY_IDS = new Set(MEMORIES.map(([id]) => id));
/** Links between devices (the API's `interconnect_bw`): GB/s, like /comm; memories: GiB/s. */
export const GBS_MEMORY_IDS = new Set(['interconnect']);
/** GB/s in one GiB/s (2^30 / 1e9). */
export const GB_PER_GIB = 1.073741824;
const bwUnit = (id) => (GBS_MEMORY_IDS.has(id) ? 'GB/s' : 'GiB/s');
const memoryBw = (id, name) => C(`${id}_bw`, `${name} BW (${bwUnit(id)})`, fmtNum,
  {memory: id, needs: ['bytes']});
const memoryOi = (id, name) => C(`${id}_operational_intensity`, `${name} op. intensity (FLOP/B)`,
  fmtNum, {memory: id, needs: ['flops', 'bytes']});
const CAVEAT_CELL = {cellTitle: (v) => (v ? CAVEATS[v] || v : null),
  cellClass: (v) => (v ? `caveat caveat-${v}` : '')};

/** The registry: every column, once. */
export const COLUMN = Object.fromEntries([
  C('rank', 'Rank', fmtInt),
  C('series', 'Record', fmtText, {title: 'Total, Total (HW), a host, Average or a step'}),
  C('operation', 'Operation', fmtText, {wide: true}),
  C('shapes', 'Shapes', fmtText, {wide: true, title: 'the input shapes recorded for these calls'}),
  C('step', 'Step', fmtText),
  C('bound_by', 'Bound by', fmtText),
  C('binding_roof', 'Binding roof', fmtText,
    {title: 'the roof the efficiency is measured against, and its value'}),
  C('roofline_efficiency', 'Roofline efficiency', fmtFrac, {needs: ['peak'],
    title: "FLOP rate ÷ the binding roof's attainable rate at this intensity"}),
  C('potential_time_saved_us', 'Time saved on the roof', fmtTime,
    {title: "an op: its time − the sum of its calls' floors Σ max(F/P, B/BW); a program " +
      "record: the sum of its ops' savings (async halves, unknown costs and idle time left " +
      'out; Opportunities adds idle and exposed communication); empty when not a measurement'}),
  C('roof_time_us', 'Time on the roof', fmtTime,
    {title: "the sum of its calls' floors Σ max(F/P, B/BW): the time it would take on its roofs"}),
  C('mixed_regimes', 'Calls in mixed regimes', fmtBool,
    {title: 'its calls (shapes) are bound by different resources: its point averages them, ' +
      "its floor and time saved are their floors' sum"}),
  C('caveat', 'Caveat', (v) => (v ? String(v) : EMPTY), {type: 'text', ...CAVEAT_CELL,
    title: 'why the row is not a roofline measurement as it stands (hover a value)'}),
  C('self_time_percent', 'Self time (%)', fmtPct,
    {title: "share of all ops' self time (the column sums to 100%)"}),
  C('category', 'Category', fmtText),
  C('precision', 'Precision', fmtText,
    {title: 'the precision that ran: a GEMM\'s from its kernel name on GPU, else the data ' +
      'type it moved and computed'}),
  C('roof_precision', 'Roof', fmtText,
    {title: 'the compute ceiling it is judged under: the precision for dots and ' +
      'convolutions, the vector units\' ceiling for other ops (bf16 elementwise: fp32)'}),
  C('dtype', 'Input data type', fmtText,
    {title: 'the data type of its inputs as recorded'}),
  C('program', 'Program', fmtText, {wide: true}),
  C('occurrences', '# Occurrences', fmtInt),
  C('total_time_us', 'Total time', fmtTime),
  C('avg_time_us', 'Avg. time', fmtTime),
  C('total_self_time_us', 'Total self time', fmtTime),
  C('avg_self_time_us', 'Avg. self time', fmtTime),
  C('cumulative_self_time_percent', 'Cumulative self time (%)', fmtPct),
  C('dma_stall_percent', 'DMA stall (%)', fmtPct, {tpu: true}),
  C('flop_rate', 'FLOP rate (per core)', fmtFlopRate, {needs: ['flops'], title: "the chart's y"}),
  C('bottleneck_operational_intensity', 'Bound-by intensity (FLOP/B)',
    fmtNum, {needs: ['flops', 'bytes'], title: 'operational intensity against the resource ' +
      "that binds the record (FLOPs per byte it moves there): the chart's x"}),
  C('model_flop_rate', 'Model FLOP rate (per core)', fmtFlopRate, {tpu: true, needs: ['flops']}),
  C('memory_bw', 'Memory BW (GiB/s)', fmtNum, {needs: ['bytes']}),
  ...MEMORIES.map(([id, name]) => memoryBw(id, name)),
  C('transfer_time_us', 'Transfer time', fmtTime,
    {title: 'async copies: from issue to end of the transfer, summed'}),
  C('transfer_bw', 'Transfer BW (GiB/s)', fmtNum),
  C('link_roof_gbs', 'Link roof of its group (GB/s)', fmtNum,
    {title: 'a collective: the link figure × the links its group can use ÷ the device\'s ' +
      'links, the roof its interconnect efficiency is judged against (as /comm)'}),
  C('link_assumption', 'Link topology assumed', fmtText, {wide: true,
    title: 'the group size and the links it assumes the group can use'}),
  C('operational_intensity', 'Operational intensity (FLOP/B)', fmtNum,
    {needs: ['flops', 'bytes']}),
  ...MEMORIES.map(([id, name]) => memoryOi(id, name)),
  C('peak_flop_rate', 'Compute roof', fmtFlopRate, {needs: ['peak'],
    title: "the peak FLOP rate of the record's precision (a mix of precisions: the rate if " +
      'each part ran at its own roof)'}),
  C('compute_efficiency', '% of peak FLOP rate', fmtFrac, {needs: ['flops', 'peak']}),
  C('max_mem_bw_utilization', 'Max memory BW utilization', fmtFrac, {needs: ['bytes', 'peak']}),
  C('flop_coverage', 'FLOPs known (share of time)', fmtFrac),
  C('bytes_coverage', 'Bytes known (share of time)', fmtFrac),
  C('include_infeed_outfeed', 'Include infeed/outfeed', fmtBool, {tpu: true}),
  C('source', 'Source (file:line)', fmtText, {wide: true}),
  C('time_fraction', 'Share of the profiled span', fmtFrac),
  C('total_time_per_core_us', 'Time per core', fmtTime,
    {title: 'total time ÷ the number of cores (GPUs, chips) it ran on'}),
  C('flops', 'FLOPs', fmtNum),
  C('bytes', 'Bytes accessed', fmtNum),
  C('tf_op', 'Framework op', fmtText, {wide: true}),
  C('flops_source', 'FLOPs source', fmtText),
  C('host', 'Host', fmtText),
].map((c) => [c.key, c]));

/**
 * One side of a compared pair (`cand_<key>` / `base_<key>`): the registry's column of `key`,
 * "—" where that side's value is not a measurement (sideMeasured).
 */
export function sideColumn(side, key, extra = {}) {
  const c = COLUMN[key];
  if (!c) throw new Error(`no column ${key} in the registry`);
  const measured = (v, row) => sideMeasured(row, side, c.needs);
  const format = c.needs ? (v, row) => (measured(v, row) ? c.raw(v) : EMPTY) : c.raw;
  return {...c, key: `${side}_${key}`, format, known: c.needs ? measured : null, ...extra};
}

/**
 * Whether one side of a compared pair has a measurement for a column that `needs` FLOPs,
 * bytes or a peak: not where what it needs is zero (no FLOPs: no FLOP rate; no bytes: no
 * bandwidth; no peak: no efficiency); what the model has no value for is null already.
 */
export function sideMeasured(row, side, needs = ['flops']) {
  if (!row) return true;
  const zero = (k) => row[`${side}_${k}`] === 0;
  if (needs.includes('flops') && (zero('flops') || zero('flop_rate'))) return false;
  if (needs.includes('bytes') && (zero('bytes') || zero('memory_bw'))) return false;
  if (needs.includes('peak') && zero('peak_flop_rate')) return false;
  return true;
}

/**
 * What one "core" of the per-core figures is on this device, in the words its users read (the
 * API's `unit`, devices/spec.py): a GPU, a TPU TensorCore (megacore or not: the profile's
 * planes and peaks are per TensorCore, a megacore chip is two of them), a CPU core.
 */
export function unitOf(device) {
  if (device && device.unit) return device.unit;
  const kind = device && device.kind;
  if (kind === 'gpu') return 'GPU';
  if (kind === 'tpu') return 'TensorCore';
  return 'core';
}

/** The columns with "per core" said in the device's words (unitOf). */
export function perUnit(list, device) {
  const unit = unitOf(device);
  if (unit === 'core') return list;
  return list.map((c) => (/per core/i.test(c.label) ? {...c,
    label: c.label.replace(/per core/, `per ${unit}`).replace(/Per core/, `Per ${unit}`)} : c));
}

/** The name of a memory id (the device's name when it has the memory). */
export function memoryName(id, device) {
  const m = ((device && device.memories) || []).find((x) => x.id === id);
  if (m) return m.name;
  const known = MEMORIES.find(([k]) => k === id);
  return known ? known[1] : id === 'interconnect' ? 'Interconnect' : id;
}

/**
 * The memories a record moves bytes in, each with its bandwidth (the API's unit: GiB/s, GB/s
 * for links, `unit`; and in GB/s, `gbs`), its share of the memory's peak and the record's
 * intensity against it: [{id, name, bw, unit, gbs, util, intensity}]. None for a record whose bytes are not a
 * measurement (isMeasurement).
 */
export function recordMemories(row, device) {
  if (!isMeasurement(row, ['bytes'])) return [];
  const ids = [...MEMORIES.map(([id]) => id), 'interconnect',
    ...((device && device.memories) || []).map((m) => m.id)];
  const out = [];
  for (const id of new Set(ids)) {
    const bw = row[`${id}_bw`];
    if (!(typeof bw === 'number' && bw > 0)) continue;
    const m = ((device && device.memories) || []).find((x) => x.id === id);
    const intensity = row[`${id}_operational_intensity`];
    // a collective's link roof is its group's (the server's `link_roof_gbs`), as its
    // roofline efficiency is judged
    const link = id === 'interconnect' && row.link_roof_gbs > 0 ? row.link_roof_gbs : null;
    const peak = link || (m && (GBS_MEMORY_IDS.has(id) ? m.peak_gbs : m.peak_gibs));
    // GB/s as the roofs and the device panel say it (the API's memory columns are GiB/s).
    const gbs = GBS_MEMORY_IDS.has(id) ? bw : bw * GB_PER_GIB;
    out.push({id, name: memoryName(id, device), bw, unit: bwUnit(id), gbs,
      util: peak > 0 ? bw / peak : null,
      intensity: isMeasurement(row, ['flops', 'bytes']) && intensity > 0 ? intensity : null});
  }
  return out;
}

/** Registry columns by key, with per-list overrides (`{key: {label, ...}}`). */
export function columns(keys, overrides = {}) {
  return keys.map((k) => {
    const base = COLUMN[k];
    if (!base) throw new Error(`no column ${k} in the registry`);
    return overrides[k] ? {...base, ...overrides[k]} : base;
  });
}

const MEMORY_BW_KEYS = MEMORIES.map(([id]) => `${id}_bw`);
const MEMORY_OI_KEYS = MEMORIES.map(([id]) => `${id}_operational_intensity`);

// The actionable columns first (what binds the op, how far from its roof, what it is worth,
// whether the numbers are a measurement), then the details XProf shows.
/** Op table: XProf's roofline op table columns, plus precision, time saved, caveat, coverage. */
export const OP_COLUMNS = columns(['rank', 'operation', 'shapes', 'bound_by', 'roofline_efficiency',
  'potential_time_saved_us', 'caveat', 'self_time_percent', 'category', 'precision', 'program',
  'occurrences', 'total_time_us', 'avg_time_us', 'total_self_time_us', 'avg_self_time_us',
  'cumulative_self_time_percent', 'dma_stall_percent', 'flop_rate',
  'bottleneck_operational_intensity', 'model_flop_rate', 'memory_bw', ...MEMORY_BW_KEYS,
  'transfer_time_us', 'transfer_bw', 'link_roof_gbs', 'link_assumption', 'operational_intensity',
  ...MEMORY_OI_KEYS, 'peak_flop_rate', 'roof_precision', 'compute_efficiency',
  'max_mem_bw_utilization',
  'flop_coverage', 'include_infeed_outfeed', 'source']);

/** The op table's columns at first (the rest in its column chooser): they fit 1280 px. */
export const OP_ESSENTIAL = ['rank', 'operation', 'shapes', 'bound_by', 'roofline_efficiency',
  'potential_time_saved_us', 'caveat', 'self_time_percent', 'category', 'precision',
  'total_time_us', 'flop_rate', 'bottleneck_operational_intensity'];

/** Program-level table (Total, Total (HW), hosts, Average, steps). */
export const PROGRAM_COLUMNS = columns(['series', 'bound_by', 'roofline_efficiency',
  'flop_coverage', 'bytes_coverage', 'caveat', 'total_time_per_core_us', 'total_time_us',
  'flop_rate', 'bottleneck_operational_intensity', 'memory_bw', ...MEMORY_BW_KEYS,
  'operational_intensity', 'peak_flop_rate', 'compute_efficiency', 'max_mem_bw_utilization'],
{flop_coverage: {label: 'FLOPs known (share of op time)', title: 'the share of the op time ' +
  'whose FLOPs are known: below 100%, the rates describe only that part'},
bytes_coverage: {label: 'Bytes known (share of op time)'}});

/** The program table's columns at first. */
export const PROGRAM_ESSENTIAL = ['series', 'bound_by', 'roofline_efficiency', 'flop_coverage',
  'caveat', 'total_time_per_core_us', 'total_time_us', 'flop_rate',
  'bottleneck_operational_intensity', 'memory_bw', 'hbm_bw', 'peak_flop_rate'];

/** What the chart tooltip shows at once (details: click the point). */
export const TOOLTIP_KEYS = ['category', 'precision', 'roof_precision', 'bound_by',
  'binding_roof', 'roofline_efficiency', 'potential_time_saved_us', 'total_time_us',
  'total_time_per_core_us', 'time_fraction', 'self_time_percent', 'flop_rate',
  'bottleneck_operational_intensity', 'flop_coverage', 'host'];

/** Every metric of a record, for the details of a selected point (in this order). */
export const TOOLTIP_COLUMNS = columns([...new Set(['series', 'operation', 'shapes', 'step',
  'category', 'program', 'bound_by', 'binding_roof', 'bottleneck_operational_intensity',
  'flop_rate', 'time_fraction', ...OP_COLUMNS.map((c) => c.key).filter((k) =>
    !['include_infeed_outfeed'].includes(k)), 'roof_precision', 'dtype', 'roof_time_us',
  'mixed_regimes',
  'bytes_coverage', 'total_time_per_core_us', 'flops', 'bytes', 'tf_op', 'flops_source',
  'host'])]);

/**
 * Adds per-memory columns for device memories beyond HBM/CMEM/VMEM/host (e.g. GPU `l2`,
 * `l1`, `interconnect`), named like the others (`<id>_bw`, `<id>_operational_intensity`);
 * `visibleColumns` keeps those the API has.
 */
export function withDeviceMemories(list, memories) {
  const extra = (memories || []).filter((m) => !KNOWN_MEMORY_IDS.has(m.id));
  if (!extra.length) return list;
  const out = list.slice();
  for (const [suffix, make] of [['bw', memoryBw], ['operational_intensity', memoryOi]]) {
    let at = -1;
    out.forEach((c, i) => { if (c.memory && c.key.endsWith(`_${suffix}`)) at = i; });
    if (at < 0) continue;
    out.splice(at + 1, 0, ...extra.map((m) => make(m.id, m.name)));
  }
  return out;
}

/**
 * The columns to show for a device: drops per-memory columns of memories the device lacks,
 * TPU-only columns on GPU/CPU runs, and optional columns no row has a value for.
 */
export function visibleColumns(list, memoryIds, rows, apiColumns, kind = null) {
  const ids = new Set(memoryIds);
  const known = apiColumns ? new Set(apiColumns) : null;
  const has = (key) => rows.some((r) => r[key] !== null && r[key] !== undefined && r[key] !== '');
  return list.filter((c) => {
    if (c.key === 'series') return true;  // Derived by the frontend.
    if (known && !known.has(c.key)) return false;
    if (c.memory && !ids.has(c.memory)) return false;
    if (c.tpu && kind && kind !== 'tpu') return false;
    if (['dma_stall_percent', 'source', 'model_flop_rate', 'precision', 'caveat',
      'transfer_time_us', 'transfer_bw', 'link_roof_gbs', 'link_assumption', 'program',
      'shapes'].includes(c.key)) return has(c.key);
    return true;
  });
}

const FORMULA_START = /^[=+\-@\x00-\x1f\x7f]/;
const PLAIN_NUMBER = /^[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?$/;

/**
 * One CSV field that a spreadsheet opens as data, never as a formula (OWASP's rule, the same
 * as `csv_cell` in serve/service/core.py): a text starting with = + - @, a tab or a CR gets a
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
