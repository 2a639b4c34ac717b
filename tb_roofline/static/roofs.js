// The roofs of a roofline chart and where each record sits: which roofs are drawn (XProf's
// rule), their lines and labels, the binding roof of each record, the axis ranges, the strip of
// records without a FLOP rate. No DOM, no Vega.
import {fmtBandwidth, fmtFlopRate, unitOf} from './columns.js';

// Fixed colours per memory (the same on every device), dark tones that the category palette
// (tableau20, mid and light tones) never uses. Compute roofs: COMPUTE_STYLES.
const MEMORY_COLORS = {hbm: '#1a237e', l2: '#004d40', l1: '#4a148c', vmem_read: '#880e4f',
  vmem_write: '#ad1457', cmem_read: '#33691e', cmem_write: '#558b2f', host: '#3e2723',
  interconnect: '#b71c1c'};
const MEMORY_COLORS_DARK = {hbm: '#9fa8da', l2: '#80cbc4', l1: '#ce93d8', vmem_read: '#f48fb1',
  vmem_write: '#f8bbd0', cmem_read: '#c5e1a5', cmem_write: '#dcedc8', host: '#bcaaa4',
  interconnect: '#ef9a9a'};
const OTHER_COLORS = ['#263238', '#3e2723', '#1b5e20', '#311b92'];

export function memoryColor(id, dark = false) {
  const table = dark ? MEMORY_COLORS_DARK : MEMORY_COLORS;
  if (table[id]) return table[id];
  let hsh = 0;
  for (const ch of String(id)) hsh = (hsh * 31 + ch.charCodeAt(0)) >>> 0;
  return OTHER_COLORS[hsh % OTHER_COLORS.length];
}

const positive = (v) => typeof v === 'number' && v > 0;
const memoriesOf = (device) => ((device && device.memories) || []).filter((m) => m.peak_gbs > 0);

/** The compute roofs of these records: one per distinct peak (their `peak_flop_rate`), named by
 * the precisions that have it. `mix`: the program's FLOP-mix roof value (program chart). */
function computeRoofs(device, records, mix) {
  const compute = (device && device.compute) || [];
  const byValue = new Map();
  for (const r of records) {
    const v = r.peak_flop_rate;
    if (!positive(v) || r.caveat === 'async_start' || r.caveat === 'async_wait') continue;
    if (!byValue.has(v)) byValue.set(v, new Set());
    // named by the ceiling the record is judged under (a bf16 elementwise op: fp32)
    const p = r.roof_precision || r.precision;
    if (p && p !== 'mixed') byValue.get(v).add(p);
  }
  if (!byValue.size && compute.length && positive(compute[0].peak_gflops)) {
    byValue.set(compute[0].peak_gflops, new Set());
  }
  const roofs = [];
  for (const [value, used] of byValue) {
    if (roofs.some((r) => Math.abs(r.value / value - 1) < SAME_ROOF)) continue;
    // Named by the device's precisions with this peak that the records use (else all of them).
    const same = compute.filter((c) => Math.abs(c.peak_gflops / value - 1) < 1e-6)
        .map((c) => c.precision);
    const inUse = same.filter((p) => used.has(p));
    const isMix = mix && !same.length && Math.abs(value / mix - 1) < 1e-6;
    const name = isMix ? 'program mix' : (inUse.length ? inUse : same).join('/') ||
      [...used].join('/') || 'compute';
    roofs.push({id: `compute:${value}`, kind: 'compute', name, value,
      label: `${name} ${fmtFlopRate(value)}`});
  }
  return roofs.sort((a, b) => b.value - a.value);
}

/**
 * The device memory a record is bound by: the server's `binding_roof_id` (the model's
 * records.binding_roof_ids), matched by id, never by name; null when compute or nothing binds it.
 */
function boundMemory(memories, r) {
  const id = r.binding_roof_id;
  return id && id !== 'compute' ? memories.find((m) => m.id === id) || null : null;
}

/**
 * Which memory roofs a view draws (XProf's rule): HBM always, every other memory only when an
 * op of the view is bound by it; the others are `available` (listed, not drawn).
 */
export function drawnMemories(device, records) {
  const memories = memoriesOf(device);
  const bound = new Set(records.map((r) => r.binding_roof_id));
  const drawn = memories.filter((m) => m.id === 'hbm' || bound.has(m.id));
  if (!drawn.length && memories.length) drawn.push(memories[0]);
  return {drawn, available: memories.filter((m) => !drawn.includes(m))};
}

/** The binding roof of a record: {id, label} of the memory or compute roof it is bound by. */
export function bindingRoof(device, r) {
  if (r.binding_roof_id === 'compute' && positive(r.peak_flop_rate)) {
    const roof = r.roof_precision || r.precision;
    const p = roof && roof !== 'mixed' ? `${roof} ` : '';
    return {id: `compute:${r.peak_flop_rate}`,
      label: `Compute (${p}${fmtFlopRate(r.peak_flop_rate)})`};
  }
  const m = boundMemory(memoriesOf(device), r);
  if (m) return {id: `memory:${m.id}`, label: `${m.name} (${fmtBandwidth(memoryRoof(m, r))})`};
  return null;
}

/**
 * A memory roof's bandwidth for a record: a collective's link roof is its group's (the
 * server's `link_roof_gbs`: the links its group can use, model/records/link_roofs.py), never the
 * whole figure; any other memory's is the device's.
 */
function memoryRoof(m, r) {
  return m.id === 'interconnect' && positive(r.link_roof_gbs) ? r.link_roof_gbs : m.peak_gbs;
}

function span(values) {
  let lo = Infinity; let hi = 0;
  for (const v of values) if (positive(v)) { lo = Math.min(lo, v); hi = Math.max(hi, v); }
  return Number.isFinite(lo) ? [lo, hi] : null;
}

// Compute roofs within this relative distance are one roof (the Program records' FLOP-mix
// roofs of equal steps differ in the last digits).
const SAME_ROOF = 5e-3;
// Compute roof styles, one per roof in falling order: dark tones (never a tableau20 colour of
// the points' categories) and a dash pattern each, so two roofs are told apart in grey prints.
const COMPUTE_STYLES = [['#212121', '#eeeeee', null], ['#bf360c', '#ffab91', [8, 4]],
  ['#1b5e20', '#a5d6a7', [3, 3]], ['#0277bd', '#90caf9', [10, 3, 2, 3]],
  ['#6d4c41', '#d7ccc8', [1, 3]], ['#827717', '#e6ee9c', [12, 6]]];

/**
 * The roof a record is judged against at its own intensity (GFLOP/s): its compute peak when
 * compute-bound, its binding memory's bandwidth × its intensity when memory-bound; null when
 * neither is known. The y axis must hold it.
 */
export function roofAt(device, r) {
  if (!positive(r.bottleneck_operational_intensity) || !positive(r.flop_rate)) return null;
  if (r.binding_roof_id === 'compute') {
    return positive(r.peak_flop_rate) ? r.peak_flop_rate : null;
  }
  const m = boundMemory(memoriesOf(device), r);
  return m ? memoryRoof(m, r) * r.bottleneck_operational_intensity : null;
}

/**
 * The axis ranges: every placed point, the roof above each (roofAt), the highest compute
 * roof and where each drawn memory roof meets it (its ridge). The points and ridges fill the
 * left ~80% of the x range, so the compute roofs' labels at the right end sit clear of them.
 */
function axisRanges(device, placed, top, drawn) {
  const xs = placed.map((r) => r.bottleneck_operational_intensity);
  const ridges = top ? drawn.map((m) => top / m.peak_gbs) : [];
  const xr = span([...xs, ...ridges]) || [0.01, 1000];
  const lo = Math.log10(xr[0]) - 0.5;
  const hi = Math.log10(xr[1]) + 0.3;
  const x0 = 10 ** lo;
  const x1 = 10 ** (lo + (hi - lo) / 0.8);
  const ys = placed.map((r) => r.flop_rate);
  const roofs = placed.map((r) => roofAt(device, r));
  const yr = span([...ys, ...roofs, top]);
  const yHi = yr ? yr[1] * 3 : 1000;
  const yLo = yr ? Math.min(yr[0] / 4, yHi / 100) : yHi / 1e6;
  return {x0, x1, yLo, yHi};
}

/** [colour, dash] of the i-th compute roof (falling order). */
export function computeStyle(i, dark = false) {
  const [light, darkColor, dash] = COMPUTE_STYLES[Math.min(i, COMPUTE_STYLES.length - 1)];
  return [dark ? darkColor : light, dash];
}

/** A roof's drawing: strong (it binds a record) or faint. */
function lineStyle(color, dash, strong) {
  return {color, dash, strong, width: strong ? 2.2 : 1.2, alpha: strong ? 1 : 0.4};
}

/** Line and label styles of the compute roofs; each roof is `strong` when some record binds. */
function styleComputes(computes, bound, dark) {
  computes.forEach((c, i) => {
    const [light, darkColor, dash] = COMPUTE_STYLES[Math.min(i, COMPUTE_STYLES.length - 1)];
    c.color = dark ? darkColor : light;
    c.dash = dash;
    c.strong = bound.has(c.id);
  });
}

/**
 * The axis ranges, roof lines and labels for a device and the records of a chart: the
 * ranges always hold every point's own roof and the highest compute roof with its ridge
 * (axisRanges). `mixPeak`: the Total's compute roof. `roofRecords`: the records whose roofs
 * are drawn (default: all of `records`). Roofs that bind a record are `strong`, the others
 * drawn faint. The one home of roof geometry: the single-run charts and the comparison's
 * (compare_charts.js, once per device) draw what it returns.
 */
export function roofGeometry(device, records, {mixPeak = null, dark = false,
  roofRecords = null} = {}) {
  const judged = roofRecords || records;
  const {drawn, available} = drawnMemories(device, judged);
  const computes = computeRoofs(device, judged, mixPeak);
  const top = computes.length ? computes[0].value : null;
  const hbm = drawn.find((m) => m.id === 'hbm') || drawn[0] || null;
  const placed = records.filter((r) => positive(r.bottleneck_operational_intensity) &&
      positive(r.flop_rate));
  const {x0, x1, yLo, yHi} = axisRanges(device, placed, top, drawn);
  for (const r of new Set([...records, ...judged])) {
    const b = bindingRoof(device, r);
    const c = b && b.id.startsWith('compute:') ?
      computes.find((k) => Math.abs(k.value / r.peak_flop_rate - 1) < SAME_ROOF) : null;
    r.roof_id = b ? (c ? c.id : b.id) : '';
    r.binding_roof = b ? b.label : null;
  }
  const bound = new Set(judged.map((r) => r.roof_id).filter(Boolean));
  styleComputes(computes, bound, dark);
  const strip = records.some((r) => !positive(r.bottleneck_operational_intensity) ||
      !positive(r.flop_rate));
  const floorY = yLo / 4;
  const yDomain = [strip ? floorY / 3 : yLo, yHi];
  const stripTop = strip ? floorY * 2 : null;
  const lines = [];  // {roof, order, px, py, color, dash, strong}: one polyline per roof
  const labels = [];  // {roof, px, py, text, angle points, align, below}
  const roofs = [];  // {id, label, color, kind, dash, strong}
  const meetY = top || yHi;
  for (const m of drawn) {
    const id = `memory:${m.id}`;
    const color = memoryColor(m.id, dark);
    const strong = bound.has(id) || !bound.size;
    const xMeet = meetY / m.peak_gbs;
    const xStart = Math.min(x0, xMeet / 10) / 100;
    const style = lineStyle(color, null, strong);
    roofs.push({id, label: `${m.name} ${fmtBandwidth(m.peak_gbs)}`, kind: 'memory', ...style});
    lines.push({roof: id, order: 0, px: xStart, py: m.peak_gbs * xStart, ...style});
    lines.push({roof: id, order: 1, px: xMeet, py: meetY, ...style});
    // The label sits on the visible part of the slope, rotated along it (none when too little
    // of the line is visible: the legend under the chart names it).
    const vis0 = Math.max(x0, yDomain[0] / m.peak_gbs);
    const vis1 = Math.min(x1, xMeet, yHi / m.peak_gbs);
    if (vis1 > vis0 && Math.log(vis1 / vis0) > 0.25 * Math.log(x1 / x0)) {
      const lx = Math.sqrt(vis0 * vis1);
      labels.push({roof: id, px: lx, py: m.peak_gbs * lx, text: roofs[roofs.length - 1].label,
        ax: lx, ay: m.peak_gbs * lx, bx: lx * 2, by: m.peak_gbs * lx * 2, ...style, alpha: Math.max(style.alpha, 0.7),
        align: 'center', below: false});
    }
  }
  // Where the roofs meet: each drawn memory the top compute roof, each lower compute roof HBM.
  const ridges = top ? drawn.map((m) => ({roof: `memory:${m.id}`, px: top / m.peak_gbs, py: top,
    memory: m, peak: top})) : [];
  for (const c of hbm ? computes.slice(1) : []) {
    ridges.push({roof: c.id, px: c.value / hbm.peak_gbs, py: c.value, memory: hbm,
      peak: c.value});
  }
  const yDecades = Math.log10(yDomain[1] / yDomain[0]);
  computes.forEach((c, i) => {
    const start = hbm ? c.value / hbm.peak_gbs : x0 / 100;
    const style = lineStyle(c.color, c.dash, c.strong || !bound.size);
    roofs.push({id: c.id, label: c.label, kind: 'compute', ...style});
    lines.push({roof: c.id, order: 0, px: start, py: c.value, ...style});
    lines.push({roof: c.id, order: 1, px: x1 * 100, py: c.value, ...style});
    // At the right end, right-aligned, above the line; below it when the roof above is too
    // close for two lines of text (156 and 312 TFLOP/s on a 9-decade axis).
    const above = computes[i - 1];
    const below = !!above && Math.log10(above.value / c.value) < 0.07 * yDecades &&
      !(labels.length && labels[labels.length - 1].below);
    labels.push({roof: c.id, px: x1 / 1.02, py: c.value, text: c.label, ax: 1, ay: 1, bx: 2,
      by: 1, ...style, alpha: Math.max(style.alpha, 0.7), align: 'right', below});
  });
  return {peak: top, mixPeak, computes, drawn, available, roofs, lines, labels, ridges,
    yTitle: `FLOP rate per ${unitOf(device)}`, floorY, x0, x1, xDomain: [x0, x1], yDomain, stripTop,
    xTicks: decades(x0, x1), yTicks: decades(stripTop || yDomain[0], yDomain[1])};
}

/**
 * Positive coordinates for a log-log plot: every record at its true intensity and FLOP rate
 * (records on one spot stay there: the chart's hover lists every record under the cursor).
 * Records with zero or unknown FLOP rate or intensity have no place on the roofline: they go
 * to a box at the bottom left, under the plot (`at_floor`), laid out in a grid in rank order
 * so each can be hovered — not spread along the intensity axis, which would give them an
 * intensity they do not have.
 */
export function placePoints(rows, g) {
  const strip = [];
  for (const r of rows) {
    const x = r.bottleneck_operational_intensity;
    const y = r.flop_rate;
    r.at_floor = !(positive(x) && positive(y));
    r.px = r.at_floor ? g.x0 : x;
    r.py = r.at_floor ? g.floorY : y;
    if (r.at_floor) strip.push(r);
    r.flag = pointFlag(r);
  }
  if (strip.length && g.stripTop) {
    const lx0 = Math.log10(g.xDomain[0]);
    const lx1 = lx0 + (Math.log10(g.xDomain[1]) - lx0) * 0.3;
    const ly0 = Math.log10(g.yDomain[0]);
    const ly1 = Math.log10(g.stripTop);
    const cols = Math.max(1, Math.ceil(Math.sqrt(strip.length * 6)));
    const rowsN = Math.ceil(strip.length / cols);
    strip.forEach((r, i) => {
      const c = i % cols;
      const k = Math.floor(i / cols);
      r.px = 10 ** (lx0 + (lx1 - lx0) * (c + 0.5) / cols);
      r.py = 10 ** (ly0 + (ly1 - ly0) * (k + 0.5) / Math.max(rowsN, 1));
    });
  }
  return rows;
}

/** What a point is: a measurement under its roof (the server's `measurement`, the model's
 * records.measurements), else a record with a caveat, drawn apart by that caveat. */
export const POINT_FLAGS = ['measured', 'not a measurement (caveat)', 'above its roof'];
function pointFlag(r) {
  if (r.measurement) return POINT_FLAGS[0];
  return r.caveat === 'above_roof' ? POINT_FLAGS[2] : POINT_FLAGS[1];
}

/** Tick values on a log axis: the powers of ten inside [lo, hi] (with 2 and 5 between them
 * when that gives fewer than three). */
export function decades(lo, hi) {
  const out = [];
  for (let e = Math.ceil(Math.log10(lo)); e <= Math.floor(Math.log10(hi)); e++) out.push(10 ** e);
  if (out.length >= 3) return out;
  const more = [];
  for (let e = Math.floor(Math.log10(lo)); e <= Math.ceil(Math.log10(hi)); e++) {
    for (const m of [1, 2, 5]) {
      const v = m * 10 ** e;
      if (v >= lo && v <= hi) more.push(v);
    }
  }
  return more;
}
