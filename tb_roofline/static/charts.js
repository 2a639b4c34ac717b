// Charts: loads the vendored Vega / Vega-Lite / vega-embed builds and wraps the resulting views
// (data updates, selection, filtering without a dataflow pass, tooltips, PNG/SVG export); the
// specs are in roofline_specs.js (re-exported here), the points' bitmap cache in
// layer_cache.js. No API access here.
//
// CSP: TensorBoard's page CSP currently allows 'unsafe-eval', but we do not rely on it. Every
// view is created with `ast: true` and vega-embed then evaluates expressions with the bundled
// vega-interpreter instead of compiling them with `new Function`. The e2e suite runs the tab
// once under a CSP without 'unsafe-eval' and asserts there is no violation.

import {LAYER_CACHE, LayerCache, installLayerCache} from './layer_cache.js';
import {cursorAt, pickAt} from './pick.js';

export * from './roofline_specs.js';

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

const KEPT = Symbol('kept');
const WAS = Symbol('was');
const FULL_REDRAW = 2000;

/** A chart in a container element: embeds a spec, feeds data sets, exports images. */
export class Chart {
  constructor(container, {tooltip, onClick, onHover} = {}) {
    this.container = container;
    this.tooltip = tooltip;
    this.onClick = onClick;
    this.onHover = onHover;  // (datum | null): the hovered item's datum, on change
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
        const picked = this.pick(event, item);
        this.onClick(picked && picked.datum ? picked.datum : null, picked, event);
      });
    }
    if (this.onHover) {
      let last = null;
      const hover = (datum) => {
        if (datum === last) return;
        last = datum;
        this.onHover(datum);
      };
      this.view.addEventListener('mousemove', (event, item) => {
        const picked = this.pick(event, item);
        hover(picked && picked.datum ? picked.datum : null);
      });
      this.view.addEventListener('mouseout', () => hover(null));
    }
  }

  /** The item the cursor is on (pick.js: the nearest centre among overlapping points). */
  pick(event, item) {
    return item ? pickAt(item, cursorAt(this.view, event, item)) : item;
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
    if (!this.view) return;
    try {
      if (this.view.signal(name) === value) return;
    } catch (e) {
      return;  // The spec has no such parameter.
    }
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
