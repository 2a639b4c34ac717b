// The program-level section: Total, Total (HW), hosts, Average and steps on a chart and in a
// table. An object that gets what it needs explicitly: `ctx` (view state, loaded data, tooltip,
// theme; see app.js `sectionContext`) and owns its DOM, chart and table.
import {Chart, SERIES_SHAPES, placePoints, programSpec, roofGeometry, seriesColors}
  from '../charts.js';
import {PROGRAM_COLUMNS, PROGRAM_ESSENTIAL, perUnit, visibleColumns, withDeviceMemories} from '../columns.js';
import {exportButtons, h, setChildren} from './dom.js';
import {roofLegend} from './roof_legend.js';
import {servingPanel} from './serving_panel.js';
import {errorBox} from './states.js';
import {DataTable} from './table.js';
import {detailsTable} from './tooltip.js';
import {PLOT_HEIGHT} from '../roofline_specs.js';

// The least plot height the first screen is fitted to, and the room kept under the x axis.
const FIRST_SCREEN_MIN = 150;
const FIRST_SCREEN_MARGIN = 8;

const KIND_LABEL = {total: 'Total', total_hw: 'Total (HW)', host: 'Host', average: 'Average',
                    step: 'Step', step_hw: 'Step (HW counters)'};

/** Labels of program records: `kind` (Total, Step, ...) and `series` (Total, Step 3, ...). */
export function decorateProgram(rows) {
  for (const r of rows) {
    r.kind = KIND_LABEL[r.record_type] || r.record_type;
    r.series = r.record_type === 'host' ? `Host ${r.host}` :
      r.record_type === 'step' ? `Step ${r.step}` :
      r.record_type === 'step_hw' ? `Step ${r.step}` : r.step;
  }
  return rows;
}

const MARKS = {square: '■', diamond: '◆', cross: '✚', 'triangle-up': '▲', circle: '●'};

/** The one legend of the records: each record's marker in its colour (a click selects it). */
function recordsLegend(rows) {
  const colors = seriesColors(rows.length);
  return [h('span', {class: 'muted'}, 'Records: '), rows.map((r, i) => h('span', {
    class: 'record-item', dataset: {series: r.series}},
  h('span', {style: {color: colors[i]}}, MARKS[SERIES_SHAPES[r.kind] || 'circle']), ` ${r.series}`))];
}

export class ProgramSection {
  /** @param ctx {state, data, dark, tooltip, subtitle(), memoryIds(), exportTable(), exportChart()} */
  constructor(ctx) {
    this.ctx = ctx;
    this.chartEl = h('div', {id: 'program-chart', class: 'chart'});
    this.tableEl = h('div', {id: 'program-table-wrap'});
    this.errorEl = h('div', {class: 'section-error'});
    this.legendEl = h('div', {class: 'roof-legend', id: 'program-roofs'});
    this.recordsLegendEl = h('div', {class: 'records-legend', id: 'program-legend'});
    this.hwNoteEl = h('p', {class: 'hint', id: 'no-hw-record', hidden: true});
    this.extraEl = h('div', {class: 'program-extra'});  // the throughput line (guidance)
    this.selectionEl = h('div', {id: 'program-selection', class: 'selection'});
    this.servingEl = h('div', {class: 'program-serving'});  // serving steps (SGLang, vLLM)
    this.el = h('section', {id: 'program-section'},
        h('div', {class: 'section-head'}, h('h2', {}, 'Program-level roofline'),
            exportButtons('program', [
              ['CSV', () => ctx.exportTable('program', 'csv', this.table)],
              ['JSON', () => ctx.exportTable('program', 'json', this.table)],
              ['PNG', () => ctx.exportChart(this.chart, 'program', 'png')],
              ['SVG', () => ctx.exportChart(this.chart, 'program', 'svg')]])),
        this.errorEl, this.extraEl, this.chartEl, this.recordsLegendEl, this.legendEl,
        this.hwNoteEl, this.selectionEl, this.servingEl,
        h('details', {class: 'program-table-details', open: true},
            h('summary', {}, 'Program records'), this.tableEl));
    this.chart = new Chart(this.chartEl, {tooltip: ctx.tooltip.handler,
      onHover: (datum) => this.highlight(datum),
      onClick: (datum) => this.select(datum && datum.series !== undefined ? datum.series : null)});
    this.table = new DataTable(this.tableEl, {id: 'program-table', columns: PROGRAM_COLUMNS,
      rowKey: (r) => r.series, searchable: false, paginated: false,
      essential: PROGRAM_ESSENTIAL, stickyKey: 'series',
      onRowClick: (r) => this.select(r.series)});
    this.selected = null;
  }

  /** The chart's geometry for these records: the points, their roofs and the top peak. */
  geometry(records) {
    const d = this.ctx.data;
    const total = records.find((r) => r.record_type === 'total');
    return roofGeometry(d.device, records, {mixPeak: total ? total.peak_flop_rate : null,
      dark: this.ctx.dark});
  }

  async render() {
    const d = this.ctx.data;
    if (d.errors.program || !d.program) {
      setChildren(this.errorEl, errorBox(d.errors.program, 'the program-level roofline'));
      this.chart.dispose();
      this.chartEl.hidden = true;
      this.tableEl.hidden = true;
      return;
    }
    setChildren(this.errorEl);
    this.chartEl.hidden = false;
    this.tableEl.hidden = false;
    const rows = decorateProgram(d.program);
    const g = this.geometry(rows);
    this.geometryNow = g;
    placePoints(rows, g);
    if (!rows.length) {
      setChildren(this.errorEl, h('p', {class: 'muted'}, 'No program-level records.'));
    }
    this.table.setColumns(perUnit(visibleColumns(
        withDeviceMemories(PROGRAM_COLUMNS, d.device && d.device.memories), this.ctx.memoryIds(),
        rows, d.programColumns, d.device && d.device.kind), d.device));
    this.table.setRows(rows);
    setChildren(this.legendEl, roofLegend(g, d.device));
    setChildren(this.servingEl, servingPanel(d.servingSteps));
    setChildren(this.recordsLegendEl, recordsLegend(rows));
    // Why there is no "Total (HW)" record (GPU traces): no hardware counters in the trace.
    const gpu = d.device && d.device.kind === 'gpu';
    this.hwNoteEl.hidden = !(gpu && !d.hasHw);
    setChildren(this.hwNoteEl, 'No “Total (HW)” record: the trace has no hardware FLOP ' +
        'counters (CUPTI range-profiler SASS counters); FLOPs are counted from the ops’ ' +
        'shapes and kernels.');
    await this.chart.setSpec(programSpec(g, this.ctx.dark, {series: rows.map((r) => r.series),
      kinds: rows.map((r) => r.kind), subtitle: this.ctx.subtitle()}),
    {records: rows, selected: []});
    this.fitFirstScreen();
    this.watchAbove();
    if (this.selected && rows.some((r) => r.series === this.selected)) this.select(this.selected);
    else this.selected = null;
  }

  /**
   * The first screen shows the chart with both axes (docs/frontend.md, "Layout"): the plot's
   * height is what is left of the window under the chart's top, between FIRST_SCREEN_MIN and
   * the spec's height (PLOT_HEIGHT). When even the least height would not fit (the panels
   * above were opened), the chart keeps its full height: shrinking it would win nothing.
   */
  fitFirstScreen() {
    const view = this.chart.view;
    const canvas = this.chartEl.querySelector('canvas');
    if (!view || !canvas || this.chartEl.hidden) return;
    const box = canvas.getBoundingClientRect();
    const plot = view.height();
    const around = box.height - plot;  // title, axes and padding
    const room = Math.floor(window.innerHeight - (box.top + window.scrollY) - around -
      FIRST_SCREEN_MARGIN);
    const want = room >= FIRST_SCREEN_MIN ? Math.min(PLOT_HEIGHT, room) : PLOT_HEIGHT;
    if (Math.abs(want - plot) >= 2) view.height(want).runAsync();
  }

  /** Re-fits when what sits above the chart (banners, device and Opportunities panels) or
   * the window changes size. */
  watchAbove() {
    if (typeof ResizeObserver === 'undefined') return;
    if (!this.aboveObserver) {
      this.aboveObserver = new ResizeObserver(() => this.fitFirstScreen());
      window.addEventListener('resize', () => this.fitFirstScreen());
    }
    // Observed at each render: the section may not be in the page at the first one, and
    // observing an element twice is a no-op.
    for (let el = this.chartEl; el && el !== document.body; el = el.parentElement) {
      for (let prev = el.previousElementSibling; prev; prev = prev.previousElementSibling) {
        this.aboveObserver.observe(prev);
      }
    }
  }

  /** Replaces the records (infeed/outfeed switch) if they fit the current axes. */
  async replaceRecords(program) {
    const g = this.geometryNow;
    decorateProgram(program);
    placePoints(program, g);
    const inside = program.every((r) => r.px >= g.xDomain[0] && r.px <= g.xDomain[1] &&
        r.py >= g.yDomain[0] && r.py <= g.yDomain[1]);
    if (!inside) return false;
    this.table.setRows(program);
    await this.chart.setData({records: program, selected: []});
    return true;
  }

  /** The binding roof of the hovered record drawn thicker (the selected one's otherwise). */
  highlight(datum) {
    const row = datum && datum.roof_id !== undefined ? datum : this.selectedRow();
    this.chart.setParam('hl_roof', row ? row.roof_id || '' : '');
  }

  selectedRow() {
    const rows = (this.ctx.data && this.ctx.data.program) || [];
    return this.selected ? rows.find((r) => r.series === this.selected) || null : null;
  }

  /** The full record of the selected point (every metric), under the chart. */
  showDetails(row) {
    if (!row) {
      setChildren(this.selectionEl);
      return;
    }
    const tooltip = this.ctx.tooltip;
    setChildren(this.selectionEl,
        h('div', {class: 'selection-head'}, h('span', {}, 'Selected: ', h('strong', {}, row.series),
            ` (bound by ${row.bound_by}${row.binding_roof ? `: ${row.binding_roof}` : ''})`), ' ',
        h('button', {type: 'button', onclick: () => this.select(null)}, 'Clear')),
        h('details', {class: 'selection-details', open: true},
            h('summary', {}, 'The full record'),
            detailsTable(row, tooltip.columns || undefined, tooltip.memoryIds)));
  }

  /** Selects a record (by its label): table row, ring on the chart, its binding roof. */
  async select(series) {
    this.selected = series;
    this.table.select(series);
    const row = this.selectedRow();
    this.el.dataset.selected = row ? row.series : '';
    this.showDetails(row);
    await this.chart.setData({selected: row ? [row] : []});
    this.highlight(null);
  }
}
