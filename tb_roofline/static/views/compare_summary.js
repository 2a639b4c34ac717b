// The comparison's summary panel: both devices, the time change and what explains it, pair
// counts by rule, and the top contributors (docs/compare.md, "Summary").
import {fmtFrac, fmtInt, fmtNum, fmtTime, unitOf} from '../columns.js';
import {h} from './dom.js';

const pct = (v) => (v === null || v === undefined ? '—' : `${v > 0 ? '+' : ''}${fmtNum(v)}%`);
const us = (v) => fmtTime(v);

/** A change no larger than one op call (the model's `within_one_call`): no speedup quoted. */
function withinOneCall(s) {
  return `${us(s.time_change_per_core_us)}: within one op call's time ` +
    `(the longest takes ${us(s.longest_call_us)}), not a speedup or slowdown the profiles ` +
    `can tell (${pct(s.time_change_percent)})`;
}

/** The panel's elements for a /compare summary and its two sides. */
export function summaryPanel(s, base, cand) {
  const rules = Object.entries(s.rules || {}).map(([r, n]) => `${fmtInt(n)} by ${r}`).join(', ');
  const devices = base.device.type === cand.device.type ? base.device.type :
    `${base.device.type} → ${cand.device.type}`;
  const facts = [
    ['Device', devices],
    [`Time per ${unitOf(cand.device)}`, `${us(s.base_time_per_core_us)} → ${us(s.cand_time_per_core_us)}`, 'time'],
    ['Time change', s.within_one_call ? withinOneCall(s) :
      `${pct(s.time_change_percent)} (speedup ${s.speedup ? fmtNum(s.speedup, 3) : '—'}×)`,
    'change'],
    ['Explained by op self times', `${us(s.op_time_change_us)}; gaps and host ` +
      `${us(s.other_time_change_us)}`],
    ['Pairs', `${fmtInt(s.matched)} matched${rules ? ` (${rules})` : ''}, ${fmtInt(s.new)} new ` +
      `(${us(s.new_time_us)}), ${fmtInt(s.removed)} removed (${us(s.removed_time_us)})`, 'pairs'],
    ['Matched pairs', `${fmtInt(s.faster)} faster, ${fmtInt(s.slower)} slower, ` +
      `${fmtInt(s.same)} unchanged`],
  ];
  const change = (t) => (t.delta_time_us < 0 ? 'faster' : t.delta_time_us > 0 ? 'slower' : 'same');
  return [
    h('table', {class: 'facts', id: 'compare-facts'}, h('tbody', {}, facts.map(([k, v, key]) =>
      h('tr', {dataset: key ? {key} : {}}, h('th', {}, k), h('td', {}, v))))),
    h('div', {class: 'compare-top'},
        h('h3', {}, 'Top contributors', s.explained_share === null ? '' :
          ` (explain ${fmtFrac(s.explained_share)} of the time change)`),
        h('ol', {id: 'compare-top'}, (s.top_contributors || []).map((t) =>
          h('li', {class: `change-${change(t)}`},
              h('strong', {}, t.cand_operation || t.base_operation),
              t.base_operation && t.cand_operation && t.base_operation !== t.cand_operation ?
                ` (was ${t.base_operation})` : '',
              t.status !== 'matched' ? ` [${t.status}]` : '',
              `: ${t.delta_time_us > 0 ? '+' : ''}${fmtTime(t.delta_time_us)}`,
              t.share_of_change === null ? '' : ` (${fmtFrac(t.share_of_change)})`)))),
  ];
}
