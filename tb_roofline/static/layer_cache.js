// A bitmap cache for the op chart's points layer (Chart.showOnly): redrawing 20,000 anti-aliased
// circles costs ~70 ms of software rasterisation, copying a bitmap of the same items ~2 ms.
// See docs/frontend.md "Filtering 20,000 points".

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
export const LAYER_CACHE = Symbol('layerCache');
let symbolDraw = null;  // Vega's own Marks.symbol.draw.

export function installLayerCache(vega) {
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

export class LayerCache {
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

