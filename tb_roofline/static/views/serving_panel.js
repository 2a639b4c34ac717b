// Serving steps beside the program chart (SGLang, vLLM traces): per step its phase, batch,
// tokens and tokens/s; for decode steps the share of GEMM time whose weights are counted, the
// weight floor and the batch at which the GEMMs turn compute-bound (none below the model's
// coverage), and the findings with their bounds. Every number is the model's
// (`serving_steps` of the program answer, docs/serving.md); nothing is computed here.
import {h} from './dom.js';

const num = (v, digits = 3) => (v === null || v === undefined ? '—' :
  Number(v).toLocaleString('en-US', {maximumSignificantDigits: digits}));

/** The panel's nodes, or [] when the run has no serving steps. */
export function servingPanel(steps) {
  if (!steps || !steps.length) return [];
  const head = ['Step', 'Phase', 'Batch', 'Tokens', 'Time (µs)', 'Tokens/s',
    'Tokens/s (busy)', 'Attention FLOPs', 'GEMM time with weights counted', 'Weight floor (µs)',
    'Compute-bound from batch'];
  const pct = (v) => (v === null || v === undefined ? '—' : `${(100 * v).toFixed(0)}%`);
  const rows = steps.map((s) => h('tr', {dataset: {step: s.label}},
      h('td', {}, s.label), h('td', {}, s.phase), h('td', {}, num(s.batch, 6)),
      h('td', {}, num(s.tokens, 9)), h('td', {}, num(s.time_ps / 1e6, 6)),
      h('td', {}, num(s.tokens_per_s)), h('td', {}, num(s.tokens_per_s_busy)),
      h('td', {}, num(s.attention_flops)), h('td', {}, pct(s.weight_coverage)),
      h('td', {title: s.weight_floor_reason || ''}, num(s.weight_floor_us, 4)),
      h('td', {}, num(s.ridge_batch))));
  const findings = steps.flatMap((s) => (s.findings || []).map((f) => h('li', {
    dataset: {code: f.code}}, h('b', {}, `${s.label}: `), f.text)));
  return [h('details', {class: 'serving-steps', id: 'serving-steps', open: true},
      h('summary', {}, 'Serving steps'),
      h('table', {class: 'serving-table'}, h('thead', {}, h('tr', {},
          head.map((t) => h('th', {}, t)))), h('tbody', {}, rows)),
      findings.length ? h('ul', {class: 'serving-findings'}, findings) : null)];
}
