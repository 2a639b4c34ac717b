// "Top opportunities": the ops whose time would shrink most on their roof, in the order the
// server ranks them (`opportunity_rank`, the same list as the CLI's report and MCP), of the
// ops shown (it follows the filters), and how much time is in ops that are not roofline
// measurements (the server's `measurement`: model/records/records.py measurements). Compact: the top 3 and their total, the rest on demand.
import {h} from './dom.js';
import {fmtPct, fmtTime} from '../columns.js';

const SHOWN = 3;
const MORE = 10;

/**
 * @param {Array} ops the op records shown (after the filters)
 * @param {string} noun 'ops' or 'kernels'
 * @param {(row) => void} onPick selects an op (chart, table, details)
 */
export function topOpsSummary(ops, noun, onPick, {filtered = false} = {}) {
  // The server's ranking (model/records/rankings.py): its rank order over the shown ops is their own.
  const measured = ops.filter((r) => Number.isInteger(r.opportunity_rank));
  measured.sort((a, b) => a.opportunity_rank - b.opportunity_rank);
  const caveated = ops.filter((r) => r.measurement === false);
  const share = caveated.reduce((acc, r) => acc + (r.self_time_percent || 0), 0);
  const item = (r) => h('li', {dataset: {rank: String(r.rank)}},
      h('button', {type: 'button', class: 'link op-name', title: `${r.operation}\nShow it in ` +
        'the chart and the table', onclick: () => onPick(r)}, r.operation),
      ` ${r.precision ? `[${r.precision}] ` : ''}${r.bound_by}, ` +
      `${fmtPct((r.roofline_efficiency || 0) * 100)} of its roof: ` +
      `${fmtTime(r.potential_time_saved_us)} to win back`);
  const top = measured.slice(0, MORE);
  const total = top.slice(0, SHOWN).reduce((acc, r) => acc + r.potential_time_saved_us, 0);
  const all = measured.reduce((acc, r) => acc + r.potential_time_saved_us, 0);
  return h('div', {class: 'top-ops', id: 'top-ops-box', dataset: {count: String(top.length),
    filtered: filtered ? '1' : '0'}},
  h('strong', {}, `Top opportunities${filtered ? ' (of the filtered ops)' : ''}: `),
  top.length ? h('span', {class: 'muted'}, `${fmtTime(total)} in the top ${Math.min(SHOWN,
      top.length)}, ${fmtTime(all)} in all ${measured.length} ${noun} below their roof`) :
    h('span', {class: 'muted'}, `no ${noun} with a measured efficiency below its roof.`),
  top.length ? h('ol', {}, top.slice(0, SHOWN).map(item)) : null,
  top.length > SHOWN ? h('details', {class: 'top-ops-more'}, h('summary', {},
      `${top.length - SHOWN} more`), h('ol', {start: SHOWN + 1}, top.slice(SHOWN).map(item))) :
    null,
  caveated.length ? h('p', {class: 'muted', id: 'caveated-share'},
      `${caveated.length} ${noun} (${fmtPct(share)} of the self time) are not roofline ` +
      'measurements and are left out: see their Caveat column.') : null);
}
