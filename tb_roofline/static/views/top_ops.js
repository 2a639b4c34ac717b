// "Top opportunities": the ops whose time would shrink most on their roof (as the CLI's report
// lists them), and how much time is in ops that are not roofline measurements (caveats).
import {h} from './dom.js';
import {fmtNum, fmtPct} from '../columns.js';

const TOP = 5;

/**
 * @param {Array} ops the op records of the view
 * @param {string} noun 'ops' or 'kernels'
 * @param {(row) => void} onPick selects an op (chart, table, details)
 */
export function topOpsSummary(ops, noun, onPick) {
  const measured = ops.filter((r) => typeof r.potential_time_saved_us === 'number' &&
      r.potential_time_saved_us > 0 && !r.caveat);
  measured.sort((a, b) => b.potential_time_saved_us - a.potential_time_saved_us);
  const caveated = ops.filter((r) => r.caveat && r.caveat !== 'container');
  const share = caveated.reduce((acc, r) => acc + (r.self_time_percent || 0), 0);
  const items = measured.slice(0, TOP).map((r) => h('li', {dataset: {rank: String(r.rank)}},
      h('button', {type: 'button', class: 'link', title: 'Show it in the chart and the table',
        onclick: () => onPick(r)}, r.operation),
      ` ${r.precision ? `[${r.precision}] ` : ''}— bound by ${r.bound_by}, ` +
      `${fmtPct((r.roofline_efficiency || 0) * 100)} of its roof, ` +
      `${fmtNum(r.potential_time_saved_us)} µs to win back ` +
      `(${fmtPct(r.self_time_percent)} of the self time)`));
  return h('details', {class: 'top-ops', open: true},
      h('summary', {}, `Top opportunities: ${noun} with the most time to win back on their roof`),
      items.length ? h('ol', {}, items) :
        h('p', {class: 'muted'}, `No ${noun} with a measured efficiency below its roof.`),
      caveated.length ? h('p', {class: 'muted', id: 'caveated-share'},
          `${caveated.length} ${noun} (${fmtPct(share)} of the self time) are not roofline ` +
          'measurements and are left out: see their Caveat column.') : null);
}
