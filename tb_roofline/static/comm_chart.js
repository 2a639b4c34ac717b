// The communication roofline (docs/http_api.md, `/comm`): one point per collective at its
// message size (x, bytes) and achieved bus bandwidth (y, GB/s), under each device link's roof
// (GB/s per direction); what nccl-tests plots for a benchmark, for a real program. Beside it,
// each collective's exposed time. Filters by collective kind and link; CSV, PNG and SVG
// exports. Its own section: the app only constructs it, loads it with the view and exposes
// its chart as `window.__roofline.commChart` (a Chart: `.view` is the Vega view).
import {getJson} from './api.js';
import {Chart} from './charts.js';
import {download, downloadText, exportButtons, h, setChildren, slug} from './views/dom.js';
import {Tooltip} from './views/tooltip.js';

const ALL = '';
const NO_ROOF = '(no link roof)';
// The columns of the CSV export and of the tooltip, in order.
export const COMM_COLUMNS = ['program', 'operation', 'kind', 'message_bytes', 'group_size',
  'groups', 'group_form', 'group_assumed', 'algorithm', 'algorithm_stated', 'bus_factor',
  'occurrences', 'total_time_us', 'bus_bytes', 'bus_bw_gbs', 'algo_bw_gbs', 'link',
  'link_id', 'link_gbs', 'link_count', 'link_count_of', 'link_assumption', 'link_fraction',
  'exposed_us', 'exposed_shared', 'bound_by', 'caveat'];
const LABELS = {message_bytes: 'Message size S', group_size: 'Devices per group',
  groups: 'Groups', group_form: 'Groups named as', algorithm: 'Algorithm',
  bus_factor: 'Bus factor', occurrences: 'Executions', total_time_us: 'Time',
  bus_bw_gbs: 'Bus bandwidth', algo_bw_gbs: 'Algorithm bandwidth', link: 'Link',
  link_gbs: 'Link roof', link_fraction: 'Of the roof', exposed_us: 'Exposed time',
  link_count: 'Links used', link_assumption: 'Topology assumed',
  operation: 'Operation', kind: 'Collective'};

function fmt(v, digits = 3) {
  if (v === null || v === undefined || v === '') return '—';
  if (typeof v !== 'number') return String(v);
  return Number(v).toLocaleString('en-US', {maximumSignificantDigits: digits});
}

function bytes(v) {
  if (!v) return fmt(v);
  const units = [['GB', 1e9], ['MB', 1e6], ['kB', 1e3]];
  const [unit, scale] = units.find(([, s]) => v >= s) || ['B', 1];
  return `${fmt(v / scale)} ${unit}`;
}

/** A collective's row: its kind, message size and group size ("all-reduce 1.05 MB, 4 ranks"). */
function rowName(p) {
  const group = p.group_size ? `, ${p.group_size} ranks${p.group_assumed ? ' (assumed)' : ''}` : '';
  return `${p.kind} ${bytes(p.message_bytes)}${group}`;
}

/** How many groups run the collective, and of what size. */
function groupText(p) {
  if (!p.group_size) return '—';
  return p.groups ? `${p.groups} × ${p.group_size}` : `${p.group_size}`;
}

function usTime(v) {
  if (v === null || v === undefined) return '—';
  return v >= 1e6 ? `${fmt(v / 1e6)} s` : v >= 1e3 ? `${fmt(v / 1e3)} ms` : `${fmt(v)} µs`;
}

function shown(key, v) {
  if (key === 'message_bytes' || key === 'bus_bytes') return bytes(v);
  if (key.endsWith('_gbs')) return v === null || v === undefined ? '—' : `${fmt(v)} GB/s`;
  if (key.endsWith('_us')) return usTime(v);
  if (key === 'link_fraction') return v === null || v === undefined ? '—' : `${fmt(100 * v)}%`;
  return fmt(v);
}

/** The app's tooltip box, with a collective's own fields (and a roof's name and figure). */
class CommTooltip extends Tooltip {
  render(d) {
    if (d.roof) return h('div', {}, `${d.name}: ${fmt(d.gbs)} GB/s per direction`);
    const keys = ['kind', 'operation', 'message_bytes', 'group_size', 'groups', 'group_form',
      'algorithm', 'bus_bw_gbs', 'link_gbs', 'link_count', 'link_assumption', 'link_fraction',
      'exposed_us', 'total_time_us'];
    return h('table', {}, h('tbody', {}, keys.filter((k) => d[k] !== undefined).map((k) =>
      h('tr', {dataset: {key: k}}, h('th', {}, LABELS[k] || k), h('td', {}, shown(k, d[k]))))));
  }
}

/** The Vega-Lite spec: link roofs (rules, labelled), points coloured by collective kind. */
export function commSpec(hasRoofs) {
  const x = {field: 'message_bytes', type: 'quantitative', scale: {type: 'log'},
    title: 'Message size S (bytes)', axis: {format: '~s'}};
  const y = {field: 'bus_bw_gbs', type: 'quantitative', scale: {type: 'log'},
    title: 'Bus bandwidth (GB/s)'};
  const layers = [];
  if (hasRoofs) {
    layers.push({name: 'roofs', data: {name: 'roofs'},
      mark: {type: 'rule', strokeDash: [6, 3], tooltip: {content: 'data'}},
      encoding: {y: {field: 'gbs', type: 'quantitative'}, color: {value: '#e45756'},
        strokeWidth: {condition: {test: 'datum.id === hovered_link', value: 3.5},
          value: 1.5}}});
    layers.push({name: 'roof_labels', data: {name: 'roofs'},
      mark: {type: 'text', align: 'right', baseline: 'bottom', dy: -3, fontSize: 11},
      encoding: {x: {field: 'x', type: 'quantitative'}, y: {field: 'gbs',
        type: 'quantitative'}, text: {field: 'label'}, color: {value: '#e45756'}}});
  }
  layers.push({name: 'points', data: {name: 'points'},
    params: [{name: 'comm_zoom', select: 'interval', bind: 'scales'}],
    mark: {type: 'point', filled: true, size: 90, opacity: 0.85, tooltip: {content: 'data'},
      cursor: 'pointer', clip: true},
    encoding: {x, y, color: {field: 'kind', type: 'nominal', title: 'Collective'},
      shape: {field: 'groups_named', type: 'nominal', title: 'Groups'}}});
  return {$schema: 'https://vega.github.io/schema/vega-lite/v6.json', width: 'container',
    height: 320, autosize: {type: 'fit-x', contains: 'padding'}, padding: 0,
    config: {legend: {orient: 'bottom'}}, params: [{name: 'hovered_link', value: null}],
    layer: layers, resolve: {scale: {x: 'shared', y: 'shared'}}};
}

export class CommChartSection {
  constructor() {
    this.answer = null;
    this.sel = null;
    this.token = 0;
    this.tooltip = new CommTooltip();
    this.tooltip.el.id = 'comm-tooltip';  // the app's own box keeps #chart-tooltip
    this.kindSelect = h('select', {id: 'comm-kind', 'aria-label': 'Collective',
      onchange: () => this.render()});
    this.linkSelect = h('select', {id: 'comm-link', 'aria-label': 'Link',
      onchange: () => this.render()});
    this.noteEl = h('p', {class: 'muted', id: 'comm-note'});
    this.chartEl = h('div', {id: 'comm-chart', style: {width: '100%', minWidth: '0'}});
    this.exposedEl = h('div', {id: 'comm-exposed'});
    this.chart = new Chart(this.chartEl, {tooltip: this.tooltip.handler,
      onHover: (d) => this.highlight(d)});
    this.el = h('section', {id: 'comm-section', dataset: {status: 'empty'}},
        h('h2', {}, 'Communication roofline'),
        h('div', {class: 'toolbar'}, h('label', {}, 'Collective ', this.kindSelect),
            h('label', {}, 'Link ', this.linkSelect),
            exportButtons('comm', [['CSV', () => this.exportCsv()],
              ['PNG', () => this.exportImage('png')], ['SVG', () => this.exportImage('svg')]])),
        this.noteEl,
        // min-width 0: the canvas's width must not hold its box wider than the window (the
        // chart re-fits to its box: vega-embed's resize observer)
        h('div', {style: {minWidth: '0'}}, this.chartEl),
        // The exposed-time table under the chart at the section's full width (beside it,
        // it had a third of the width and showed two columns); it scrolls in its own box.
        h('div', {id: 'comm-exposed-box', style: {minWidth: '0'}},
            h('h3', {}, 'Exposed time'),
            h('div', {class: 'table-scroll'}, this.exposedEl)));
    this.el.hidden = true;
  }

  /** Fetch /comm for the view `{run, host, infeed}` and draw it. */
  async load(sel) {
    const token = ++this.token;
    if (!sel || !sel.run) return;
    // The app fills its root (the body) after the sections are made: the box goes in now.
    if (!this.tooltip.el.isConnected) document.body.appendChild(this.tooltip.el);
    this.el.dataset.status = 'loading';
    try {
      const answer = await getJson('comm', {run: sel.run, host: sel.host === '*' ? '' :
        sel.host, infeed_outfeed: sel.infeed});
      if (token !== this.token) return;
      this.answer = answer;
      this.sel = {...sel};
      this.fillFilters();
      await this.render();
    } catch (e) {
      if (token !== this.token) return;
      this.answer = null;
      this.el.hidden = false;
      setChildren(this.noteEl, `No communication roofline: ${e.message}`);
      this.el.dataset.status = 'error';
    }
  }

  fillFilters() {
    const a = this.answer;
    const option = (value, text, keep) => h('option', {value, selected: value === keep}, text);
    const kind = this.kindSelect.value;
    setChildren(this.kindSelect, option(ALL, 'All', kind),
        a.kinds.map((k) => option(k, k, kind)));
    // Links by the server's ids (a point's `link_id` is its roof's `id`), shown by name.
    const link = this.linkSelect.value;
    const links = a.links.map((l) => [l.id, l.name]);
    if (a.points.some((p) => !p.link_id)) links.push([NO_ROOF, NO_ROOF]);
    setChildren(this.linkSelect, option(ALL, 'All', link),
        links.map(([id, name]) => option(id, name, link)));
  }

  /** The points and roofs the filters keep: {points (drawable), roofs, undrawn}. */
  filtered() {
    const a = this.answer;
    const kind = this.kindSelect.value;
    const link = this.linkSelect.value;
    const kept = a.points.filter((p) => (!kind || p.kind === kind) &&
      (!link || (p.link_id || NO_ROOF) === link));
    // How the profile names the groups, for the marker ("not named": n assumed or not needed).
    const points = kept.filter((p) => p.message_bytes > 0 && p.bus_bw_gbs > 0)
        .map((p) => ({...p, groups_named: p.group_form || 'not named'}));
    const xmax = Math.max(...points.map((p) => p.message_bytes), 1);
    const roofs = a.links.filter((l) => !link || l.id === link).map((l) => ({
      roof: true, id: l.id, name: l.name, gbs: l.gbs, x: xmax, label: `${l.name}: ${fmt(l.gbs)} GB/s`}));
    return {points, roofs, undrawn: kept.length - points.length, kept};
  }

  async render() {
    const a = this.answer;
    if (!a) return;
    this.el.hidden = !a.points.length;
    if (!a.points.length) {
      this.el.dataset.status = 'empty';
      return;
    }
    const {points, roofs, undrawn, kept} = this.filtered();
    setChildren(this.noteEl, [
      `${points.length} collective${points.length === 1 ? '' : 's'} drawn`,
      undrawn ? ` (${undrawn} without time or bytes not drawn)` : '',
      a.links.length ? '. Roofs: GB/s per direction of each device link.' :
        '. No link roof for this device (a device file can give one: memory "interconnect").',
      ` ${a.latency_note.charAt(0).toUpperCase()}${a.latency_note.slice(1)}.`].join(''));
    await this.chart.setSpec(commSpec(roofs.length > 0), {points, roofs});
    this.renderExposed(kept);
    this.el.dataset.status = 'ready';
  }

  renderExposed(points) {
    const rows = [...points].sort((p, q) => (q.exposed_us ?? -1) - (p.exposed_us ?? -1));
    setChildren(this.exposedEl, h('table', {class: 'data-table', id: 'comm-exposed-table'},
        h('thead', {}, h('tr', {}, ['Collective', 'Groups', 'Calls', 'Exposed', 'Time',
          'Operation'].map((t) => h('th', {}, t)))),
        h('tbody', {}, rows.map((p) => h('tr', {dataset: {op: p.operation}},
            // What tells rows apart when many share one op name (record_param_comms): the
            // collective, its message size and its group.
            h('td', {class: 'comm-row-name'}, rowName(p)),
            h('td', {class: 'num', title: p.group_assumed ? 'group size assumed' : null},
                groupText(p)),
            h('td', {class: 'num'}, p.occurrences ?? '—'),
            h('td', {class: 'num', title: p.exposed_shared ? 'the op\'s exposed time, shared ' +
              'by time between its message sizes' : null}, usTime(p.exposed_us)),
            h('td', {class: 'num'}, usTime(p.total_time_us)),
            h('td', {class: 'comm-op', title: p.operation}, p.operation))))));
  }

  highlight(d) {
    const view = this.chart.view;
    if (!view) return;
    view.signal('hovered_link', d && !d.roof ? (d.link_id || null) : null).runAsync();
  }

  fileBase(what) {
    const s = this.sel || {};
    return `roofline_${slug(s.run)}_${slug(s.host === '*' ? 'all-hosts' : s.host)}_${what}`;
  }

  exportCsv() {
    if (!this.answer) return;
    const cell = (v) => {
      const s = v === null || v === undefined ? '' : String(v);
      return /[",\n]/.test(s) ? `"${s.replace(/"/g, '""')}"` : s;
    };
    const lines = [COMM_COLUMNS.join(',')].concat(this.filtered().kept.map((p) =>
      COMM_COLUMNS.map((k) => cell(p[k])).join(',')));
    downloadText(lines.join('\n') + '\n', `${this.fileBase('comm')}.csv`, 'text/csv');
  }

  async exportImage(format) {
    if (!this.chart.view) return;
    download(await this.chart.imageUrl(format), `${this.fileBase('comm')}.${format}`);
  }
}
