// Which record the cursor is on, where points overlap: the tooltip, the hover highlight and a
// click all read it, so they agree.

/** The cursor in the coordinates of `item` (its mark's group), or null. Vega draws the scene
 * at the view's padding plus its origin (`view.origin()` leaves the padding out: 5 px by
 * default), then at each enclosing group's offset. */
export function cursorAt(view, event, item) {
  if (!view || !event || typeof event.clientX !== 'number' || !view.container) return null;
  const canvas = view.container() && view.container().querySelector('canvas');
  if (!canvas) return null;
  const box = canvas.getBoundingClientRect();
  const [ox, oy] = view.origin();
  const pad = typeof view.padding === 'function' ? view.padding() : null;
  let gx = ox + ((pad && pad.left) || 0);
  let gy = oy + ((pad && pad.top) || 0);
  for (let g = item.mark && item.mark.group; g; g = g.mark && g.mark.group) {
    gx += g.x || 0;
    gy += g.y || 0;
  }
  return {x: event.clientX - box.left - gx, y: event.clientY - box.top - gy};
}

/** The radius (px) within which the cursor is on a point item: its mark size is an area. */
export const reach = (o) => Math.sqrt(o.size || 64) / 2 + 1;

/**
 * The item of `item`'s mark the cursor is on: of the points whose marker covers the cursor,
 * the one whose centre is nearest to it (the larger on a tie), not the one drawn last. Vega
 * picks the topmost, so a small op drawn over a large one took the hover wherever the two
 * overlapped, even with the cursor on the large one's centre. `item` itself when the cursor
 * is not known or the mark is not a point mark.
 */
export function pickAt(item, cursor) {
  const mark = item && item.mark;
  if (!cursor || !mark || mark.marktype !== 'symbol' || !Array.isArray(mark.items)) return item;
  let best = item;
  let bestD = typeof item.x === 'number' ? Math.hypot(item.x - cursor.x, item.y - cursor.y) :
    Infinity;
  for (const o of mark.items) {
    if (o === item || !o.datum || typeof o.x !== 'number') continue;
    const d = Math.hypot(o.x - cursor.x, o.y - cursor.y);
    if (d > reach(o)) continue;
    if (d < bestD || (d === bestD && (o.size || 0) > (best.size || 0))) {
      best = o;
      bestD = d;
    }
  }
  return best;
}
