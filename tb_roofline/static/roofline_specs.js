// The Vega-Lite specs of the roofline charts (program, op) and the category bars; the roofs and
// where each record is placed are in roofs.js (re-exported). No DOM, no API access.
export {POINT_FLAGS, bindingRoof, drawnMemories, memoryColor, placePoints, roofGeometry}
  from './roofs.js';
import {POINT_FLAGS} from './roofs.js';

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

const X_TITLE = 'Operational intensity (FLOP/byte)';
const Y_TITLE = 'FLOP rate per core';
// The axis unit's SI prefixes: GFLOP/s values read as 1 MFLOP/s … 1 PFLOP/s.
export const Y_LABELS = "datum.value >= 1e6 ? format(datum.value / 1e6, '~g') + ' PFLOP/s' : " +
  "datum.value >= 1e3 ? format(datum.value / 1e3, '~g') + ' TFLOP/s' : " +
  "datum.value >= 1 ? format(datum.value, '~g') + ' GFLOP/s' : " +
  "datum.value >= 1e-3 ? format(datum.value * 1e3, '~g') + ' MFLOP/s' : " +
  "datum.value >= 1e-6 ? format(datum.value * 1e6, '~g') + ' kFLOP/s' : " +
  "format(datum.value * 1e9, '~g') + ' FLOP/s'";
// Intensity ticks: plain numbers (0.01 … 1000), SI above (10k).
export const X_LABELS = "datum.value >= 1e4 ? format(datum.value, '~s') : format(datum.value, '~g')";
const xEnc = (g) => ({field: 'px', type: 'quantitative', title: X_TITLE,
  scale: {type: 'log', nice: false, domain: g.xDomain},
  axis: {labelExpr: X_LABELS, grid: true, values: g.xTicks}});
const yEnc = (g) => ({field: 'py', type: 'quantitative', title: g.yTitle || Y_TITLE,
  scale: {type: 'log', nice: false, domain: g.yDomain},
  axis: {labelExpr: Y_LABELS, grid: true, values: g.yTicks}});

/** The box at the bottom left where records without a FLOP rate sit, and its label. */
function stripLayers(geometry, dark) {
  if (!geometry.stripTop) return [];
  const lx0 = Math.log10(geometry.xDomain[0]);
  const right = 10 ** (lx0 + (Math.log10(geometry.xDomain[1]) - lx0) * 0.3);
  const band = [{x: geometry.xDomain[0], x2: right, y: geometry.yDomain[0], y2: geometry.stripTop}];
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
      data: {values: [{px: right, py: Math.sqrt(geometry.yDomain[0] * geometry.stripTop)}]},
      mark: {type: 'text', align: 'left', baseline: 'middle', dx: 6, fontSize: 10,
             color: dark ? '#bdbdbd' : '#616161',
             text: '◀ no FLOP rate (no FLOPs or no known cost): not placed by intensity, ' +
               'hover each'},
      encoding: {x: xEnc(geometry), y: yEnc(geometry)},
    },
  ];
}

// A label's angle along its line on screen (computed from the scaled points, so it stays
// right through zooming).
const LABEL_ANGLE = "atan2(scale('y', datum.by) - scale('y', datum.ay), " +
    "scale('x', datum.bx) - scale('x', datum.ax)) * 180 / PI";

/**
 * The roofs: every memory roof drawn up to the compute roof it meets, one solid compute roof
 * per precision present, each labelled on its line (name and value) in its fixed colour; the
 * roof named by the `hl_roof` parameter (the hovered or selected point's binding roof) drawn
 * thicker.
 */
function roofLayers(geometry) {
  if (!geometry.lines.length) return [];
  const hl = 'datum.roof === hl_roof';
  return [
    {
      data: {values: geometry.lines},
      mark: {type: 'line', clip: true},
      encoding: {
        x: xEnc(geometry), y: yEnc(geometry), order: {field: 'order'}, detail: {field: 'roof'},
        // Fixed colours and dashes as values (no scale shared with the points' categories).
        color: {field: 'color', type: 'nominal', scale: null},
        strokeDash: {field: 'dash', type: 'nominal', scale: null},
        // The roofs that bind a record strong, the others faint; the hovered or selected
        // record's roof thicker still.
        strokeWidth: {condition: {test: hl, value: 4.5},
                      field: 'width', type: 'quantitative', scale: null},
        opacity: {condition: {test: hl, value: 1},
                  field: 'alpha', type: 'quantitative', scale: null},
      },
    },
    {
      data: {values: geometry.labels},
      mark: {type: 'text', clip: true, fontSize: 11, dy: {expr: 'datum.below ? 5 : -5'},
             baseline: {expr: "datum.below ? 'top' : 'bottom'"},
             angle: {expr: LABEL_ANGLE}, align: {expr: 'datum.align'},
             fontWeight: {expr: `${hl} || datum.strong ? 'bold' : 'normal'`}},
      encoding: {
        x: xEnc(geometry), y: yEnc(geometry), text: {field: 'text'},
        color: {field: 'color', type: 'nominal', scale: null},
        opacity: {condition: {test: hl, value: 1},
                  field: 'alpha', type: 'quantitative', scale: null},
      },
    },
  ];
}

function titled(text, subtitle) {
  return subtitle ? {text, subtitle, anchor: 'start', fontSize: 13, subtitleFontSize: 11} : text;
}

/** The program chart's plot height (views/program_section.js fits it to the first screen). */
export const PLOT_HEIGHT = 300;

const SERIES_COLORS = ['#1f77b4', '#ff7f0e', '#2ca02c', '#d62728', '#9467bd', '#8c564b',
  '#e377c2', '#7f7f7f', '#bcbd22', '#17becf'];
/** The colour of each program record (in order): Vega's category10. */
export const seriesColors = (n) => Array.from({length: n}, (_, i) => SERIES_COLORS[i % 10]);
/** The marker of each record kind. */
export const SERIES_SHAPES = {Total: 'square', 'Total (HW)': 'diamond', Host: 'cross',
  Average: 'triangle-up', Step: 'circle'};

/**
 * Program-level roofline: Total, Total (HW), hosts, Average and every step; one legend (colour
 * and shape by record), axes fitted to the points. `series`: the records' labels in order,
 * `kinds`: the kind of each.
 */
export function programSpec(geometry, dark, {series = [], kinds = [], subtitle = ''} = {}) {
  const shapeOf = (i) => SERIES_SHAPES[kinds[i]] || 'circle';
  const colors = seriesColors(series.length);
  return {
    $schema: 'https://vega.github.io/schema/vega-lite/v6.json',
    title: titled('Program-level roofline', subtitle),
    width: 'container',
    height: PLOT_HEIGHT,
    autosize: {type: 'fit-x', contains: 'padding'},
    config: themeConfig(dark),
    params: [{name: 'hl_roof', value: ''}],
    layer: [
      ...stripLayers(geometry, dark),
      ...roofLayers(geometry),
      {
        name: 'points',
        params: [{name: 'zoom', select: 'interval', bind: 'scales'}],
        data: {name: 'records'},
        mark: {type: 'point', filled: true, size: 150, opacity: 0.9, tooltip: {content: 'data'},
               cursor: 'pointer', clip: true, stroke: dark ? '#000' : '#fff', strokeWidth: 0.8},
        encoding: {
          x: xEnc(geometry),
          y: yEnc(geometry),
          // One legend for both (views/program_section.js draws it: Vega-Lite would draw two).
          shape: {field: 'series', type: 'nominal', sort: null, legend: null,
                  scale: {domain: series, range: series.map((_, i) => shapeOf(i))}},
          color: {field: 'series', type: 'nominal', sort: null, legend: null,
                  scale: {domain: series, range: colors}},
        },
      },
      {
        // The selected record, from its own data set.
        name: 'selected',
        data: {name: 'selected'},
        mark: {type: 'point', shape: 'circle', size: 420, filled: false, stroke: '#e53935',
               strokeWidth: 3, clip: true},
        encoding: {x: xEnc(geometry), y: yEnc(geometry)},
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
    params: [{name: 'time_share', value: timeShare}, {name: 'hl_roof', value: ''}],
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
    width: Math.max(120, width - 240),
    height: {step: 20},
    autosize: {type: 'pad'},
    config: themeConfig(dark),
    data: {name: 'cats'},
    mark: {type: 'bar', tooltip: {content: 'data'}, cursor: 'pointer'},
    encoding: {
      y: {field: 'category', type: 'nominal', sort: '-x', title: null,
          axis: {labelLimit: 150}},
      x: {field: 'self_time_us', type: 'quantitative', title: 'Self time',
          axis: {labelExpr: "datum.value >= 1e6 ? format(datum.value / 1e6, '~g') + ' s' : " +
            "datum.value >= 1e3 ? format(datum.value / 1e3, '~g') + ' ms' : " +
            "format(datum.value, '~g') + ' µs'"}},
      color: {field: 'category', type: 'nominal', legend: null,
              scale: {domain: categories, scheme: CATEGORY_SCHEME}},
    },
  };
}

// Per-item stamps of Chart.showOnly (which items are kept now, which were before).
