// Chart tooltips: a compact box with the key numbers of the hovered record (what binds it, how
// far from its roof, what it is worth, whether it is a measurement); every metric is in the
// details of a selected point (detailsTable).
import {h, setChildren} from './dom.js';
import {CAVEATS, TOOLTIP_COLUMNS, fmtFlopRate, fmtFrac, fmtSig, fmtTime, recordMemories}
  from '../columns.js';
import {cursorAt, pickAt, reach} from '../pick.js';

// Records under the cursor besides the hovered one: items of the same mark whose marker
// covers the cursor, or that sit within this many pixels of the hovered one (records on one
// spot are drawn on one spot; the tooltip names each).
const SAME_SPOT_PX = 4;
const MAX_LISTED = 12;

/** The data of the other items of `item`'s mark under the cursor or on the same spot. */
export function itemsAt(item, cursor = null) {
  const mark = item && item.mark;
  if (!mark || !Array.isArray(mark.items) || typeof item.x !== 'number') return [];
  const out = [];
  for (const o of mark.items) {
    if (o === item || !o.datum || o.datum === item.datum) continue;
    const near = Math.abs(o.x - item.x) <= SAME_SPOT_PX && Math.abs(o.y - item.y) <= SAME_SPOT_PX;
    // A point mark's size is its area in px²: the cursor is on it within that radius.
    const under = cursor && Math.hypot(o.x - cursor.x, o.y - cursor.y) <= reach(o);
    if (near || under) out.push(o.datum);
  }
  return out;
}

const nameOf = (d) => (d.record_type === 'op' ? d.operation : d.series || d.kind || '');

export class Tooltip {
  constructor() {
    this.el = h('div', {class: 'chart-tooltip', id: 'chart-tooltip', role: 'tooltip'});
    this.el.hidden = true;
    document.body.appendChild(this.el);
    this.current = null;
    this.memoryIds = null;  // Memories of the device: other per-memory metrics are left out.
    this.columns = null;  // TOOLTIP_COLUMNS plus the device's extra memories (app.js).
    this.keys = null;  // The columns shown at once (null: every one of `columns`).
    this.device = null;  // The run's device: memory names and peaks of the memory rows.
    this.here = [];  // The other records on the hovered spot.
    this.cursor = null;  // The cursor in the hovered mark's coordinates.
    // The signature vega-embed expects for a custom tooltip handler; Vega calls it with the
    // view as `this`.
    const self = this;
    this.handler = function tooltipHandler(handler, event, item, value) {
      self.show(event, value, item, this);
    };
  }

  show(event, value, item = null, view = null) {
    if (!value || typeof value !== 'object') {
      this.hide();
      return;
    }
    // A record: the point nearest the cursor among those under it (pick.js), as a click.
    const cursor = item && value.record_type !== undefined ? cursorAt(view, event, item) : null;
    this.cursor = cursor;  // in the hovered mark's coordinates (read by the browser tests)
    const picked = cursor ? pickAt(item, cursor) : item;
    const datum = picked && picked !== item && picked.datum ? picked.datum : value;
    if (datum !== this.current) {
      this.current = datum;
      this.here = datum.record_type !== undefined ? itemsAt(picked, cursor) : [];
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
    if (d.record_type !== undefined) return this.recordTip(d);
    return this.columnsTip(d);
  }

  /**
   * A roofline record: what it is, its time (total, per core / GPU / chip, share), FLOP rate,
   * what binds it, and for every memory it moves bytes in its bandwidth and intensity; the
   * other records on the same spot listed under it.
   */
  recordTip(d) {
    const columns = this.columns || TOOLTIP_COLUMNS;
    const byKey = new Map(columns.map((c) => [c.key, c]));
    const rows = [];
    for (const key of this.keys || columns.map((c) => c.key)) {
      const c = byKey.get(key);
      if (!c || !(key in d) || key === 'caveat' || key === 'operation' || key === 'series') {
        continue;
      }
      if (key === 'step' && d.record_type === 'op') continue;
      // Self time shares are the ops' (a program record's is 0 by construction).
      if (key === 'self_time_percent' && d.record_type !== 'op') continue;
      const v = d[key];
      if (v === null || v === undefined || v === '' || (key === 'host' && v === '*')) continue;
      rows.push(row(c.label, c.format(v, d), key));
    }
    const memories = recordMemories(d, this.device);
    const memTable = memories.length ? h('table', {class: 'tooltip-memories'},
        h('thead', {}, h('tr', {}, h('th', {}, 'Memory'), h('th', {}, 'Bandwidth'),
            h('th', {}, 'of peak'), h('th', {}, 'Intensity'))),
        h('tbody', {}, memories.map((m) => h('tr', {dataset: {memory: m.id}},
            h('th', {}, m.name), h('td', {}, `${fmtSig(m.gbs)} GB/s`),
            h('td', {}, fmtFrac(m.util)),
            h('td', {}, m.intensity === null ? '—' : `${fmtSig(m.intensity)} FLOP/B`))))) :
      null;
    const here = this.here.slice(0, MAX_LISTED);
    const more = this.here.length - here.length;
    return h('div', {},
        h('div', {class: 'tooltip-title'}, nameOf(d)),
        d.caveat ? h('div', {class: `tooltip-note caveat-${d.caveat}`, dataset: {caveat: d.caveat}},
            h('strong', {}, d.caveat), ': ', CAVEATS[d.caveat] || '') : null,
        d.at_floor && !d.caveat ? h('div', {class: 'tooltip-note'},
            'Zero FLOPs or bytes: shown in the strip under the plot.') : null,
        h('table', {class: 'tooltip-main'}, h('tbody', {}, rows)),
        memTable,
        here.length ? h('div', {class: 'tooltip-here', dataset: {count: String(this.here.length)}},
            h('div', {class: 'muted'}, `Also on this spot (${this.here.length}):`),
            h('ul', {}, here.map((o) => h('li', {}, h('strong', {}, nameOf(o)),
                ` · ${fmtTime(o.total_time_us)} · ${fmtFlopRate(o.flop_rate)}`))),
            more > 0 ? h('div', {class: 'muted'}, `and ${more} more`) : null) : null,
        h('div', {class: 'muted tooltip-more'}, 'Click for the full record.'));
  }

  /** Any other datum (a compared pair): its columns. */
  columnsTip(d) {
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
