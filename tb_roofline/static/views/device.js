// Device information panel: type, peaks per precision, bandwidth of every memory, ridge points,
// megacore, and where each number comes from.
import {h, setChildren} from './dom.js';
import {diagnosticsList, errorBox} from './states.js';
import {TERMS, explained} from './glossary.js';
import {fmtBandwidth, fmtBool, fmtFlopRate, fmtFrac, fmtInt, fmtNum, fmtText, unitOf}
  from '../columns.js';

const SOURCE_LABEL = {profile: 'profile', datasheet: 'data sheet', measured: 'measured',
                      user: 'user'};

function source(value) {
  return h('span', {class: `source source-${value || 'unknown'}`, dataset: {field: 'source'}},
      SOURCE_LABEL[value] || value || 'unknown');
}

/** A backend message without its command line: the page names the guide instead. */
function pageWords(message) {
  const cut = message.search(/\bRun `|`tb-roofline|--[a-z]/);
  return cut < 0 ? message : `${message.slice(0, cut).trim()} docs/device_peaks.md says how to ` +
    'give them (a device file beside the profile).';
}

const cap = (s) => s.charAt(0).toUpperCase() + s.slice(1);

const num = (field, value, text) => h('td', {class: 'num', dataset: {field,
  value: value === null || value === undefined ? '' : String(value)}}, text);

/**
 * @param device the API's device object
 * @param total the program's Total record (for the cost coverage), or undefined
 * @param peaksNote the `peaks_unknown` diagnostic, said here once (not in the list)
 */
export function devicePanel(device, total, peaksNote = null) {
  if (!device) return h('p', {class: 'muted'}, 'No device information.');
  const facts = [
    ['Device type', 'type', fmtText(device.type)],
    ['Kind', 'kind', fmtText(device.kind)],
    [`${cap(unitOf(device))}s (all hosts)`, 'num_cores', fmtInt(device.num_cores)],
    ['Hosts', 'num_hosts', fmtInt(device.num_hosts)],
  ];
  if (device.kind === 'tpu') {  // TensorCore facts: meaningless on GPUs and CPUs
    facts.push([explained('Megacore', TERMS.megacore), 'megacore', fmtBool(device.megacore)]);
    facts.push(['CMEM', 'has_cmem', fmtBool(device.has_cmem)]);
    facts.push(['Merged VMEM', 'has_merged_vmem', fmtBool(device.has_merged_vmem)]);
  }
  if (device.time_scale_multiplier !== null && device.time_scale_multiplier !== undefined) {
    facts.push(['Time scale multiplier', 'time_scale_multiplier',
      fmtNum(device.time_scale_multiplier, 4)]);
  }
  const factTable = h('table', {class: 'facts'}, h('tbody', {}, facts.map(([label, field, text]) =>
    h('tr', {dataset: {field}}, h('th', {}, label),
        h('td', {dataset: {field, value: String(device[field] ?? '')}}, text)))));

  const compute = device.compute || [];
  const computeTable = h('table', {class: 'peaks', id: 'device-compute'},
      h('caption', {}, `Peak FLOP rate (per ${unitOf(device)})`),
      h('thead', {}, h('tr', {}, h('th', {}, 'Precision'), h('th', {}, 'Peak'),
          h('th', {}, 'GFLOP/s'), h('th', {}, 'Source'))),
      h('tbody', {}, compute.length ? compute.map((c) =>
        h('tr', {dataset: {precision: c.precision}},
            h('td', {}, c.precision === 'default' ?
              explained('default (all precisions)', TERMS.defaultPrecision) : c.precision),
            h('td', {}, fmtFlopRate(c.peak_gflops)),
            num('peak_gflops', c.peak_gflops, fmtNum(c.peak_gflops)),
            h('td', {title: c.note || null}, source(c.source), c.note ? h('div', {
              class: 'peak-note'}, c.note) : null))) :
        h('tr', {}, h('td', {colspan: 4, class: 'muted'}, 'Unknown: the profile names no ' +
            'compute peak for this device (docs/device_peaks.md says how to give one).'))));

  const memories = device.memories || [];
  const memoryTable = h('table', {class: 'peaks', id: 'device-memories'},
      h('caption', {}, `Peak memory bandwidth (per ${unitOf(device)}) and `,
          explained('ridge points', TERMS.ridge)),
      h('thead', {}, h('tr', {}, h('th', {}, 'Memory'), h('th', {}, 'GiB/s'),
          h('th', {}, 'GB/s'), h('th', {}, explained('Ridge point (FLOP/B)', TERMS.ridge)), h('th', {}, 'Source'))),
      h('tbody', {}, memories.length ? memories.map((m) =>
        h('tr', {dataset: {memory: m.id}},
            h('td', {}, m.name),
            num('peak_gibs', m.peak_gibs, fmtNum(m.peak_gibs)),
            num('peak_gbs', m.peak_gbs, fmtNum(m.peak_gbs)),
            num('ridge_point', m.ridge_point, m.ridge_point > 0 ? fmtNum(m.ridge_point) : '—'),
            h('td', {title: m.note || null}, source(m.source), m.note ? h('div', {
              class: 'peak-note'}, m.note) : null))) :
        h('tr', {}, h('td', {colspan: 5, class: 'muted'}, 'No memory bandwidth known.'))));

  const coverage = total && total.flop_coverage !== null && total.flop_coverage !== undefined ?
    h('p', {id: 'cost-coverage', class: total.flop_coverage < 0.5 ? 'warning' : 'muted',
      dataset: {flops: String(total.flop_coverage), bytes: String(total.bytes_coverage)}},
    `Known cost: FLOPs for ${fmtFrac(total.flop_coverage)} and bytes for ` +
    `${fmtFrac(total.bytes_coverage)} of the op time`,
    total.flop_coverage < 0.5 ? ' — the program-level numbers describe that part only.' :
      '.') : null;
  const peaksWarning = device.peaks_known === false || peaksNote ? h('p',
      {class: 'warning', id: 'peaks-unknown'},
      'Peaks are not known for this device: rates are shown, efficiencies are not.',
      peaksNote && peaksNote.message ? h('span', {class: 'muted'},
          ` ${pageWords(peaksNote.message)}`) : null) : null;
  // One line at once (what the chart's roofs are), every number behind a labelled expander
  // that grows the section to its content.
  return [deviceSummary(device), peaksWarning, coverage,
    h('details', {id: 'device-details'},
        h('summary', {}, 'Peaks per precision, memory bandwidths and ridge points'),
        h('div', {class: 'device-grid'}, factTable, computeTable, memoryTable))];
}

/** What a precision name means where the profile gives one figure for every precision. */
function precisionWords(name) {
  return name === 'default' ? explained('all precisions', TERMS.defaultPrecision) : name;
}

/**
 * The roof the headline quotes: the top compute roof the run's ops sit under (the model's
 * `run_compute`, the op chart's top roof), not the chip's fastest precision the run never
 * used; the device's top figure only when no op has a roof.
 */
function headlineRoof(device) {
  const run = (device.run_compute || [])[0];
  if (run) return {peak_gflops: run.peak_gflops, precisions: run.precisions, ofRun: true};
  const top = (device.compute || []).reduce((a, c) => (!a || c.peak_gflops > a.peak_gflops ?
    c : a), null);
  return top ? {peak_gflops: top.peak_gflops, precisions: [top.precision], ofRun: false} : null;
}

/**
 * A megacore chip's own figures (the API's `per_chip`: its two TensorCores' peaks added), beside
 * the per-TensorCore ones every chart uses, so a reader holding the data sheet finds its figure.
 */
function chipFigures(device, top, hbm) {
  const chip = device.per_chip;
  if (!chip) return null;
  const roof = top && (chip.compute || []).find((c) => top.precisions.includes(c.precision));
  const figures = [roof ? fmtFlopRate(roof.peak_gflops) : null,
    hbm && hbm.id === 'hbm' && chip.hbm_gbs ? `HBM ${fmtBandwidth(chip.hbm_gbs)}` : null]
      .filter(Boolean).join(', ');
  return h('span', {id: 'per-chip', dataset: {peak: roof ? String(roof.peak_gflops) : '',
    hbm: String(chip.hbm_gbs ?? '')}}, explained('megacore', TERMS.megacore),
  `: per chip (${chip.tensor_cores} TensorCores)${figures ? ` ${figures}` : ''}`);
}

/** The device in one line: type, how many of its units, the run's top compute and HBM roofs. */
function deviceSummary(device) {
  const unit = unitOf(device);
  const top = headlineRoof(device);
  const mems = (device.memories || []).filter((m) => m.peak_gbs > 0);
  const hbm = mems.find((m) => m.id === 'hbm') || mems[0];
  const parts = [
    h('strong', {}, fmtText(device.type)),
    `${fmtInt(device.num_cores)} ${unit}${device.num_cores === 1 ? '' : 's'} on ` +
      `${fmtInt(device.num_hosts)} host${device.num_hosts === 1 ? '' : 's'}`,
    top ? h('span', {id: 'headline-peak', dataset: {value: String(top.peak_gflops),
      precisions: top.precisions.join('/'), ofRun: String(top.ofRun)}},
    `peak ${fmtFlopRate(top.peak_gflops)} (`,
    top.precisions.map((p, i) => [i ? '/' : '', precisionWords(p)]),
    top.ofRun ? ')' : ', the device\'s top: no op of this run has a roof)') :
      'peak FLOP rate unknown',
    hbm ? `${hbm.name} ${fmtBandwidth(hbm.peak_gbs)}` : null,
    top && hbm ? [explained('ridge point', TERMS.ridge),
      ` ${fmtNum(top.peak_gflops / hbm.peak_gbs)} FLOP/B`] : null,
    chipFigures(device, top, hbm),
  ].filter(Boolean);
  return h('p', {id: 'device-summary'}, parts.map((p, i) => [i ? ' · ' : '', p]));
}

/**
 * The device panel and the diagnostics list of the loaded data (`els`: {panel, list, summary}).
 * The peaks_unknown note is said once: in the device panel, with the diagnostic's words.
 */
export function renderDeviceSection(els, d) {
  const diags = d.diagnostics || [];
  const peaksNote = diags.find((x) => x.code === 'peaks_unknown');
  setChildren(els.panel, d.errors.device ? errorBox(d.errors.device, 'the device information') :
    devicePanel(d.device, (d.program || []).find((r) => r.record_type === 'total'), peaksNote));
  if (d.errors.diagnostics) {
    setChildren(els.list, errorBox(d.errors.diagnostics, 'the diagnostics'));
    return;
  }
  const shown = diags.filter((x) => x !== peaksNote || !d.device);
  setChildren(els.list, diagnosticsList(shown));
  const count = (sev) => shown.filter((x) => x.severity === sev).length;
  const worst = count('error') ? 'error' : count('warning') ? 'warning' : 'info';
  const n = (sev) => (count(sev) ? `, ${count(sev)} ${sev}${count(sev) > 1 ? 's' : ''}` : '');
  setChildren(els.summary, `Diagnostics (${shown.length}${n('warning')}${n('error')})`);
  els.summary.dataset.severity = shown.length ? worst : 'none';
  if (els.banner) warningsBanner(els.banner, shown, els.summary);
}

const BANNER_MAX = 2;
const HOSTS_NAMED = 5;  // hosts the banner names; the Diagnostics list names every one

/**
 * The hosts of the run left out of the answer (diagnostics with `skipped_host`: a file that
 * could not be read, or is gone) in one line: "N of M hosts not read: a, b … — see
 * Diagnostics", the link opening the list where each says why. Null when every host was read.
 */
function hostsNotRead(diags, summary) {
  const skipped = diags.filter((x) => x.skipped_host);
  if (!skipped.length) return null;
  const names = [...new Set(skipped.map((x) => x.skipped_host))];
  const total = Math.max(...skipped.map((x) => x.hosts_total || 0));
  const listed = names.slice(0, HOSTS_NAMED).join(', ') +
    (names.length > HOSTS_NAMED ? ` … (${names.length - HOSTS_NAMED} more)` : '');
  const severity = skipped.some((x) => x.severity === 'error') ? 'error' : 'warning';
  // A button, not a link: the page's hash holds the view's state (run, host, ...).
  const link = h('button', {type: 'button', class: 'link', id: 'see-diagnostics',
    onclick: () => {
      const details = summary && summary.parentElement;
      if (!details) return;
      details.open = true;
      details.scrollIntoView({block: 'start'});
    }}, 'see Diagnostics');
  return h('li', {class: `diag-${severity}`, id: 'hosts-not-read',
    dataset: {code: 'hosts_not_read', hosts: names.join(','), total: String(total)},
    title: skipped.map((x) => x.message).join('\n')},
  h('span', {class: 'diag-severity'}, severity),
  `${names.length}${total ? ` of ${total}` : ''} host${names.length === 1 && !total ? '' : 's'}` +
    ` not read: ${listed} — `, link, '.');
}

/**
 * The warnings and errors of the diagnostics, above the charts (the full list is below): one
 * line per kind (`code`), the first message and how many more of that kind; the peaks that
 * are not known are said in the device panel instead.
 */
function warningsBanner(el, diags, summary) {
  const hosts = hostsNotRead(diags, summary);
  // The hosts not read are one line of their own, first; their diagnostics are not repeated.
  const worth = diags.filter((x) => (x.severity === 'warning' || x.severity === 'error') &&
      x.code !== 'peaks_unknown' && !x.skipped_host);
  const byCode = new Map();
  for (const x of worth) {
    if (!byCode.has(x.code)) byCode.set(x.code, []);
    byCode.get(x.code).push(x);
  }
  const kinds = [...byCode.values()];
  el.hidden = !kinds.length && !hosts;
  const shown = kinds.slice(0, BANNER_MAX);
  const hidden = kinds.slice(BANNER_MAX).reduce((n, k) => n + k.length, 0);
  // One line each, cut with an ellipsis (the whole text on hover, or opened by a click): the
  // banner must leave the first screen to the program chart (docs/frontend.md, "Layout").
  setChildren(el, h('ul', {}, hosts, shown.map(([x, ...more]) => h('li', {
    class: `diag-${x.severity}`, dataset: {code: x.code}, title: x.message,
    onclick: (ev) => ev.currentTarget.classList.toggle('open')},
  h('span', {class: 'diag-severity'}, x.severity), x.message,
  more.length ? h('span', {class: 'muted'}, ` (and ${more.length} more like it)`) : null))),
  hidden ? h('div', {class: 'muted'}, `and ${hidden} more under Diagnostics (Device section)`) :
    null);
}
