// The "Opportunities" panel (docs/guidance.md): findings ranked by the time they would save,
// each linking to its op in the chart and the table; the step time by class as one bar;
// exports; and the throughput / MFU line shown in the program section. Data: /guidance.
// Compact (it sits beside the device panel, above the charts): the top 3 findings and the
// total, the others behind "Show all"; each suggestion and its evidence on demand.

import {getJson} from '../api.js';
import {downloadText, h, setChildren, slug} from './dom.js';
import {RULES, TERMS, explained} from './glossary.js';

const TOP = 3;
const CLASS_COLOURS = {compute_bound: '#4c78a8', memory_bound: '#f58518',
  communication: '#e45756', idle: '#bab0ac', unknown: '#9d755d'};

function num(v, digits = 1) {
  if (v === null || v === undefined || !isFinite(v)) return '—';
  return Number(v).toLocaleString('en-US', {maximumFractionDigits: digits,
    minimumFractionDigits: Math.abs(v) < 100 ? Math.min(digits, 2) : 0});
}

function time(us) {
  if (us === null || us === undefined || !isFinite(us)) return '—';
  return Math.abs(us) >= 1e6 ? `${num(us / 1e6, 2)} s` : Math.abs(us) >= 1e3 ?
    `${num(us / 1e3, 2)} ms` : `${num(us, 1)} µs`;
}

function pct(v, digits = 1) {
  return v === null || v === undefined ? '—' : `${num(v, digits)}%`;
}

function show(value) {
  if (value === null || value === undefined) return '—';
  if (typeof value === 'number') return num(value, 4);
  if (Array.isArray(value)) return value.map(show).join(', ');
  if (typeof value === 'object') {
    return Object.entries(value).map(([k, v]) => `${k}: ${show(v)}`).join('; ');
  }
  return String(value);
}

function csvCell(v) {
  const s = v === null || v === undefined ? '' : String(v);
  return /[",\n]/.test(s) ? `"${s.replace(/"/g, '""')}"` : s;
}

/**
 * The throughput note in the page's words: how to give the model's FLOPs (a command line, a
 * file format) is the guide's to say, not the page's.
 */
function noteWords(t) {
  if (!/--|tb-roofline|calibrate/.test(t.note || '')) return t.note;
  return t.mfu === null && t.hfu !== null ?
    'MFU needs the model\'s FLOPs per step (a workload file beside the profile): see ' +
      '"Throughput, HFU and MFU" in docs/guidance.md.' :
    'Peaks unknown for this device, so no HFU or MFU: docs/device_peaks.md says how to give ' +
      'them.';
}

export class OpportunitiesPanel {
  /**
   * `findRank(op)`: the key of the loaded op row with this identity (program_id, operation,
   * precision), or null; `selectOp(key)`: select and highlight it in the chart and table.
   */
  constructor({findRank, selectOp}) {
    this.findRank = findRank;
    this.selectOp = selectOp;
    this.answer = null;
    this.token = 0;
    document.head.appendChild(h('link', {rel: 'stylesheet',
      href: new URL('./opportunities.css', import.meta.url).href}));
    this.summaryText = h('span', {class: 'opp-summary-text'}, 'Opportunities');
    this.barEl = h('div', {id: 'opportunities-classes'});
    this.listEl = h('ol', {id: 'opportunities-list', class: 'opp-list opp-collapsed'});
    this.moreButton = h('button', {type: 'button', class: 'link', id: 'opportunities-more',
      hidden: true, onclick: () => this.toggleAll()}, 'Show all');
    this.noteEl = h('div', {class: 'muted opp-note'});
    this.details = h('details', {open: true, id: 'opportunities-details'},
        h('summary', {}, this.summaryText),
        this.barEl, this.noteEl, this.listEl, this.moreButton);
    this.el = h('section', {id: 'opportunities', dataset: {status: 'empty'}},
        h('div', {class: 'section-head'}, h('h2', {}, 'Opportunities'),
            h('div', {class: 'export-buttons'}, h('span', {class: 'muted'}, 'Export:'),
                h('button', {type: 'button', id: 'opportunities-export-json',
                  onclick: () => this.export('json')}, 'JSON'),
                h('button', {type: 'button', id: 'opportunities-export-csv',
                  onclick: () => this.export('csv')}, 'CSV'))),
        this.details);
    this.throughputEl = h('div', {id: 'throughput-line', class: 'throughput'});
  }

  /** Fetch /guidance for the view `{run, host, infeed}` and render it. */
  async load(sel) {
    const token = ++this.token;
    if (!sel || !sel.run) return;
    this.el.dataset.status = 'loading';
    try {
      const answer = await getJson('guidance', {run: sel.run,
        host: sel.host === '*' ? '' : sel.host, infeed_outfeed: sel.infeed});
      if (token !== this.token) return;
      this.answer = answer;
      this.sel = {...sel};
      this.render(answer);
      this.el.dataset.status = 'ready';
    } catch (e) {
      if (token !== this.token) return;
      this.answer = null;
      setChildren(this.listEl);
      setChildren(this.barEl);
      setChildren(this.throughputEl);
      setChildren(this.noteEl, `No guidance: ${e.message}`);
      this.el.dataset.status = 'error';
    }
  }

  toggleAll() {
    const collapsed = this.listEl.classList.toggle('opp-collapsed');
    setChildren(this.moreButton, collapsed ? `Show all ${this.answer.findings.length} findings` :
      'Show the top 3');
  }

  render(g) {
    const n = g.findings.length;
    this.listEl.classList.add('opp-collapsed');
    this.moreButton.hidden = n <= TOP;
    setChildren(this.moreButton, `Show all ${n} findings`);
    setChildren(this.summaryText, `${n} finding${n === 1 ? '' : 's'}: up to ` +
        `${time(g.total_time_saved_per_step_us ?? g.total_time_saved_us)}` +
        `${g.time.num_steps ? ' per step' : ''} (${pct(g.total_percent_of_step)} of the time)`);
    this.renderClasses(g);
    setChildren(this.noteEl, n ? '' : 'No finding: every rule was checked (docs/guidance.md).');
    setChildren(this.listEl, g.findings.map((f, i) => this.item(f, i)));
    // Steps/s do not depend on the infeed/outfeed choice: the line of the first answer for
    // this run and host stays.
    const key = JSON.stringify([this.sel.run, this.sel.host]);
    if (this.throughputKey !== key) {
      this.throughputKey = key;
      this.renderThroughput(g.throughput);
      this.renderEngine(g.engine_figures);
    }
  }

  /** The serving engine's own FLOPs and bytes per step beside the profile's (docs/serving.md,
   * "Engine MFU figures"), what each counts on hover; nothing without an engine metrics file. */
  renderEngine(e) {
    if (!e) return;
    const eng = e.engine_per_step;
    const ours = e.ours_per_step;
    const gflop = (v) => (v === null ? '—' : `${num(v / 1e9, 2)} GFLOP`);
    const gb = (v) => (v === null ? '—' : `${num(v / 1e9, 2)} GB`);
    const ratio = (v) => (v === null ? '—' : num(v, 3));
    this.throughputEl.appendChild(h('div', {id: 'engine-figures',
      dataset: {flopsRatio: String(e.ratio.flops)}},
    h('strong', {}, `Engine (${e.engine.engine}): `),
    h('abbr', {class: 'explained', title: e.notes.join('\n\n')},
        `${gflop(eng.flops)}, ${gb(eng.bytes)} per step`),
    ` · profile ${gflop(ours.flops)} (GEMMs and attention ${gflop(ours.model_flops)}), ` +
      `${gb(ours.bytes)} · profile / engine: FLOPs ${ratio(e.ratio.flops)}, ` +
      `bytes ${ratio(e.ratio.bytes)}`));
  }

  renderClasses(g) {
    const classes = g.classes.filter((c) => c.percent);
    const bar = h('div', {class: 'opp-bar', role: 'img',
      'aria-label': 'Step time by class'}, classes.map((c) => h('div', {
      class: 'opp-bar-part', title: `${c.label}: ${pct(c.percent)} (${num(c.time_us)} µs)`,
      dataset: {class: c.class, percent: String(c.percent)},
      style: {width: `${c.percent}%`, background: CLASS_COLOURS[c.class]}})));
    const legend = h('div', {class: 'opp-legend'}, g.classes.map((c) => h('span', {
      class: 'opp-legend-item'}, h('i', {style: {background: CLASS_COLOURS[c.class]}}),
    `${c.label} ${pct(c.percent)}`)));
    setChildren(this.barEl, h('div', {class: 'muted'}, 'Step time by class' +
        (g.time.timeline ? '' : ' (from op times: no timeline)')), bar, legend);
  }

  item(f, index = 0) {
    const links = f.ops.map((op) => {
      const rank = this.findRank(op);
      return h('button', {type: 'button', class: 'opp-op', disabled: rank === null,
        title: `${op.operation}\n${rank === null ? 'not in the loaded op rows' :
          'show in the chart and table'}`,
        dataset: {rank: rank === null ? '' : String(rank)},
        onclick: () => rank !== null && this.selectOp(rank)}, op.operation);
    });
    const evidence = h('table', {class: 'opp-evidence'},
        f.evidence.records.map((r) => h('tr', {}, h('th', {}, r.operation),
            h('td', {}, Object.entries(r).filter(([k]) => !['program_id', 'operation', 'host']
                .includes(k)).map(([k, v]) => `${k} ${show(v)}`).join(' · ')))),
        Object.keys(f.evidence.facts).length ? h('tr', {}, h('th', {}, 'facts'),
            h('td', {}, show(f.evidence.facts))) : null);
    return h('li', {class: `opp-item${index >= TOP ? ' opp-extra' : ''}`,
      dataset: {rule: f.rule, id: f.id}},
        h('div', {class: 'opp-head'},
            h('span', {class: 'opp-rule'}, RULES[f.rule] ? explained(f.rule, RULES[f.rule]) :
              f.rule),
            h('span', {class: 'opp-title', title: f.title}, f.title),
            h('span', {class: 'opp-saved', dataset: {us: String(f.time_saved_us)}},
                `saves ${time(f.time_saved_per_step_us ?? f.time_saved_us)}` +
                `${this.answer && this.answer.time.num_steps ? ' per step' : ''}` +
                ` (${pct(f.percent_of_step, 2)})`),
            links.length ? h('span', {class: 'opp-ops'}, 'Op: ', links) : null,
            h('details', {class: 'opp-details'}, h('summary', {}, 'Suggestion and evidence'),
                h('p', {class: 'opp-suggestion'}, f.suggestion), evidence)));
  }

  renderThroughput(t) {
    if (!t || !t.step_time_us) {
      setChildren(this.throughputEl, h('span', {class: 'muted'}, t ? t.note : ''));
      return;
    }
    const parts = [`${num(t.steps_per_second, 3)} steps/s`,
      `${time(t.step_time_us)} per step`];
    if (t.tokens_per_second) parts.push(`${num(t.tokens_per_second, 0)} tokens/s`);
    if (t.samples_per_second) parts.push(`${num(t.samples_per_second)} samples/s`);
    // Why a figure is missing is said where it is missing (on hover), so the line stays one
    // line and the program chart keeps its place on the first screen.
    const mfuText = t.mfu === null ? '—' : pct(t.mfu * 100, 2);
    const mfu = t.note ? h('abbr', {class: 'explained', id: 'throughput-note',
      title: noteWords(t)}, mfuText) : mfuText;
    const peak = t.peak_gflops_per_device ? ` (peak ${num(t.peak_gflops_per_device, 0)} ` +
      `GFLOP/s per device, ${t.precision || 'default'})` : '';
    setChildren(this.throughputEl, h('strong', {}, 'Throughput: '),
        h('span', {id: 'throughput-values', dataset: {mfu: String(t.mfu), hfu: String(t.hfu),
          steps: String(t.steps_per_second)}}, parts.join(' · '), ' · ',
        explained('MFU', TERMS.mfu), ' ', mfu, ' · ',
        explained('HFU', TERMS.hfu), ` ${t.hfu === null ? '—' : pct(t.hfu * 100, 2)}`, peak));
  }

  export(format) {
    const g = this.answer;
    if (!g) return;
    const name = `roofline_${slug(g.run)}_${slug(g.host === '*' ? 'all-hosts' : g.host)}` +
      '_opportunities';
    if (format === 'json') {
      downloadText(JSON.stringify(g, null, 1), `${name}.json`, 'application/json');
      return;
    }
    const cols = ['id', 'rule', 'title', 'ops', 'time_saved_us', 'time_saved_per_step_us',
      'percent_of_step', 'counted_us', 'suggestion'];
    const rows = g.findings.map((f) => cols.map((c) => c === 'ops' ?
      f.ops.map((o) => `${o.program_id}/${o.operation}/${o.precision}`).join(' ') : f[c]));
    const text = [cols, ...rows].map((r) => r.map(csvCell).join(',')).join('\n') + '\n';
    downloadText(text, `${name}.csv`, 'text/csv');
  }
}
