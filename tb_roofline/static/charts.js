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
      return {vega, vegaLite, vegaEmbed};
    })();
  }
  return vegaPromise;
}

export const CATEGORY_SCHEME = 'tableau20';
const ROOF_COLOR = '#7f7f7f';

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
 * Positive coordinates for a log-log plot: values ≤ 0 or unknown are drawn on the axis floor
 * (`floor`), flagged `at_floor` so the tooltip can say so.
 */
export function placePoints(rows, floorX, floorY) {
  for (const r of rows) {
    const x = r.bottleneck_operational_intensity;
    const y = r.flop_rate;
    const okX = typeof x === 'number' && x > 0;
    const okY = typeof y === 'number' && y > 0;
    r.px = okX ? x : floorX;
    r.py = okY ? y : floorY;
    r.at_floor = !(okX && okY);
  }
  return rows;
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

/**
 * The axis ranges and roof lines for a device and a set of records. One roof per memory with a
 * known bandwidth: y = bw·x up to the ridge point, then the compute peak.
 */
export function roofGeometry(device, records) {
  const peak = device && device.compute && device.compute.length ?
      device.compute[0].peak_gflops : null;
  const memories = ((device && device.memories) || []).filter((m) => m.peak_gbs > 0);
  const xs = records.map((r) => r.bottleneck_operational_intensity);
  const ys = records.map((r) => r.flop_rate);
  const ridges = peak ? memories.map((m) => m.ridge_point || peak / m.peak_gbs) : [];
  let xMin = positiveMin([...xs, ...ridges]);
  let xMax = positiveMax([...xs, ...ridges]);
  let yMin = positiveMin(ys);
  let yMax = positiveMax([...ys, peak || 0]);
  if (xMin === null) xMin = 0.01;
  if (xMax === null) xMax = 1000;
  if (yMax === null) yMax = 1000;
  if (yMin === null) yMin = yMax / 1e6;
  const x0 = xMin / 10;
  const x1 = xMax * 10;
  // The floor for zero/unknown values: a decade under the smallest positive value.
  const floorX = xMin / 10;
  const lowestRoofY = memories.length ? Math.min(...memories.map((m) => m.peak_gbs * x0)) : yMin;
  const floorY = Math.min(yMin, lowestRoofY) / 10;
  const roofs = [];
  const ridgePoints = [];
  if (peak) {
    for (const m of memories) {
      const ridge = m.ridge_point || peak / m.peak_gbs;
      roofs.push({memory: m.name, order: 0, px: x0, py: m.peak_gbs * x0});
      roofs.push({memory: m.name, order: 1, px: ridge, py: peak});
      roofs.push({memory: m.name, order: 2, px: x1, py: peak});
      ridgePoints.push({memory: m.name, px: ridge, py: peak,
                        label: `${m.name} ridge ${ridge.toPrecision(4)} FLOP/B`});
    }
  }
  // Other precisions' ceilings (GPU: fp32, tf32, bf16, ...) used by the records.
  const ceilings = [];
  const used = new Set(records.map((r) => r.precision).filter((p) => p && p !== 'mixed'));
  for (const c of (device && device.compute) || []) {
    if (!used.has(c.precision) || !c.peak_gflops || c.peak_gflops === peak) continue;
    const label = `${c.precision} ceiling ${(c.peak_gflops / 1000).toPrecision(3)} TFLOP/s`;
    ceilings.push({precision: c.precision, order: 0, px: x0, py: c.peak_gflops, label});
    ceilings.push({precision: c.precision, order: 1, px: x1, py: c.peak_gflops, label});
  }
  // Stagger the ridge labels (ridges of VMEM read/write are often close together).
  ridgePoints.sort((a, b) => a.px - b.px).forEach((r, i) => {
    r.ly = r.py * [1.3, 1.75, 2.35][i % 3];
  });
  // Explicit domains: the roofs' flat part and the floor stay inside the plot.
  const zeroX = records.some((r) => !(r.bottleneck_operational_intensity > 0));
  const zeroY = records.some((r) => !(r.flop_rate > 0));
  const xDomain = [zeroX ? floorX / 2 : x0, x1];
  const yDomain = [zeroY ? floorY / 2 : floorY * 5, Math.max(yMax, peak || 0) * 3];
  return {peak, roofs, ridgePoints, ceilings, floorX, floorY, x0, x1, xDomain, yDomain};
}

const xEnc = (title, g) => ({field: 'px', type: 'quantitative', title,
  scale: {type: 'log', nice: false, domain: g.xDomain}, axis: {format: '~g', grid: true}});
const yEnc = (title, g) => ({field: 'py', type: 'quantitative', title,
  scale: {type: 'log', nice: false, domain: g.yDomain}, axis: {format: '~s', grid: true}});

const X_TITLE = 'Operational intensity of the bounding resource (FLOP/byte)';
const Y_TITLE = 'FLOP rate (GFLOP/s per core)';

function ceilingLayers(geometry) {
  if (!geometry.ceilings.length) return [];
  const ends = geometry.ceilings.filter((c) => c.order === 1);
  return [
    {
      data: {values: geometry.ceilings},
      mark: {type: 'line', color: ROOF_COLOR, strokeWidth: 1, strokeDash: [2, 3], clip: true},
      encoding: {x: xEnc(X_TITLE, geometry), y: yEnc(Y_TITLE, geometry), order: {field: 'order'},
                 detail: {field: 'precision'}, tooltip: {field: 'label'}},
    },
    {
      data: {values: ends},
      mark: {type: 'text', align: 'right', dx: -4, dy: -6, fontSize: 10, color: ROOF_COLOR,
             clip: true},
      encoding: {x: xEnc(X_TITLE, geometry), y: yEnc(Y_TITLE, geometry),
                 text: {field: 'label'}},
    },
  ];
}

function roofLayers(geometry) {
  if (!geometry.roofs.length) return [];
  return [
    ...ceilingLayers(geometry),
    {
      data: {values: geometry.roofs},
      mark: {type: 'line', color: ROOF_COLOR, strokeWidth: 2, clip: true},
      encoding: {
        x: xEnc(X_TITLE, geometry),
        y: yEnc(Y_TITLE, geometry),
        order: {field: 'order'},
        strokeDash: {field: 'memory', type: 'nominal', title: 'Roof (memory)',
                     legend: {orient: 'right', symbolType: 'stroke'}},
      },
    },
    {
      data: {values: geometry.ridgePoints},
      mark: {type: 'point', shape: 'triangle-down', filled: true, size: 70, color: ROOF_COLOR,
             clip: true},
      encoding: {x: xEnc(X_TITLE, geometry), y: yEnc(Y_TITLE, geometry),
                 tooltip: {field: 'label'}},
    },
    {
      data: {values: geometry.ridgePoints},
      mark: {type: 'text', angle: 0, align: 'center', fontSize: 10, clip: true,
             color: ROOF_COLOR},
      encoding: {x: xEnc(X_TITLE, geometry), y: {...yEnc(Y_TITLE, geometry), field: 'ly'},
                 text: {field: 'label'}},
    },
  ];
}

/** Program-level roofline: Total, Total (HW), Average and every step. */
export function programSpec(geometry, dark) {
  return {
    $schema: 'https://vega.github.io/schema/vega-lite/v6.json',
    width: 'container',
    height: 360,
    autosize: {type: 'fit-x', contains: 'padding'},
    config: themeConfig(dark),
    layer: [
      ...roofLayers(geometry),
      {
        name: 'points',
        params: [{name: 'zoom', select: 'interval', bind: 'scales'}],
        data: {name: 'records'},
        mark: {type: 'point', filled: true, size: 140, opacity: 0.9, tooltip: {content: 'data'},
               cursor: 'pointer', clip: true},
        encoding: {
          x: xEnc(X_TITLE, geometry),
          y: yEnc(Y_TITLE, geometry),
          shape: {field: 'kind', type: 'nominal', title: 'Record',
                  scale: {domain: ['Total', 'Total (HW)', 'Host', 'Average', 'Step'],
                          range: ['square', 'diamond', 'cross', 'triangle-up', 'circle']}},
          color: {field: 'series', type: 'nominal', title: 'Record / step', sort: null,
                  scale: {scheme: 'category10'}, legend: {symbolLimit: 24}},
        },
      },
    ],
  };
}

/** Op-level roofline: every op, coloured by category, sized by time share, Program marked. */
export function opSpec(geometry, categories, dark) {
  return {
    $schema: 'https://vega.github.io/schema/vega-lite/v6.json',
    width: 'container',
    height: 460,
    autosize: {type: 'fit-x', contains: 'padding'},
    config: themeConfig(dark),
    layer: [
      ...roofLayers(geometry),
      {
        name: 'points',
        params: [{name: 'zoom', select: 'interval', bind: 'scales'}],
        data: {name: 'ops'},
        mark: {type: 'circle', opacity: 0.65, tooltip: {content: 'data'}, cursor: 'pointer',
               clip: true},
        encoding: {
          x: xEnc(X_TITLE, geometry),
          y: yEnc(Y_TITLE, geometry),
          color: {field: 'category', type: 'nominal', title: 'Category',
                  scale: {domain: categories, scheme: CATEGORY_SCHEME},
                  legend: {symbolLimit: 30}},
          size: {field: 'time_fraction', type: 'quantitative', title: 'Time share',
                 scale: {type: 'sqrt', range: [12, 700], zero: true}, legend: {format: '.2~%'}},
        },
      },
      {
        data: {name: 'program'},
        mark: {type: 'point', shape: 'cross', filled: true, size: 260, color: dark ? '#fff' :
          '#000', stroke: dark ? '#000' : '#fff', strokeWidth: 1, tooltip: {content: 'data'},
               clip: true},
        encoding: {x: xEnc(X_TITLE, geometry), y: yEnc(Y_TITLE, geometry)},
      },
      {
        data: {name: 'program'},
        mark: {type: 'text', text: 'Program', align: 'left', dx: 10, dy: -8, fontWeight: 'bold',
               clip: true},
        encoding: {x: xEnc(X_TITLE, geometry), y: yEnc(Y_TITLE, geometry)},
      },
      {
        // The selected op, from its own one-row data set (a filter over all ops would run on
        // every data change).
        name: 'selected',
        data: {name: 'selected'},
        mark: {type: 'circle', size: 420, filled: false, stroke: '#e53935', strokeWidth: 3,
               clip: true},
        encoding: {x: xEnc(X_TITLE, geometry), y: yEnc(Y_TITLE, geometry)},
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

/** A chart in a container element: embeds a spec, feeds data sets, exports images. */
export class Chart {
  constructor(container, {tooltip, onClick} = {}) {
    this.container = container;
    this.tooltip = tooltip;
    this.onClick = onClick;
    this.view = null;
    this.result = null;
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

  async setData(data) {
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
    await this.view.runAsync();
  }

  /** Items currently drawn by the mark named `points` (what the tests count). */
  pointCount(dataName) {
    if (!this.view) return 0;
    try {
      return this.view.data(dataName).length;
    } catch (e) {
      return 0;
    }
  }

  /** The data of the items a named Vega-Lite layer draws (`<name>_marks`), e.g. 'selected'. */
  markData(layerName) {
    if (!this.view) return [];
    const out = [];
    const walk = (node) => {
      if (!node) return;
      if (node.marktype && node.name === `${layerName}_marks`) {
        for (const item of node.items || []) out.push(item.datum);
        return;
      }
      for (const item of node.items || []) {
        if (item.items) item.items.forEach(walk);
        else if (item.marktype) walk(item);
      }
    };
    walk(this.view.scenegraph().root);
    return out;
  }

  async imageUrl(format) {
    if (!this.view) throw new Error('chart not rendered');
    return this.view.toImageURL(format, format === 'png' ? 2 : 1);
  }

  dispose() {
    if (this.result) this.result.finalize();
    this.result = null;
    this.view = null;
  }
}
