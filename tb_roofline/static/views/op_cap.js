// An op answer the server cut at its size cap (TB_ROOFLINE_MAX_ANSWER_MB, docs/http_api.md):
// the note saying so, with the server's CSV export of every row and a button loading the next
// page. The chart and the table hold the rows loaded so far.
import {api, tableToObjects} from '../api.js';
import {fmtInt} from '../columns.js';
import {h} from './dom.js';

/** What the tab keeps of an `/ops` answer's paging: null once every row is loaded. */
export function capOf(answer, previous = null) {
  if (answer.next_offset === null || answer.next_offset === undefined) return null;
  return {total: answer.total_count, nextOffset: answer.next_offset,
    mb: answer.max_answer_mb ?? (previous && previous.mb),
    setting: answer.capped_by || (previous && previous.setting) || 'TB_ROOFLINE_MAX_ANSWER_MB'};
}

const selOf = (state) => ({run: state.run, host: state.host, infeed: state.infeed,
  view: state.view});

/** The note (null when every row is loaded); `onMore` loads the next page. */
export function capNote(d, state, noun, onMore) {
  const cap = d.opsCap;
  if (!cap) return null;
  // The export's views are the API's op views ("shapes" is a grouping it does not take).
  const view = state.view && !['op', 'shapes'].includes(state.view) ? {view: state.view} : {};
  return h('p', {class: 'notice', id: 'op-cap',
    dataset: {loaded: String(d.ops.length), total: String(cap.total)}},
  `Showing the first ${fmtInt(d.ops.length)} of ${fmtInt(cap.total)} ${noun} by time — ` +
    `the answer is capped at ${cap.mb} MB (${cap.setting}). The filters here apply to the ` +
    `${noun} loaded; load more, filter with the API (/ops?name=…) or use the `,
  h('a', {id: 'op-cap-export', href: api.exportUrl(selOf(state), 'op', 'csv', view)},
      'CSV export of every row'), '. ',
  h('button', {type: 'button', id: 'op-load-more', onclick: onMore}, 'Load more'));
}

/** Appends the next page of the loaded answer to `d.ops` (the same order: by time). */
export async function loadMore(d, state) {
  const cap = d.opsCap;
  if (!cap) return;
  const page = await api.ops({...selOf(state), offset: cap.nextOffset});
  if (page.offset !== cap.nextOffset) throw new Error('the next page starts elsewhere');
  d.ops = d.ops.concat(tableToObjects(page));
  d.opsCap = capOf(page, cap);
  d.variants = null;  // the other infeed variant was fetched for the rows before
  d.variantsReady = null;
}
