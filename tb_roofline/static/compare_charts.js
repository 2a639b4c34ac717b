// Charts of a run comparison: both sides' points on one log-log roofline, each side under its own
// device's roofs, an arrow from a base record to its candidate coloured by faster / slower. The
// Vega-Lite specs and the data they draw; views are made with charts.js's Chart. No API access.
import {X_LABELS, Y_LABELS} from './roofline_specs.js';
import {decades, roofGeometry} from './roofs.js';
import {fmtFlopRate, unitOf} from './columns.js';

export const CHANGES = ['faster', 'slower', 'same', 'new', 'removed'];
const CHANGE_COLORS = ['#2e7d32', '#d32f2f', '#78909c', '#1565c0', '#ef6c00'];
const RIDGE_COLOR = '#7f7f7f';
const BASE_COLOR = '#9e9e9e';
const X_TITLE = 'Operational intensity (FLOP/byte)';
const Y_TITLE = 'FLOP rate per core';
// Arrows for the pairs that matter: the largest time changes that make up this share of all
// the change, at most MAX_ARROWS of them; the other pairs are drawn as points only.
const ARROW_SHARE = 0.9;
const MAX_ARROWS = 200;

const positive = (v) => typeof v === 'number' && v > 0;

/**
 * The roofs and axis ranges of a comparison: roofs.js's roofGeometry for each side's device
 * and records (one module draws every roofline's roofs: the same rule, lines and ridges as a
 * single run's chart), both sides on one set of axes. `records`: sidesXY's record-like sides.
 * The roofs of a side are drawn once when both devices have the same roofs, else one set per
 * side (the base's fainter). `mixPeak`: each side's program FLOP-mix roof (program chart).
 */
export function compareGeometry(baseDevice, candDevice, records, {dark = false,
  mixPeak = {}} = {}) {
  const same = JSON.stringify(roofKey(baseDevice)) === JSON.stringify(roofKey(candDevice));
  const sides = same ? [['cand', candDevice, records]] : [['cand', candDevice], ['base',
    baseDevice]].map(([side, d]) => [side, d, records.filter((r) => r.side === side)]);
  const roofs = [];
  const ridges = [];
  let [x0, x1, y0, y1] = [Infinity, 0, Infinity, 0];
  for (const [side, d, mine] of sides) {
    // Records that are not roofline measurements (the server's `measurement`) choose roofs (as
    // in one run) but are not placed: no axis room.
    const placed = mine.filter((r) => r.measurement !== false &&
        positive(r.bottleneck_operational_intensity) && positive(r.flop_rate));
    const g = roofGeometry(d, placed, {roofRecords: mine, dark,
      mixPeak: mixPeak[side] ?? null});
    [x0, x1] = [Math.min(x0, g.xDomain[0]), Math.max(x1, g.xDomain[1])];
    [y0, y1] = [Math.min(y0, g.yDomain[0]), Math.max(y1, g.yDomain[1])];
    const who = same ? '' : `${side === 'cand' ? 'candidate' : 'base'}: `;
    const fade = side === 'base' && !same ? 0.6 : 1;
    const label = new Map(g.roofs.map((r) => [r.id, r.label]));
    for (const l of g.lines) {
      roofs.push({roof: `${who}${label.get(l.roof)}`, id: l.roof, side, order: l.order,
        px: l.px, py: l.py, color: l.color, dash: l.dash, width: l.width,
        alpha: l.alpha * fade});
    }
    for (const r of g.ridges) {
      ridges.push({side, roof: r.roof, px: r.px, py: r.py, label: `${who}${r.memory.name} ` +
        `ridge ${r.px.toPrecision(4)} FLOP/B, peak ${fmtFlopRate(r.peak)}`});
    }
  }
  if (!Number.isFinite(x0)) [x0, x1, y0, y1] = [0.01, 1000, 1e-3, 1000];
  return {same, roofs, ridges, yTitle: `FLOP rate per ${unitOf(candDevice)}`,
    xDomain: [x0, x1], yDomain: [y0, y1]};
}

function roofKey(d) {
  return d ? [(d.compute || []).map((c) => [c.precision, c.peak_gflops]),
    ((d && d.memories) || []).map((m) => [m.id, m.peak_gbs])] : null;
}

/**
 * One point per side of each pair that can be placed: a side that is not a roofline
 * measurement (its `measurement` false: the model's records.measurements) is compared in the
 * table but never placed (`caveated`), nor are records without a FLOP rate or an
 * intensity (no place on a roofline: `unplaced`, listed in the table). A point holds only
 * what the chart encodes (flat objects keep Vega's field access fast) and its `pair`.
 * Returns {points, caveated, unplaced}.
 */
export function pairPoints(pairs, geometry, timeKey) {
  const points = [];
  let caveated = 0;
  let unplaced = 0;
  for (const pair of pairs) {
    for (const side of ['base', 'cand']) {
      if (pair[`${side}_${timeKey}`] === null || pair[`${side}_${timeKey}`] === undefined) continue;
      if (pair[`${side}_measurement`] === false) {
        caveated++;
        continue;
      }
      const x = pair[`${side}_bottleneck_operational_intensity`];
      const y = pair[`${side}_flop_rate`];
      if (!(positive(x) && positive(y))) {
        unplaced++;
        continue;
      }
      points.push({px: x, py: y, at_floor: false, side, change: pair.change,
        t: pair[`${side}_${timeKey}`] || 0, pair});
    }
  }
  return {points, caveated, unplaced};
}

/** Arrows (base → candidate) for the matched pairs with the largest time changes. */
export function pairArrows(points, {share = ARROW_SHARE, max = MAX_ARROWS, all = false} = {}) {
  const byPair = new Map();
  for (const p of points) {
    const pair = p.pair;
    if (pair.status !== 'matched') continue;
    const e = byPair.get(pair) || {};
    e[p.side] = p;
    byPair.set(pair, e);
  }
  const both = [...byPair].filter(([, e]) => e.base && e.cand);
  both.sort((a, b) => Math.abs(b[0].delta_time_us) - Math.abs(a[0].delta_time_us));
  const total = both.reduce((acc, [pair]) => acc + Math.abs(pair.delta_time_us || 0), 0);
  const arrows = [];
  let covered = 0;
  for (const [pair, e] of both) {
    if (!all && (arrows.length >= max || (arrows.length && covered >= share * total))) break;
    if (!all && !pair.delta_time_us) break;  // unchanged pairs need no arrow
    covered += Math.abs(pair.delta_time_us || 0);
    arrows.push({bx: e.base.px, by: e.base.py, cx: e.cand.px, cy: e.cand.py,
      change: pair.change, pair});
  }
  return arrows;
}

const xEnc = (g, field = 'px') => ({field, type: 'quantitative', title: X_TITLE,
  scale: {type: 'log', nice: false, domain: g.xDomain}, axis: {labelExpr: X_LABELS, grid: true,
    values: decades(g.xDomain[0], g.xDomain[1])}});
const yEnc = (g, field = 'py') => ({field, type: 'quantitative', title: g.yTitle || Y_TITLE,
  scale: {type: 'log', nice: false, domain: g.yDomain}, axis: {labelExpr: Y_LABELS, grid: true,
    values: decades(g.yDomain[0], g.yDomain[1])}});
const changeScale = {domain: CHANGES, range: CHANGE_COLORS};
// Vega-Lite makes a layer pickable (hover, click) only with a selection or a tooltip: a tooltip
// that is always null costs the least per item (the view's own events show ours).
const PICKABLE = {tooltip: {expr: 'null'}};
const colorEnc = {field: 'change', type: 'nominal', title: 'Change', scale: changeScale};
const sizeEnc = (title) => ({field: 't', type: 'quantitative', title,
  scale: {type: 'sqrt', range: [14, 600], zero: true}});

function roofLayers(g) {
  if (!g.roofs.length) return [];
  // Each roof in its own colour and dash (memories as in one run, compute roofs per
  // precision); those a record is bound by strong, the others faint; the base's (only when
  // its device differs) fainter still. The legend names each roof.
  const names = [...new Set(g.roofs.map((r) => r.roof))];
  const first = new Map();
  for (const r of g.roofs) if (!first.has(r.roof)) first.set(r.roof, r);
  return [
    {
      data: {values: g.roofs},
      mark: {type: 'line', clip: true},
      encoding: {
        x: xEnc(g), y: yEnc(g), order: {field: 'order'},
        detail: {field: 'roof'},
        color: {field: 'roof', type: 'nominal', title: 'Roof',
                scale: {domain: names, range: names.map((n) => first.get(n).color)},
                legend: {orient: 'right', symbolType: 'stroke'}},
        strokeDash: {field: 'roof', type: 'nominal', legend: null,
                     scale: {domain: names, range: names.map((n) => first.get(n).dash || [1, 0])}},
        strokeWidth: {field: 'width', type: 'quantitative', scale: null},
        opacity: {field: 'alpha', type: 'quantitative', scale: null},
      },
    },
    {
      data: {values: g.ridges},
      mark: {type: 'point', shape: 'triangle-down', filled: true, size: 60, color: RIDGE_COLOR,
             clip: true},
      encoding: {x: xEnc(g), y: yEnc(g), tooltip: {field: 'label'}},
    },
  ];
}

// The arrowhead points along the arrow on screen: its angle comes from the scaled coordinates,
// so it stays right through zooming and on log axes.
const ARROW_ANGLE = "90 + atan2(scale('y', datum.cy) - scale('y', datum.by), " +
    "scale('x', datum.cx) - scale('x', datum.bx)) * 180 / PI";

/**
 * Both sides on one roofline. Data sets: `base_points`, `cand_points` ({px, py, change, t}),
 * `arrows` ({bx, by, cx, cy, change}), `selected` (the selected pair's points), `labels`
 * (program chart: text at points).
 */
export function compareSpec(g, dark, {height = 460, labels = false, sizeTitle = 'Self time (µs)'} = {}) {
  const fg = dark ? '#e0e0e0' : '#212121';
  const grid = dark ? '#424242' : '#e0e0e0';
  const layers = [
    ...roofLayers(g),
    {
      data: {name: 'arrows'},
      mark: {type: 'rule', strokeWidth: 1.4, opacity: 0.8, clip: true, ...PICKABLE},
      encoding: {x: xEnc(g, 'bx'), y: yEnc(g, 'by'), x2: {field: 'cx'}, y2: {field: 'cy'},
        color: colorEnc},
    },
    {
      data: {name: 'arrows'},
      mark: {type: 'point', shape: 'triangle-up', filled: true, size: 55, opacity: 0.9,
             clip: true, angle: {expr: ARROW_ANGLE}},
      encoding: {x: xEnc(g, 'cx'), y: yEnc(g, 'cy'),
        color: colorEnc},
    },
    // Grey: base positions of matched pairs; coloured: candidate positions and one-sided ops.
    // Few encoded channels (each is interpreted per item: 40,000 points must stay cheap);
    // hover and click are read from the view's events (no tooltip channel).
    {
      name: 'base_points',
      params: [{name: 'zoom', select: 'interval', bind: 'scales'}],
      data: {name: 'base_points'},
      mark: {type: 'circle', color: BASE_COLOR, opacity: 0.45, clip: true, ...PICKABLE},
      encoding: {x: xEnc(g), y: yEnc(g), size: sizeEnc(sizeTitle)},
    },
    {
      name: 'cand_points',
      data: {name: 'cand_points'},
      mark: {type: 'circle', opacity: 0.7, clip: true, cursor: 'pointer', ...PICKABLE},
      encoding: {x: xEnc(g), y: yEnc(g), color: colorEnc, size: sizeEnc(sizeTitle)},
    },
    {
      name: 'selected',
      data: {name: 'selected'},
      mark: {type: 'point', shape: 'circle', size: 500, filled: false, stroke: '#ff9800',
             strokeWidth: 3, clip: true},
      encoding: {x: xEnc(g), y: yEnc(g)},
    },
  ];
  if (labels) {
    layers.push({
      data: {name: 'labels'},
      mark: {type: 'text', align: 'left', dx: 9, dy: -7, fontSize: 11, color: fg, clip: true},
      encoding: {x: xEnc(g), y: yEnc(g), text: {field: 'label'}},
    });
  }
  return {
    $schema: 'https://vega.github.io/schema/vega-lite/v6.json',
    width: 'container',
    height,
    autosize: {type: 'fit-x', contains: 'padding'},
    config: {
      background: dark ? '#303030' : '#ffffff', font: 'Roboto, sans-serif', aria: false,
      axis: {labelColor: fg, titleColor: fg, gridColor: grid, domainColor: fg, tickColor: fg},
      legend: {labelColor: fg, titleColor: fg, labelLimit: 260},
      view: {stroke: grid},
    },
    layer: layers,
  };
}

/** The chart's two point sets: grey, the base positions of matched pairs; coloured, the
 * candidate positions and the ops only one side has (new, removed). */
export function bySide(points) {
  const base = [];
  const coloured = [];
  for (const p of points) (p.side === 'base' && p.pair.status === 'matched' ? base : coloured).push(p);
  return {base_points: base, cand_points: coloured};
}

/**
 * Each side of each pair as a record of its run (the fields roofs.js reads: intensity, FLOP
 * rate, compute roof, precision, caveat, the server's `binding_roof_id` and `measurement`), with
 * its `side`; a side the pair lacks (new, removed) is left out.
 */
export function sidesXY(rows) {
  const out = [];
  const keys = ['bottleneck_operational_intensity', 'flop_rate', 'peak_flop_rate', 'precision',
    'caveat', 'binding_roof_id', 'measurement', 'record_type'];
  for (const r of rows) {
    for (const side of ['base', 'cand']) {
      if (r[`${side}_bound_by`] === null || r[`${side}_bound_by`] === undefined) continue;
      const rec = {side};
      for (const k of keys) rec[k] = r[`${side}_${k}`] ?? null;
      out.push(rec);
    }
  }
  return out;
}
