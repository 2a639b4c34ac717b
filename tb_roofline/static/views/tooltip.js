// Chart tooltips: a compact box with the key numbers of the hovered record (what binds it, how
// far from its roof, what it is worth, whether it is a measurement); every metric is in the
// details of a selected point (detailsTable).
import {h, setChildren} from './dom.js';
import {CAVEATS, TOOLTIP_COLUMNS, fmtFrac, fmtTime} from '../columns.js';

export class Tooltip {
  constructor() {
    this.el = h('div', {class: 'chart-tooltip', id: 'chart-tooltip', role: 'tooltip'});
    this.el.hidden = true;
    document.body.appendChild(this.el);
    this.current = null;
    this.memoryIds = null;  // Memories of the device: other per-memory metrics are left out.
    this.columns = null;  // TOOLTIP_COLUMNS plus the device's extra memories (app.js).
    this.keys = null;  // The columns shown at once (null: every one of `columns`).
    // The signature vega-embed expects for a custom tooltip handler.
    this.handler = (handler, event, item, value) => this.show(event, value);
  }

  show(event, datum) {
    if (!datum || typeof datum !== 'object') {
      this.hide();
      return;
    }
    if (datum !== this.current) {
      this.current = datum;
      setChildren(this.el, this.render(datum));
    }
    this.el.hidden = false;
    const pad = 14;
    const {innerWidth: w, innerHeight: hgt} = window;
    const box = this.el.getBoundingClientRect();
    let x = event.clientX + pad;
    let y = event.clientY + pad;
    if (x + box.width > w) x = Math.max(0, event.clientX - box.width - pad);
    if (y + box.height > hgt) y = Math.max(0, hgt - box.height - 4);
    this.el.style.left = `${x + window.scrollX}px`;
    this.el.style.top = `${y + window.scrollY}px`;
  }

  hide() {
    this.current = null;
    this.el.hidden = true;
  }

  render(d) {
    // Category-bar data and roof/ridge points have their own small shapes.
    if (d.self_time_us !== undefined && d.rank === undefined) {
      return h('table', {}, h('tbody', {},
          row('Category', d.category), row('Self time', fmtTime(d.self_time_us)),
          row('Share of self time', fmtFrac(d.share)), row('Ops', d.ops)));
    }
    if (d.record_type === undefined && d.label !== undefined) {
      return h('div', {}, d.label);
    }
    const columns = this.columns || TOOLTIP_COLUMNS;
    const byKey = new Map(columns.map((c) => [c.key, c]));
    const rows = [];
    for (const key of this.keys || columns.map((c) => c.key)) {
      const c = byKey.get(key);
      if (!c || !(key in d) || key === 'caveat') continue;
      if (key === 'step' && d.record_type === 'op') continue;
      const v = d[key];
      if (v === null || v === undefined || v === '') continue;
      rows.push(row(c.label, c.format(v, d), key));
    }
    return h('div', {},
        d.caveat ? h('div', {class: `tooltip-note caveat-${d.caveat}`, dataset: {caveat: d.caveat}},
            h('strong', {}, d.caveat), ': ', CAVEATS[d.caveat] || '') : null,
        d.at_floor && !d.caveat ? h('div', {class: 'tooltip-note'},
            'Zero FLOPs or bytes: shown in the strip under the plot.') : null,
        h('table', {}, h('tbody', {}, rows)),
        d.record_type === 'op' ? h('div', {class: 'muted tooltip-more'},
            'Click for every metric.') : null);
  }
}

/** Every metric of a record, as a two-column table (the details of a selected point). */
export function detailsTable(d, columns = TOOLTIP_COLUMNS, memoryIds = null) {
  const memories = memoryIds ? new Set(memoryIds) : null;
  const rows = [];
  for (const c of columns) {
    if (!(c.key in d)) continue;
    if (c.memory && memories && !memories.has(c.memory)) continue;
    if (c.key === 'step' && d.record_type === 'op') continue;
    const v = d[c.key];
    if (v === null || v === undefined || v === '') continue;
    rows.push(row(c.label, c.format(v, d), c.key));
  }
  return h('div', {class: 'details'},
      d.caveat ? h('p', {class: `tooltip-note caveat-${d.caveat}`}, h('strong', {}, d.caveat),
          ': ', CAVEATS[d.caveat] || '') : null,
      h('table', {class: 'details-table'}, h('tbody', {}, rows)));
}

function row(label, value, key) {
  return h('tr', {dataset: key ? {key} : {}}, h('th', {}, label), h('td', {}, String(value)));
}
