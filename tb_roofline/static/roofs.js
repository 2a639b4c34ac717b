// The roofs of a roofline chart and where each record sits: which roofs are drawn (XProf's
// rule), their lines and labels, the binding roof of each record, the axis ranges, the strip of
// records without a FLOP rate. No DOM, no Vega.
import {fmtBandwidth, fmtFlopRate} from './columns.js';

// Fixed colours per memory (the same on every device), dark tones that the category palette
// (tableau20, mid and light tones) never uses. Compute roofs are drawn in the foreground colour.
const MEMORY_COLORS = {hbm: '#1a237e', l2: '#004d40', l1: '#4a148c', vmem_read: '#880e4f',
  vmem_write: '#ad1457', cmem_read: '#33691e', cmem_write: '#558b2f', host: '#3e2723',
  interconnect: '#b71c1c'};
const MEMORY_COLORS_DARK = {hbm: '#9fa8da', l2: '#80cbc4', l1: '#ce93d8', vmem_read: '#f48fb1',
  vmem_write: '#f8bbd0', cmem_read: '#c5e1a5', cmem_write: '#dcedc8', host: '#bcaaa4',
  interconnect: '#ef9a9a'};
const OTHER_COLORS = ['#263238', '#3e2723', '#1b5e20', '#311b92'];
const COMPUTE_COLOR = '#212121';
const COMPUTE_COLOR_DARK = '#eeeeee';

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
    if (r.precision && r.precision !== 'mixed') byValue.get(v).add(r.precision);
  }
  if (!byValue.size && compute.length && positive(compute[0].peak_gflops)) {
    byValue.set(compute[0].peak_gflops, new Set());
  }
  const roofs = [];
  for (const [value, used] of byValue) {
    if (roofs.some((r) => Math.abs(r.value / value - 1) < 1e-6)) continue;
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

/** The memory a `bound_by` value names (the API names memories by their display name). */
/**
 * Whether a record's `bound_by` names this memory: the model names a resource as its op-table
 * column does ("HBM", "Host link", "Interconnect"); the device may add the link's kind to the
 * name ("Interconnect (ICI)", "Host link (PCIe)").
 */
export function boundTo(m, boundBy) {
  return !!boundBy && (m.name === boundBy || m.id === boundBy ||
    m.name.startsWith(`${boundBy} (`));
}

function memoryNamed(memories, boundBy) {
  return memories.find((m) => boundTo(m, boundBy)) || null;
}

/**
 * Which memory roofs a view draws (XProf's rule): HBM always, every other memory only when an
 * op of the view is bound by it; the others are `available` (listed, not drawn).
 */
export function drawnMemories(device, records) {
  const memories = memoriesOf(device);
  const bound = new Set(records.map((r) => r.bound_by));
  const drawn = memories.filter((m) => m.id === 'hbm' || [...bound].some((b) => boundTo(m, b)));
  if (!drawn.length && memories.length) drawn.push(memories[0]);
  return {drawn, available: memories.filter((m) => !drawn.includes(m))};
}

/** The binding roof of a record: {id, label} of the memory or compute roof it is bound by. */
export function bindingRoof(device, r) {
  if (r.bound_by === 'Compute' && positive(r.peak_flop_rate)) {
    const p = r.precision && r.precision !== 'mixed' ? `${r.precision} ` : '';
    return {id: `compute:${r.peak_flop_rate}`,
      label: `Compute (${p}${fmtFlopRate(r.peak_flop_rate)})`};
  }
  const m = memoryNamed(memoriesOf(device), r.bound_by);
  if (m) return {id: `memory:${m.id}`, label: `${m.name} (${fmtBandwidth(m.peak_gbs)})`};
  return null;
}

function span(values) {
  let lo = Infinity; let hi = 0;
  for (const v of values) if (positive(v)) { lo = Math.min(lo, v); hi = Math.max(hi, v); }
  return Number.isFinite(lo) ? [lo, hi] : null;
}

/**
 * The axis ranges, roof lines and labels for a device and the records of a chart.
 * `fit: true` (program chart) fits the axes to the points (the roofs are clipped);
 * otherwise the ranges also hold the ridge points. `mixPeak`: the Total's compute roof.
 * `roofRecords`: the records whose roofs are drawn (default: all of `records`).
 */
export function roofGeometry(device, records, {mixPeak = null, dark = false, fit = false,
  roofRecords = null} = {}) {
  const {drawn, available} = drawnMemories(device, roofRecords || records);
  const computes = computeRoofs(device, roofRecords || records, mixPeak);
  const top = computes.length ? computes[0].value : null;
  const hbm = drawn.find((m) => m.id === 'hbm') || drawn[0] || null;
  const placed = records.filter((r) => positive(r.bottleneck_operational_intensity) &&
      positive(r.flop_rate));
  const xs = span(placed.map((r) => r.bottleneck_operational_intensity));
  const ys = span(placed.map((r) => r.flop_rate));
  const ridges = hbm ? computes.map((c) => c.value / hbm.peak_gbs) : [];
  let x0; let x1; let yLo; let yHi;
  if (fit && xs) {
    [x0, x1] = [xs[0] / 6, xs[1] * 6];
    yLo = ys[0] / 6;
    yHi = Math.max(ys[1] * 6, top && top < ys[1] * 1e3 ? top * 2 : 0);
  } else {
    const xr = span([...(xs || []), ...ridges]) || [0.01, 1000];
    [x0, x1] = [xr[0] / 10, xr[1] * 10];
    yHi = Math.max(ys ? ys[1] : 0, top || 0) * 3 || 1000;
    yLo = ys ? ys[0] / 4 : yHi / 1e6;
    if (hbm) yLo = Math.min(yLo, hbm.peak_gbs * x0);
  }
  const strip = records.some((r) => !positive(r.bottleneck_operational_intensity) ||
      !positive(r.flop_rate));
  const floorY = yLo / 4;
  const yDomain = [strip ? floorY / 3 : yLo, yHi];
  const stripTop = strip ? floorY * 2 : null;
  const fg = dark ? COMPUTE_COLOR_DARK : COMPUTE_COLOR;
  const lines = [];  // {roof, order, px, py}: one polyline per roof
  const labels = [];  // {roof, px, py, text, angle points, align}
  const roofs = [];  // {id, label, color, kind}
  const meetY = top || yHi;
  for (const m of drawn) {
    const id = `memory:${m.id}`;
    const color = memoryColor(m.id, dark);
    const xMeet = meetY / m.peak_gbs;
    const xStart = Math.min(x0, xMeet / 10);
    roofs.push({id, label: `${m.name} ${fmtBandwidth(m.peak_gbs)}`, color, kind: 'memory'});
    lines.push({roof: id, order: 0, px: xStart, py: m.peak_gbs * xStart, color});
    lines.push({roof: id, order: 1, px: xMeet, py: meetY, color});
    // The label sits on the visible part of the slope, rotated along it (none when too little
    // of the line is visible: the legend under the chart names it).
    const vis0 = Math.max(x0, yDomain[0] / m.peak_gbs);
    const vis1 = Math.min(x1, xMeet, yHi / m.peak_gbs);
    if (vis1 > vis0 && Math.log(vis1 / vis0) > 0.25 * Math.log(x1 / x0)) {
      const lx = Math.sqrt(vis0 * vis1);
      labels.push({roof: id, px: lx, py: m.peak_gbs * lx, text: roofs[roofs.length - 1].label,
        ax: lx, ay: m.peak_gbs * lx, bx: lx * 2, by: m.peak_gbs * lx * 2, color,
        align: 'center'});
    }
  }
  computes.forEach((c, i) => {
    const start = hbm ? c.value / hbm.peak_gbs : x0;
    roofs.push({id: c.id, label: c.label, color: fg, kind: 'compute'});
    lines.push({roof: c.id, order: 0, px: Math.max(start, x0 / 100), py: c.value, color: fg});
    lines.push({roof: c.id, order: 1, px: x1 * 100, py: c.value, color: fg});
    // Staggered along the line, so that close roofs (156 and 312 TFLOP/s) keep their labels
    // apart.
    const lx = Math.min(x1 / 1.3, Math.max(start * 1.5,
        x1 / 1.3 / (Math.sqrt(x1 / x0) ** (0.22 * (i % 4)))));
    labels.push({roof: c.id, px: lx, py: c.value, text: c.label, ax: 1, ay: 1, bx: 2,
      by: 1, color: fg, align: 'right'});
  });
  for (const r of records) {
    const b = bindingRoof(device, r);
    r.roof_id = b ? b.id : '';
    r.binding_roof = b ? b.label : null;
  }
  return {peak: top, mixPeak, computes, drawn, available, roofs, lines, labels,
    floorY, x0, x1, xDomain: [x0, x1], yDomain, stripTop,
    xTicks: decades(x0, x1), yTicks: decades(stripTop || yDomain[0], yDomain[1])};
}

/**
 * Positive coordinates for a log-log plot. Records with zero or unknown FLOP rate or intensity
 * have no place on the roofline: they go to a box at the bottom left, under the plot
 * (`at_floor`), laid out in a grid in rank order so each can be hovered — not spread along
 * the intensity axis, which would give them an intensity they do not have. Records that sit on
 * one spot (Total, Average and equal steps) are spread sideways a few pixels, so each can be
 * hovered and picked (`spread`: decades per point along x, `spreadY`: the closeness in y that
 * counts as one spot; 0 = none).
 */
export function placePoints(rows, g, {spread = 0, spreadY = 0} = {}) {
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
  if (spread > 0) {
    // Left to right, a record closer than `spread` decades in x to one already placed that is
    // within `spreadY` in y moves right until it is not: every record gets its own spot.
    const sy = spreadY || spread;
    const placed = rows.filter((r) => !r.at_floor).sort((a, b) => a.px - b.px || a.py - b.py);
    const done = [];
    for (const r of placed) {
      let min = 0;
      for (const q of done) {
        if (Math.abs(Math.log10(r.py / q.py)) < sy) min = Math.max(min, q.px * 10 ** spread);
      }
      if (r.px < min) r.px = min;
      done.push(r);
    }
  }
  return rows;
}

/** What a point is: a measurement under its roof, or a record with a caveat. */
export const POINT_FLAGS = ['measured', 'not a measurement (caveat)', 'above its roof'];
function pointFlag(r) {
  if (!r.caveat || r.caveat === 'container') return POINT_FLAGS[0];
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
