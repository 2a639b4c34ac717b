// The Vega-Lite specs of the roofline charts (program, op) and the category bars, the roofs'
// geometry and where each record is placed. No DOM, no API access.

export const CATEGORY_SCHEME = 'tableau20';

function themeConfig(dark) {
  const fg = dark ? '#e0e0e0' : '#212121';
  const grid = dark ? '#424242' : '#e0e0e0';
  return {
    background: dark ? '#303030' : '#ffffff',
    font: 'Roboto, sans-serif',
    // No per-item ARIA descriptions: they cost ~30% of the render time at 20k points on a
    // canvas that screen readers cannot use anyway (the tables carry the same data).
    aria: false,
    axis: {labelColor: fg, titleColor: fg, gridColor: grid, domainColor: fg, tickColor: fg,
           labelFontSize: 11, titleFontSize: 12},
    legend: {labelColor: fg, titleColor: fg, labelLimit: 220},
    title: {color: fg},
    text: {color: fg},
    view: {stroke: grid},
  };
}

/**
 * Positive coordinates for a log-log plot. Records with zero or unknown FLOP rate or intensity
 * (no cost, or no FLOPs) have no place on the roofline: they go to a strip under the plot
 * (`floorY`), spread along it in rank order so each can be hovered, and are flagged `at_floor`.
 * `x0`/`x1` are the strip's ends (the plot's x range).
 */
export function placePoints(rows, floorX, floorY, x0 = null, x1 = null) {
  const strip = [];
  for (const r of rows) {
    const x = r.bottleneck_operational_intensity;
    const y = r.flop_rate;
    const okX = typeof x === 'number' && x > 0;
    const okY = typeof y === 'number' && y > 0;
    r.at_floor = !(okX && okY);
    r.px = okX ? x : floorX;
    r.py = okY ? y : floorY;
    if (r.at_floor) {
      r.py = floorY;
      strip.push(r);
    }
    r.flag = pointFlag(r);
  }
  if (strip.length && x0 > 0 && x1 > x0) {
    const lo = Math.log(x0);
    const span = Math.log(x1) - lo;
    strip.forEach((r, i) => {
      r.px = Math.exp(lo + span * (i + 0.5) / strip.length);
    });
  }
  return rows;
}

/** What a point is: a measurement under its roof, or a record with a caveat. */
export const POINT_FLAGS = ['measured', 'not a measurement (caveat)', 'above its roof'];
function pointFlag(r) {
  if (!r.caveat || r.caveat === 'container') return POINT_FLAGS[0];
  return r.caveat === 'above_roof' ? POINT_FLAGS[2] : POINT_FLAGS[1];
}

function positiveMin(values) {
  let m = Infinity;
  for (const v of values) if (typeof v === 'number' && v > 0 && v < m) m = v;
  return Number.isFinite(m) ? m : null;
}
function positiveMax(values) {
  let m = 0;
  for (const v of values) if (typeof v === 'number' && v > m) m = v;
  return m > 0 ? m : null;
}

const ROOF_COLORS = ['#3949ab', '#00897b', '#e65100', '#8e24aa', '#c0ca33', '#6d4c41',
  '#d81b60', '#546e7a'];
const CEILING_COLOR = '#9e9e9e';
const MIX_COLOR = '#212121';
const MIX_COLOR_DARK = '#fafafa';
const fmtTera = (gflops) => (gflops >= 1e3 ? `${(gflops / 1e3).toPrecision(3)} TFLOP/s` :
  `${gflops.toPrecision(3)} GFLOP/s`);

/**
 * The axis ranges and roof lines for a device and a set of records. One roof per memory with a
 * known bandwidth (y = bw·x up to the ridge point, then the compute peak), a ceiling per other
 * precision the records ran in, and the program's mix roof (`mixPeak`: the Total record's
 * `peak_flop_rate`) where it is none of those. Every line has its own legend entry: labels on
 * the plot would overlap.
 */
export function roofGeometry(device, records, {mixPeak = null, dark = false} = {}) {
  const peak = device && device.compute && device.compute.length ?
      device.compute[0].peak_gflops : null;
  const memories = ((device && device.memories) || []).filter((m) => m.peak_gbs > 0);
  const xs = records.map((r) => r.bottleneck_operational_intensity);
  const ys = records.map((r) => r.flop_rate);
  const ridges = peak ? memories.map((m) => m.ridge_point || peak / m.peak_gbs) : [];
  let xMin = positiveMin([...xs, ...ridges]);
  let xMax = positiveMax([...xs, ...ridges]);
  let yMin = positiveMin(ys);
  let yMax = positiveMax([...ys, peak || 0, mixPeak || 0]);
  if (xMin === null) xMin = 0.01;
  if (xMax === null) xMax = 1000;
  if (yMax === null) yMax = 1000;
  if (yMin === null) yMin = yMax / 1e6;
  const x0 = xMin / 10;
  const x1 = xMax * 10;
  const floorX = xMin / 10;
  const lowestRoofY = memories.length ? Math.min(...memories.map((m) => m.peak_gbs * x0)) : yMin;
  const floorY = Math.min(yMin, lowestRoofY) / 10;
  const lines = [];  // {roof, style, order, px, py}
  const legend = [];  // [label, color, style]
  const ridgePoints = [];
  if (peak) {
    memories.forEach((m, i) => {
      const ridge = m.ridge_point || peak / m.peak_gbs;
      const roof = `${m.name} roof (ridge ${ridge.toPrecision(3)} FLOP/B)`;
      const color = ROOF_COLORS[i % ROOF_COLORS.length];
      legend.push([roof, color, 'memory']);
      lines.push({roof, style: 'memory', order: 0, px: x0, py: m.peak_gbs * x0});
      lines.push({roof, style: 'memory', order: 1, px: ridge, py: peak});
      lines.push({roof, style: 'memory', order: 2, px: x1, py: peak});
      ridgePoints.push({roof, px: ridge, py: peak,
                        label: `${m.name} ridge point: ${ridge.toPrecision(4)} FLOP/B`});
    });
  }
  // Other precisions' ceilings (GPU: fp32, tf32, bf16, ...) the records ran in; one line per
  // value (bf16 and fp16 share theirs).
  const used = new Set(records.map((r) => r.precision).filter((p) => p && p !== 'mixed'));
  const byValue = new Map();
  for (const c of (device && device.compute) || []) {
    if (!used.has(c.precision) || !c.peak_gflops || c.peak_gflops === peak) continue;
    byValue.set(c.peak_gflops, [...(byValue.get(c.peak_gflops) || []), c.precision]);
  }
  const drawn = [peak, ...byValue.keys()].filter(Boolean);
  const ceilings = [];  // {precision, peak_gflops}: the precision ceilings drawn
  for (const [value, names] of byValue) {
    for (const precision of names) ceilings.push({precision, peak_gflops: value});
    const roof = `${names.join('/')} ceiling ${fmtTera(value)}`;
    legend.push([roof, CEILING_COLOR, 'ceiling']);
    lines.push({roof, style: 'ceiling', order: 0, px: x0, py: value});
    lines.push({roof, style: 'ceiling', order: 1, px: x1, py: value});
  }
  if (mixPeak && !drawn.some((v) => Math.abs(v / mixPeak - 1) < 0.005)) {
    const roof = `program mix roof ${fmtTera(mixPeak)}`;
    legend.push([roof, dark ? MIX_COLOR_DARK : MIX_COLOR, 'mix']);
    lines.push({roof, style: 'mix', order: 0, px: x0, py: mixPeak});
    lines.push({roof, style: 'mix', order: 1, px: x1, py: mixPeak});
  }
  const strip = records.some((r) => !(r.bottleneck_operational_intensity > 0) ||
      !(r.flop_rate > 0));
  // Explicit domains: the roofs' flat part and the strip stay inside the plot.
  const xDomain = [strip ? floorX / 2 : x0, x1];
  const yDomain = [strip ? floorY / 2 : floorY * 5, Math.max(yMax, peak || 0) * 3];
  // The strip's band (no ticks there: its height is not a FLOP rate).
  const stripTop = strip ? floorY * 2 : null;
  return {peak, mixPeak, lines, legend, ridgePoints, ceilings, floorX, floorY, x0, x1, xDomain,
    yDomain, stripTop, xTicks: decades(xDomain[0], xDomain[1]),
    yTicks: decades(stripTop || yDomain[0], yDomain[1])};
}

/** Tick values on a log axis: the powers of ten inside [lo, hi] (with 2 and 5 between them
 * when that gives fewer than three). */
function decades(lo, hi) {
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

const X_TITLE = 'Operational intensity of the bound-by resource, FLOP/B ' +
  '(column bottleneck_operational_intensity)';
const Y_TITLE = 'FLOP rate per core (column flop_rate)';
// GFLOP/s with a unit that reads at any scale (no "100m GFLOP/s").
const Y_LABELS = "datum.value >= 1e6 ? format(datum.value / 1e6, '~g') + ' PFLOP/s' : " +
  "datum.value >= 1e3 ? format(datum.value / 1e3, '~g') + ' TFLOP/s' : " +
  "datum.value >= 1 ? format(datum.value, '~g') + ' GFLOP/s' : " +
  "datum.value >= 1e-3 ? format(datum.value * 1e3, '~g') + ' MFLOP/s' : " +
  "datum.value >= 1e-6 ? format(datum.value * 1e6, '~g') + ' kFLOP/s' : " +
  "format(datum.value * 1e9, '~g') + ' FLOP/s'";

const xEnc = (g) => ({field: 'px', type: 'quantitative', title: X_TITLE,
  scale: {type: 'log', nice: false, domain: g.xDomain},
  axis: {format: '~g', grid: true, values: g.xTicks}});
const yEnc = (g) => ({field: 'py', type: 'quantitative', title: Y_TITLE,
  scale: {type: 'log', nice: false, domain: g.yDomain},
  axis: {labelExpr: Y_LABELS, grid: true, values: g.yTicks}});

/** The band under the plot where records without FLOPs or bytes sit, and its label. */
function stripLayers(geometry, dark) {
  if (!geometry.stripTop) return [];
  const band = [{x: geometry.xDomain[0], x2: geometry.xDomain[1], y: geometry.yDomain[0],
    y2: geometry.stripTop}];
  return [
    {
      data: {values: band},
      mark: {type: 'rect', color: dark ? '#424242' : '#f1f1f1', clip: true},
      encoding: {x: {field: 'x', type: 'quantitative', scale: {type: 'log', domain: geometry.xDomain}},
                 x2: {field: 'x2'},
                 y: {field: 'y', type: 'quantitative', scale: {type: 'log', domain: geometry.yDomain}},
                 y2: {field: 'y2'}},
    },
    {
      data: {values: [{px: geometry.xDomain[0], py: geometry.stripTop}]},
      mark: {type: 'text', align: 'left', baseline: 'bottom', dx: 4, dy: -1, fontSize: 10,
             color: dark ? '#bdbdbd' : '#616161',
             text: 'below: no FLOPs (data movement: see its bandwidth in the table) or no known ' +
               'cost — not on the FLOP-rate axis (hover each)'},
      encoding: {x: xEnc(geometry), y: yEnc(geometry)},
    },
  ];
}

function roofLayers(geometry) {
  if (!geometry.lines.length) return [];
  const styles = ['memory', 'ceiling', 'mix'];
  return [
    {
      data: {values: geometry.lines},
      mark: {type: 'line', strokeWidth: 2, clip: true},
      encoding: {
        x: xEnc(geometry), y: yEnc(geometry), order: {field: 'order'}, detail: {field: 'roof'},
        color: {field: 'roof', type: 'nominal', title: 'Roofs',
                scale: {domain: geometry.legend.map((l) => l[0]),
                        range: geometry.legend.map((l) => l[1])},
                legend: {orient: 'bottom', direction: 'vertical', symbolType: 'stroke',
                         labelLimit: 420, columns: 2}},
        strokeDash: {field: 'style', type: 'nominal', legend: null,
                     scale: {domain: styles, range: [[1, 0], [2, 3], [8, 3, 2, 3]]}},
        tooltip: {field: 'roof'},
      },
    },
    {
      data: {values: geometry.ridgePoints},
      mark: {type: 'point', shape: 'triangle-down', filled: true, size: 70, clip: true},
      encoding: {x: xEnc(geometry), y: yEnc(geometry),
                 color: {field: 'roof', type: 'nominal', legend: null},
                 tooltip: {field: 'label'}},
    },
  ];
}

function titled(text, subtitle) {
  return subtitle ? {text, subtitle, anchor: 'start', fontSize: 13, subtitleFontSize: 11} : text;
}

/** Program-level roofline: Total, Total (HW), hosts, Average and every step. */
export function programSpec(geometry, dark, {kinds = null, subtitle = ''} = {}) {
  const allKinds = ['Total', 'Total (HW)', 'Host', 'Average', 'Step'];
  const shapes = ['square', 'diamond', 'cross', 'triangle-up', 'circle'];
  const present = kinds ? allKinds.filter((k) => kinds.includes(k)) : allKinds;
  return {
    $schema: 'https://vega.github.io/schema/vega-lite/v6.json',
    title: titled('Program-level roofline', subtitle),
    width: 'container',
    height: 360,
    autosize: {type: 'fit-x', contains: 'padding'},
    config: themeConfig(dark),
    resolve: {scale: {color: 'independent'}},
    layer: [
      ...stripLayers(geometry, dark),
      ...roofLayers(geometry),
      {
        name: 'points',
        params: [{name: 'zoom', select: 'interval', bind: 'scales'}],
        data: {name: 'records'},
        mark: {type: 'point', filled: true, size: 140, opacity: 0.9, tooltip: {content: 'data'},
               cursor: 'pointer', clip: true},
        encoding: {
          x: xEnc(geometry),
          y: yEnc(geometry),
          shape: {field: 'kind', type: 'nominal', title: 'Record',
                  scale: {domain: present, range: present.map((k) => shapes[allKinds.indexOf(k)])}},
          color: {field: 'series', type: 'nominal', title: 'Record / step', sort: null,
                  scale: {scheme: 'category10'}, legend: {symbolLimit: 24}},
        },
      },
    ],
  };
}

/** Op-level roofline: every op, coloured by category, sized by time share, Program marked. */
export function opSpec(geometry, categories, dark, timeShare = 0,
    {flags = null, subtitle = '', what = 'ops'} = {}) {
  const fg = dark ? '#e0e0e0' : '#212121';
  const presentFlags = flags ? POINT_FLAGS.filter((f) => flags.includes(f)) : POINT_FLAGS;
  const flagShapes = {[POINT_FLAGS[0]]: 'circle', [POINT_FLAGS[1]]: 'diamond',
    [POINT_FLAGS[2]]: 'triangle-up'};
  return {
    $schema: 'https://vega.github.io/schema/vega-lite/v6.json',
    title: titled(`${what === 'kernels' ? 'Kernel' : 'Op'}-level roofline`, subtitle),
    width: 'container',
    height: 460,
    autosize: {type: 'fit-x', contains: 'padding'},
    config: themeConfig(dark),
    params: [{name: 'time_share', value: timeShare}],
    resolve: {scale: {color: 'independent'}},
    layer: [
      ...stripLayers(geometry, dark),
      ...roofLayers(geometry),
      {
        name: 'points',
        params: [{name: 'zoom', select: 'interval', bind: 'scales'}],
        data: {name: 'ops'},
        mark: {type: 'point', filled: true, opacity: 0.65, tooltip: {content: 'data'},
               cursor: 'pointer', clip: true},
        encoding: {
          x: xEnc(geometry),
          y: yEnc(geometry),
          color: {field: 'category', type: 'nominal', title: 'Category',
                  scale: {domain: categories, scheme: CATEGORY_SCHEME},
                  legend: {symbolLimit: 30}},
          // Measurements are circles; records with a caveat (async halves, host transfers,
          // no cost) diamonds; records above their roof triangles. Only kinds present are listed.
          shape: {field: 'flag', type: 'nominal', title: 'Point',
                  scale: {domain: presentFlags, range: presentFlags.map((f) => flagShapes[f])},
                  legend: {symbolFillColor: fg, symbolStrokeColor: fg}},
          // Sized by total time, which is proportional to the time share within a variant and
          // the same in both infeed/outfeed variants: toggling them re-encodes nothing. The
          // legend labels convert the time to a share with the `time_share` parameter
          // (1 / the variant's denominator, set by Chart.setParam).
          size: {field: 'total_time_us', type: 'quantitative', title: 'Time share',
                 scale: {type: 'sqrt', range: [12, 700], zero: true},
                 legend: {symbolFillColor: fg, symbolStrokeColor: fg, symbolOpacity: 0.6,
                          labelExpr: "time_share > 0 ? format(datum.value * time_share, '.2~%') " +
                   ": format(datum.value, '~s') + ' µs'"}},
        },
      },
      {
        data: {name: 'program'},
        mark: {type: 'point', shape: 'cross', filled: true, size: 260, color: dark ? '#fff' :
          '#000', stroke: dark ? '#000' : '#fff', strokeWidth: 1, tooltip: {content: 'data'},
               clip: true},
        encoding: {x: xEnc(geometry), y: yEnc(geometry)},
      },
      {
        data: {name: 'program'},
        mark: {type: 'text', text: 'Program', align: 'left', dx: 10, dy: -8, fontWeight: 'bold',
               clip: true},
        encoding: {x: xEnc(geometry), y: yEnc(geometry)},
      },
      {
        // The selected op, from its own one-row data set (a filter over all ops would run on
        // every data change).
        name: 'selected',
        data: {name: 'selected'},
        mark: {type: 'circle', size: 420, filled: false, stroke: '#e53935', strokeWidth: 3,
               clip: true},
        encoding: {x: xEnc(geometry), y: yEnc(geometry)},
      },
    ],
  };
}

/** Self time per category (bar chart, same colours as the op chart). */
export function categorySpec(categories, dark, width = 600) {
  return {
    $schema: 'https://vega.github.io/schema/vega-lite/v6.json',
    // A fixed plot width (container width minus the label column): Vega-Lite's 'container'
    // width with a discrete height warns on every compile.
    width: Math.max(200, width - 260),
    height: {step: 20},
    autosize: {type: 'pad'},
    config: themeConfig(dark),
    data: {name: 'cats'},
    mark: {type: 'bar', tooltip: {content: 'data'}, cursor: 'pointer'},
    encoding: {
      y: {field: 'category', type: 'nominal', sort: '-x', title: null,
          axis: {labelLimit: 200}},
      x: {field: 'self_time_us', type: 'quantitative', title: 'Self time (µs)'},
      color: {field: 'category', type: 'nominal', legend: null,
              scale: {domain: categories, scheme: CATEGORY_SCHEME}},
    },
  };
}

// Per-item stamps of Chart.showOnly (which items are kept now, which were before).
