// Charts: loads the vendored Vega / Vega-Lite / vega-embed builds, builds the Vega-Lite specs of
// the roofline and category charts, and wraps the resulting views (data updates, selection,
// tooltips, PNG/SVG export). No API access here.
//
// CSP: TensorBoard's page CSP currently allows 'unsafe-eval', but we do not rely on it. Every
// view is created with `ast: true` and vega-embed then evaluates expressions with the bundled
// vega-interpreter instead of compiling them with `new Function`. The e2e suite runs the tab
// once under a CSP without 'unsafe-eval' and asserts there is no violation.

let vegaPromise = null;

/** Loads the vendored UMD builds (they register globalThis.vega, vegaLite, vegaEmbed). */
export function loadVega() {
  if (!vegaPromise) {
    vegaPromise = (async () => {
      await import('./vendor/vega.min.js');
      await import('./vendor/vega-lite.min.js');
      await import('./vendor/vega-embed.min.js');
      const {vega, vegaLite, vegaEmbed} = globalThis;
      if (!vega || !vegaLite || !vegaEmbed) throw new Error('chart library failed to load');
      installLayerCache(vega);
      return {vega, vegaLite, vegaEmbed};
    })();
  }
  return vegaPromise;
}

/**
 * A bitmap cache for the symbol layer that Chart.showOnly filters: redrawing 20,000
 * anti-aliased circles costs ~70 ms of software rasterisation, copying a bitmap of the same
 * items ~2 ms. Vega draws a symbol mark with `Marks.symbol.draw(context, scene, bounds)`; the
 * wrapper below serves a mark that carries a cache (`scene[LAYER_CACHE]`, set by
 * Chart._itemFilter) from a bitmap of the same subset (showOnly's `cacheKey`: every item, or a
 * filter state the caller names), drawn on the view's own canvas with the same data version,
 * scales and transform. The last few subsets are kept. Anything else (another mark, an
 * export's renderer, an unnamed subset) is drawn by Vega as usual.
 *
 * Pre-rendering: once the view has not been redrawn for PRERENDER_DELAY ms (a zoom, pan or
 * resize has settled), the bitmaps of the subsets the caller expects next
 * (`Chart.prerenderSubsets`: e.g. every point, the other infeed/outfeed variant) are drawn in
 * idle time (requestIdleCallback), PRERENDER_CHUNK items a step, so an input event waits for one
 * step at most (~5 ms). A filter change that needs a subset whose pre-rendering is under way
 * finishes it (only the items not drawn yet); a redraw with other scales or another transform
 * drops the work in progress and starts again after the next pause.
 */
const CACHED_SUBSETS = 5;
const PRERENDER_DELAY = 150;
const PRERENDER_CHUNK = 1000;
const LAYER_CACHE = Symbol('layerCache');
let symbolDraw = null;  // Vega's own Marks.symbol.draw.

function installLayerCache(vega) {
  const marks = vega.Marks && vega.Marks.symbol;
  if (!marks || marks[LAYER_CACHE]) return;
  const draw = marks.draw;
  symbolDraw = draw;
  marks.draw = function(context, scene, bounds, markTypes) {
    const cache = scene[LAYER_CACHE];
    if (!cache || !cache.usable(context, scene)) return draw.call(this, context, scene, bounds, markTypes);
    return cache.draw(draw, this, context, scene, bounds, markTypes);
  };
  marks[LAYER_CACHE] = true;
}

const idle = (fn) => (typeof requestIdleCallback === 'function' ?
  {idle: requestIdleCallback(fn)} : {timer: setTimeout(() => fn(null), 0)});
const cancelIdle = (handle) => {
  if (!handle) return;
  if (handle.idle !== undefined) cancelIdleCallback(handle.idle);
  else clearTimeout(handle.timer);
};

class LayerCache {
  constructor(view, filter, chart) {
    this.view = view;
    this.filter = filter;
    this.chart = chart;
    this.entries = new Map();  // cacheKey → {key: what it was drawn with, canvas}
    this.last = null;  // The last draw on the view's canvas: {width, height, transform, renderer}.
    this.jobs = [];  // Pre-rendering in progress: {subset, key, keep, items, index, canvas}.
    this.timer = null;
    this.idleHandle = null;
  }

  /** Only the view's own canvas renderer, and only for a named subset. */
  usable(context, scene) {
    const f = this.filter;
    if (f.cacheKey === null || scene.items !== f.shown || typeof document === 'undefined') {
      return false;
    }
    const canvas = this.view.container() && this.view.container().querySelector('canvas');
    return !!canvas && context.canvas === canvas && canvas.width > 0 && canvas.height > 0;
  }

  keyOf(width, height, t) {
    const scale = (name) => {
      try {
        const s = this.view.scale(name);
        return s ? [s.domain(), s.range()] : null;
      } catch (e) {
        return null;
      }
    };
    return JSON.stringify([this.filter.version, width, height, t, scale('x'), scale('y'),
      scale('size'), scale('color')]);
  }

  newCanvas(width, height, transform) {
    // Reuse the least recently used bitmap's canvas once the cache is full; the bitmap of
    // every item (subset '', what clearing the filters shows), the shown subset and those being
    // pre-rendered are kept.
    let canvas = null;
    if (this.entries.size >= CACHED_SUBSETS) {
      const keep = new Set(['', this.filter.cacheKey, ...this.jobs.map((j) => j.subset)]);
      const oldest = [...this.entries.keys()].find((k) => !keep.has(k));
      if (oldest !== undefined) {
        canvas = this.entries.get(oldest).canvas;
        this.entries.delete(oldest);
      }
    }
    canvas = canvas || document.createElement('canvas');
    canvas.width = width;  // Also clears it.
    canvas.height = height;
    canvas.getContext('2d').setTransform(...transform);
    return canvas;
  }

  /** Draws the next `count` items of a pre-rendering job (all of them: Infinity). */
  step(job, count) {
    if (!job.items) {
      const keep = job.keep;
      job.items = keep ? this.filter.all.filter((item) => keep(item.datum)) : this.filter.all;
    }
    if (!job.canvas) {
      job.canvas = this.newCanvas(this.last.width, this.last.height, this.last.transform);
    }
    const end = Math.min(job.items.length, job.index + count);
    if (end > job.index) {
      symbolDraw.call(this.last.renderer, job.canvas.getContext('2d'),
          {marktype: 'symbol', items: job.items.slice(job.index, end)}, null);
    }
    job.index = end;
    return end >= job.items.length;
  }

  draw(draw, renderer, context, scene, bounds, markTypes) {
    const subset = this.filter.cacheKey;
    const t = context.getTransform();
    const transform = [t.a, t.b, t.c, t.d, t.e, t.f];
    const {width, height} = context.canvas;
    const key = this.keyOf(width, height, transform);
    this.last = {width, height, transform, key, renderer};
    let entry = this.entries.get(subset);
    // A bitmap of another drawing, or of other items than those shown (a safety net: the
    // subset name is meant to say which they are).
    if (entry && (entry.key !== key || entry.count !== scene.items.length)) {
      this.entries.delete(subset);
      entry = null;
    }
    this.jobs = this.jobs.filter((j) => j.key === key);
    const job = !entry && this.jobs.find((j) => j.subset === subset);
    if (job) {
      // Being pre-rendered: draw what is left (the same items: the subset names the filter).
      this.jobs = this.jobs.filter((j) => j !== job);
      if (!job.items) job.items = scene.items;
      if (job.items.length === scene.items.length) {
        this.step(job, Infinity);
        entry = {key, canvas: job.canvas, count: job.items.length};
      }
    }
    if (!entry) {
      // The bitmap holds every item of the subset, also when Vega only redraws a dirty region
      // (the copy below is clipped to it).
      const canvas = this.newCanvas(width, height, transform);
      draw.call(renderer, canvas.getContext('2d'), scene, null, markTypes);
      entry = {key, canvas, count: scene.items.length};
    }
    this.entries.delete(subset);  // Most recently used last.
    this.entries.set(subset, entry);
    context.save();
    context.setTransform(1, 0, 0, 1, 0, 0);
    context.globalAlpha = 1;
    context.globalCompositeOperation = 'source-over';
    context.drawImage(entry.canvas, 0, 0);
    context.restore();
    this.schedule();
  }

  /** Pre-renders the expected subsets once the view has not been redrawn for a while. */
  schedule() {
    this.cancel({keepJobs: true});
    if (!this.chart.prerenderSubsets || typeof document === 'undefined') return;
    this.timer = setTimeout(() => {
      this.timer = null;
      this.idleHandle = idle((deadline) => this.work(deadline, true));
    }, PRERENDER_DELAY);
  }

  cancel({keepJobs = false} = {}) {
    clearTimeout(this.timer);
    this.timer = null;
    cancelIdle(this.idleHandle);
    this.idleHandle = null;
    if (!keepJobs) this.jobs = [];
  }

  /** One idle period of pre-rendering. */
  work(deadline, plan) {
    this.idleHandle = null;
    const start = performance.now();
    const left = () => (deadline ? deadline.timeRemaining() : 16 - (performance.now() - start));
    const last = this.last;
    if (!last || this.view !== this.chart.view || this.filter.mark[LAYER_CACHE] !== this) return;
    // The view must still be what was drawn last (a pending zoom redraws and reschedules).
    if (this.keyOf(last.width, last.height, last.transform) !== last.key) return;
    if (plan) {
      const have = (subset) => {
        const e = this.entries.get(subset);
        return e && e.key === last.key;
      };
      const jobs = [];
      for (const {cacheKey, keep} of this.chart.prerenderSubsets() || []) {
        if (cacheKey === null || cacheKey === undefined || have(cacheKey) ||
            jobs.some((j) => j.subset === cacheKey)) continue;
        const old = this.jobs.find((j) => j.subset === cacheKey && j.key === last.key);
        jobs.push(old || {subset: cacheKey, key: last.key, keep, items: null, index: 0,
          canvas: null});
      }
      this.jobs = jobs;
    }
    while (this.jobs.length && left() > 6) {
      const job = this.jobs[0];
      if (!this.step(job, PRERENDER_CHUNK)) continue;
      // Rasterise now (a copy into a 1×1 canvas makes Chromium play the recorded drawing)
      // rather than on first use.
      this.jobs.shift();
      this.flushCanvas = this.flushCanvas || Object.assign(document.createElement('canvas'),
          {width: 1, height: 1});
      this.flushCanvas.getContext('2d').drawImage(job.canvas, 0, 0, 1, 1, 0, 0, 1, 1);
      this.entries.set(job.subset, {key: job.key, canvas: job.canvas, count: job.items.length});
      // Pre-rendered bitmaps are the least recently used: what was shown is evicted last.
      for (const [k, e] of [...this.entries]) {
        if (k === job.subset) continue;
        this.entries.delete(k);
        this.entries.set(k, e);
      }
    }
    if (this.jobs.length) this.idleHandle = idle((d) => this.work(d, false));
  }
}

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
const KEPT = Symbol('kept');
const WAS = Symbol('was');
const FULL_REDRAW = 2000;

/** A chart in a container element: embeds a spec, feeds data sets, exports images. */
export class Chart {
  constructor(container, {tooltip, onClick} = {}) {
    this.container = container;
    this.tooltip = tooltip;
    this.onClick = onClick;
    this.view = null;
    this.result = null;
    this.filter = null;  // Chart.showOnly's state for the current view.
    // () => [{cacheKey, keep}]: the subsets of showOnly's layer worth pre-rendering in idle
    // time (those likely shown next); set by the caller.
    this.prerenderSubsets = null;
  }

  /**
   * Replaces the spec; `data` maps the spec's named data sets to rows. The rows go in as
   * inline `datasets` so the first render already has them (no empty-domain pass).
   */
  async setSpec(spec, data = {}) {
    const {vega, vegaEmbed} = await loadVega();
    this.dispose();
    const withData = {...spec, datasets: {...(spec.datasets || {}), ...data}};
    this.result = await vegaEmbed(this.container, withData, {
      mode: 'vega-lite',
      renderer: 'canvas',
      actions: false,
      ast: true,  // vega-interpreter: no `new Function`, works under a strict CSP.
      tooltip: this.tooltip || false,
      logLevel: vega.Warn,
    });
    this.view = this.result.view;
    if (this.onClick) {
      this.view.addEventListener('click', (event, item) => {
        this.onClick(item && item.datum ? item.datum : null, item, event);
      });
    }
  }

  /**
   * Shows only the items of the layer `layerName` (a Vega-Lite layer `name`) whose datum
   * passes `keep` (every item when `keep` is null). The data set keeps every row and nothing
   * goes through the dataflow: no tuple is removed or inserted, no item is re-encoded, scales
   * and legends stay as they are; the mark's items array is swapped for the kept subset, the
   * items that appear or disappear are marked dirty and the renderer redraws that region.
   * Drawing, picking (tooltips, clicks) and the PNG/SVG exports all read the mark's items, so
   * they see only the kept ones. `dataName` is the layer's data set (for pointCount).
   * `cacheKey` names the subset (the filter state) so that its bitmap can be kept and reused
   * (LayerCache); every item shown is always cached. `run: false` leaves the redraw to the
   * caller's next `view.runAsync()`.
   */
  async showOnly(layerName, dataName, keep, {cacheKey = null, run = true} = {}) {
    const f = this._itemFilter(layerName, dataName);
    if (!f) return;
    const before = f.shown;
    f.keep = keep || null;
    f.cacheKey = keep ? cacheKey : '';
    const after = keep ? f.all.filter((item) => keep(item.datum)) : f.all;
    f.shown = after;
    const view = this.view;
    const stamp = ++f.stamp;
    let changed = 0;
    for (const item of after) item[KEPT] = stamp;
    for (const item of before) {
      if (item[KEPT] !== stamp) {  // Disappears.
        view.dirty(item);
        changed++;
      }
      item[WAS] = stamp;
    }
    for (const item of after) {
      if (item[WAS] !== stamp) {  // Appears.
        view.dirty(item);
        changed++;
      }
    }
    const bounds = f.mark.bounds;
    if (bounds) {
      bounds.clear();
      for (const item of after) if (item.bounds) bounds.union(item.bounds);
    }
    if (changed > FULL_REDRAW && view._renderer) {
      // Many items: one full redraw is cheaper than clipping to their dirty region.
      view._renderer._redraw = true;
    }
    if (changed && run) await view.runAsync();
  }

  /** Installs the item filter of a layer on the current view (once per view). */
  _itemFilter(layerName, dataName) {
    if (!this.view) return null;
    if (this.filter && this.filter.view === this.view) return this.filter;
    const mark = this.findMark(layerName);
    if (!mark) return null;
    const f = {view: this.view, mark, dataName, all: mark.items || [], shown: null, keep: null,
      stamp: 0, version: 0, cacheKey: ''};
    f.shown = f.all;
    mark[LAYER_CACHE] = new LayerCache(this.view, f, this);
    // Vega assigns `mark.items` (its collector's array of every item) whenever the layer's
    // data changes: keep that as `all` and hand out the kept subset.
    Object.defineProperty(mark, 'items', {
      configurable: true,
      enumerable: true,
      get: () => f.shown,
      set: (items) => {
        f.version++;  // The layer's data changed: its bitmap cache is stale.
        f.all = items;
        f.shown = f.keep ? items.filter((item) => f.keep(item.datum)) : items;
      },
    });
    this.filter = f;
    return f;
  }

  /** Forgets the bitmaps of showOnly's layer (the benchmark times uncached redraws). */
  dropLayerCache() {
    const cache = this.filter && this.filter.mark[LAYER_CACHE];
    if (!cache) return;
    cache.entries.clear();
    cache.cancel();
  }

  /** Starts pre-rendering the bitmaps of `prerenderSubsets()` (after a pause, in idle time). */
  schedulePrerender() {
    const cache = this.filter && this.filter.view === this.view && this.filter.mark[LAYER_CACHE];
    if (cache && cache.last) cache.schedule();
  }

  /** The subsets whose bitmaps are ready for the current drawing (for the tests). */
  cachedSubsets() {
    const cache = this.filter && this.filter.mark[LAYER_CACHE];
    if (!cache || !cache.last) return [];
    return [...cache.entries].filter(([, e]) => e.key === cache.last.key).map(([k]) => k);
  }

  /** Whether bitmaps are still being pre-rendered (or about to be); for the benchmark. */
  prerendering() {
    const cache = this.filter && this.filter.mark[LAYER_CACHE];
    return !!cache && !!(cache.timer || cache.idleHandle);
  }

  /** The rows of a data set that the chart shows (all of them unless `showOnly` hides some). */
  shownData(dataName) {
    if (!this.view) return [];
    const rows = this.view.data(dataName);
    const f = this.filter;
    return f && f.view === this.view && f.dataName === dataName && f.keep ?
      rows.filter((r) => f.keep(r)) : rows;
  }

  /** Sets a top-level parameter (a Vega signal) and redraws what depends on it. */
  async setParam(name, value, {run = true} = {}) {
    if (!this.view || this.view.signal(name) === value) return;
    this.view.signal(name, value);
    if (run) await this.view.runAsync();
  }

  /** `run: false` leaves the dataflow run (and redraw) to the caller's next `runAsync()`. */
  async setData(data, {run = true} = {}) {
    if (!this.view) return;
    const {vega} = await loadVega();
    for (const [name, rows] of Object.entries(data)) {
      // Only the difference goes through the dataflow: narrowing a filter just removes
      // tuples, widening it just inserts the missing ones (rows are the same objects).
      const mark = Symbol('keep');
      for (const r of rows) r[mark] = true;
      const current = this.view.data(name);
      const removed = [];
      for (const t of current) {
        if (t[mark]) t[mark] = false;  // Present in both: neither removed nor added.
        else removed.push(t);
      }
      const added = rows.filter((r) => r[mark]);
      for (const r of rows) delete r[mark];
      if (!removed.length && !added.length) continue;
      this.view.change(name, vega.changeset().remove(removed).insert(added));
    }
    if (run) await this.view.runAsync();
  }

  /**
   * Updates a data set in place: `rows` are matched to the current tuples by `key`; the tuples'
   * changed `fields` are modified (nothing removed and re-inserted, so the marks are updated,
   * not rebuilt), new rows are inserted and missing ones removed.
   */
  async updateRows(name, rows, key, fields, {run = true} = {}) {
    if (!this.view) return;
    const {vega} = await loadVega();
    const current = new Map(this.view.data(name).map((t) => [t[key], t]));
    const changes = vega.changeset();
    let changed = false;
    for (const r of rows) {
      const t = current.get(r[key]);
      if (!t) {
        changes.insert(r);
        changed = true;
        continue;
      }
      current.delete(r[key]);
      for (const f of fields) {
        if (t[f] !== r[f]) {
          changes.modify(t, f, r[f]);
          changed = true;
        }
      }
    }
    if (current.size) {
      changes.remove([...current.values()]);
      changed = true;
    }
    if (!changed) return;
    this.view.change(name, changes);
    if (run) await this.view.runAsync();
  }

  /** How many rows of a data set the chart shows (what the tests count). */
  pointCount(dataName) {
    if (!this.view) return 0;
    try {
      return this.shownData(dataName).length;
    } catch (e) {
      return 0;
    }
  }

  /** The scenegraph mark of a named Vega-Lite layer (`<name>_marks`). */
  findMark(layerName) {
    if (!this.view) return null;
    let found = null;
    const walk = (node) => {
      if (!node || found) return;
      if (node.marktype && node.name === `${layerName}_marks`) {
        found = node;
        return;
      }
      for (const item of node.items || []) {
        if (item.items) item.items.forEach(walk);
        else if (item.marktype) walk(item);
      }
    };
    walk(this.view.scenegraph().root);
    return found;
  }

  /** The data of the items a named Vega-Lite layer draws (`<name>_marks`), e.g. 'selected'. */
  markData(layerName) {
    const mark = this.findMark(layerName);
    return mark ? (mark.items || []).map((item) => item.datum) : [];
  }

  async imageUrl(format) {
    if (!this.view) throw new Error('chart not rendered');
    return this.view.toImageURL(format, format === 'png' ? 2 : 1);
  }

  dispose() {
    const cache = this.filter && this.filter.mark[LAYER_CACHE];
    if (cache) cache.cancel();
    if (this.result) this.result.finalize();
    this.result = null;
    this.view = null;
    this.filter = null;
  }
}
