// Charts of a run comparison: both sides' points on one log-log roofline, each side under its own
// device's roofs, an arrow from a base record to its candidate coloured by faster / slower. The
// Vega-Lite specs and the data they draw; views are made with charts.js's Chart. No API access.
import {X_LABELS, Y_LABELS} from './roofline_specs.js';
import {boundTo, computeStyle, decades, memoryColor} from './roofs.js';
import {unitOf} from './columns.js';

export const CHANGES = ['faster', 'slower', 'same', 'new', 'removed'];
const CHANGE_COLORS = ['#2e7d32', '#d32f2f', '#78909c', '#1565c0', '#ef6c00'];
const ROOF_COLOR = '#7f7f7f';
const BASE_COLOR = '#9e9e9e';
const X_TITLE = 'Operational intensity (FLOP/byte)';
const Y_TITLE = 'FLOP rate per core';
// Arrows for the pairs that matter: the largest time changes that make up this share of all
// the change, at most MAX_ARROWS of them; the other pairs are drawn as points only.
const ARROW_SHARE = 0.9;
const MAX_ARROWS = 200;

const positive = (v) => typeof v === 'number' && v > 0;

/**
 * Axis ranges for the points of both sides (objects with `x`, `y`) and the roofs of both
 * devices: the roof lines of a side are drawn only when its device differs (else one set).
 */
export function compareGeometry(baseDevice, candDevice, points) {
  // XProf's rule (roofs.js): HBM always, another memory only where a record is bound by it.
  const bound = new Set(points.map((p) => p.bound).filter(Boolean));
  const memories = (d) => allMemories(d).filter((m) => m.id === 'hbm' ||
      [...bound].some((b) => boundTo(m, b)));
  let xMin = Infinity; let xMax = 0; let yMin = Infinity; let yMax = 0;
  for (const p of points) {
    if (positive(p.x)) { xMin = Math.min(xMin, p.x); xMax = Math.max(xMax, p.x); }
    if (positive(p.y)) { yMin = Math.min(yMin, p.y); yMax = Math.max(yMax, p.y); }
  }
  const sides = [['cand', candDevice], ['base', baseDevice]];
  const same = JSON.stringify(roofKey(baseDevice)) === JSON.stringify(roofKey(candDevice));
  // One compute roof per precision the side's records run under (their peak_flop_rate), as in
  // the single-run charts; the device's first peak when no record says.
  const peaksOf = (side, d) => {
    const mine = points.filter((p) => same || p.side === side).map((p) => p.peak)
        .filter(positive);
    const peaks = [...new Set(mine)].sort((a, b) => b - a);
    const first = firstPeak(d);
    return peaks.length ? peaks : (first ? [first] : []);
  };
  for (const [side, d] of same ? sides.slice(0, 1) : sides) {
    const peaks = peaksOf(side, d);
    if (!peaks.length) continue;
    yMax = Math.max(yMax, peaks[0]);
    for (const m of memories(d)) {
      for (const peak of peaks) {
        const ridge = peak / m.peak_gbs;
        xMin = Math.min(xMin, ridge);
        xMax = Math.max(xMax, ridge);
      }
    }
  }
  if (!Number.isFinite(xMin)) { xMin = 0.01; xMax = 1000; }
  if (!Number.isFinite(yMin)) { yMax = yMax || 1000; yMin = yMax / 1e6; }
  const x0 = xMin / 10;
  const x1 = xMax * 10;
  const floorX = xMin / 10;
  let lowest = yMin;
  for (const [, d] of sides) for (const m of memories(d)) lowest = Math.min(lowest, m.peak_gbs * x0);
  const floorY = lowest / 10;
  const roofs = [];
  const ridges = [];
  for (const [side, d] of same ? sides.slice(0, 1) : sides) {
    const peaks = peaksOf(side, d);
    if (!peaks.length) continue;
    const [peak, ...lower] = peaks;  // each memory roof rises to the highest compute roof
    const who = same ? '' : `${side === 'cand' ? 'candidate' : 'base'}: `;
    const mems = memories(d);
    // Roofs a placed record is judged against strong, the others faint (as in one run).
    const mine = points.filter((p) => same || p.side === side);
    const computeBinds = (v) => mine.some((p) => p.bound === 'Compute' && p.peak === v);
    const style = (color, dash, strong) => ({color, dash, width: strong ? 2.2 : 1.2,
      alpha: (strong ? 1 : 0.4) * (side === 'base' && !same ? 0.6 : 1)});
    for (const m of mems) {
      const ridge = peak / m.peak_gbs;
      const name = `${who}${m.name}`;
      // The memory roof runs on flat along the top compute roof: strong when either binds.
      const ms = style(memoryColor(m.id), null, mine.some((p) => boundTo(m, p.bound)) ||
          computeBinds(peak));
      roofs.push({roof: name, side, order: 0, px: x0, py: m.peak_gbs * x0, ...ms});
      roofs.push({roof: name, side, order: 1, px: ridge, py: peak, ...ms});
      roofs.push({roof: name, side, order: 2, px: x1, py: peak, ...ms});
      ridges.push({side, px: ridge, py: peak,
        label: `${who}${m.name} ridge ${ridge.toPrecision(4)} FLOP/B, peak ${fmtPeak(peak)}`});
    }
    const hbm = mems.find((m) => m.id === 'hbm') || mems[0];
    lower.forEach((p, i) => {  // a lower precision's roof: from where HBM meets it
      const ridge = hbm ? p / hbm.peak_gbs : x0;
      const name = `${who}compute ${fmtPeak(p)}`;
      const cs = style(...computeStyle(i + 1, false), computeBinds(p));
      roofs.push({roof: name, side, order: 0, px: ridge, py: p, ...cs});
      roofs.push({roof: name, side, order: 1, px: x1, py: p, ...cs});
      if (hbm) {
        ridges.push({side, px: ridge, py: p,
          label: `${who}${hbm.name} ridge ${ridge.toPrecision(4)} FLOP/B, peak ${fmtPeak(p)}`});
      }
    });
  }
  return {same, floorX, floorY, roofs, ridges, yTitle: `FLOP rate per ${unitOf(candDevice)}`, xDomain: [floorX / 2, x1],
    yDomain: [floorY / 2, Math.max(yMax, 1e-9) * 3]};
}

function roofKey(d) {
  return d ? [(d.compute || []).map((c) => [c.precision, c.peak_gflops]),
    allMemories(d).map((m) => [m.id, m.peak_gbs])] : null;
}
function firstPeak(d) {
  return d && d.compute && d.compute.length ? d.compute[0].peak_gflops : null;
}
function allMemories(d) {
  return ((d && d.memories) || []).filter((m) => m.peak_gbs > 0);
}
function fmtPeak(gflops) {
  return gflops >= 1e3 ? `${(gflops / 1e3).toPrecision(3)} TFLOP/s` : `${gflops.toPrecision(3)} GFLOP/s`;
}

/**
 * One point per side of each pair that can be placed: records with a caveat are compared in the
 * table but never placed as roofline measurements, nor are records without a FLOP rate or an
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
      if (pair[`${side}_caveat`]) {
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
      mark: {type: 'point', shape: 'triangle-down', filled: true, size: 60, color: ROOF_COLOR,
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

/** Both sides' placed coordinates, for the axis ranges. */
export function sidesXY(rows) {
  const out = [];
  for (const r of rows) {
    for (const side of ['base', 'cand']) {
      if (r[`${side}_caveat`]) continue;
      out.push({x: r[`${side}_bottleneck_operational_intensity`], y: r[`${side}_flop_rate`],
        bound: r[`${side}_bound_by`], side, peak: r[`${side}_peak_flop_rate`]});
    }
  }
  return out;
}
