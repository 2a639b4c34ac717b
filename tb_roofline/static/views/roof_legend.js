// The roofs of a chart as a line of text under it: the roofs drawn (each in its colour) and the
// memories not drawn because no record of the view is bound by them (XProf's rule).
import {fmtBandwidth} from '../columns.js';
import {h} from './dom.js';

export function roofLegend(g, device) {
  const drawn = g.roofs.map((r) => h('span', {class: 'roof-item', dataset: {roof: r.id}},
      h('i', {class: `roof-swatch roof-${r.kind}`, style: {borderColor: r.color}}), r.label));
  const peaksUnknown = !g.computes.length;
  return [
    h('span', {class: 'muted'}, 'Roofs: '), drawn,
    peaksUnknown && g.drawn.length ? h('span', {class: 'muted', id: 'no-compute-roof'},
        ' · no compute roof (peak FLOP rate unknown)') : null,
    g.available.length ? h('span', {class: 'muted roof-available',
      dataset: {memories: g.available.map((m) => m.id).join(',')}},
    ` · also on this device, not drawn as no op ` +
      `here is bound by them: ${g.available.map((m) => `${m.name} ${fmtBandwidth(m.peak_gbs)}`)
          .join(', ')}`) : null,
  ];
}
