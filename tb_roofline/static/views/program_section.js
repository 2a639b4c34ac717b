// The program-level section: Total, Total (HW), hosts, Average and steps on a chart and in a
// table. Methods of App (installed by app.js): `this` is the app.
import {placePoints, programSpec} from '../charts.js';
import {PROGRAM_COLUMNS, visibleColumns, withDeviceMemories} from '../columns.js';
import {h, setChildren} from './dom.js';
import {errorBox} from './states.js';

const KIND_LABEL = {total: 'Total', total_hw: 'Total (HW)', host: 'Host', average: 'Average',
                    step: 'Step'};

export class ProgramSection {
  async renderProgram(geometry) {
    const d = this.data;
    if (d.errors.program || !d.program) {
      setChildren(this.programErrorEl, errorBox(d.errors.program, 'the program-level roofline'));
      this.programChart.dispose();
      this.programChartEl.hidden = true;
      this.programTableEl.hidden = true;
      return;
    }
    setChildren(this.programErrorEl);
    this.programChartEl.hidden = false;
    this.programTableEl.hidden = false;
    const rows = this.decorateProgram(placePoints(d.program, geometry.floorX, geometry.floorY,
        geometry.x0, geometry.x1));
    if (!rows.length) {
      setChildren(this.programErrorEl, h('p', {class: 'muted'}, 'No program-level records.'));
    }
    this.programTable.setColumns(visibleColumns(
        withDeviceMemories(PROGRAM_COLUMNS, d.device && d.device.memories), this.memoryIds(), rows,
        d.programColumns, d.device && d.device.kind));
    this.programTable.setRows(rows);
    await this.programChart.setSpec(programSpec(geometry, this.dark,
        {kinds: [...new Set(rows.map((r) => r.kind))], subtitle: this.subtitle()}),
    {records: rows});
  }

  /** Run, host and device: every chart says what it shows (also in PNG/SVG exports). */
  subtitle() {
    const d = this.data || {};
    const s = this.state;
    return [`run ${s.run}`, s.host === '*' ? 'all hosts' : `host ${s.host}`,
      d.device ? d.device.type : null, s.infeed === 'exclude' ? 'infeed/outfeed excluded' : null]
        .filter(Boolean).join(' · ');
  }

  decorateProgram(rows) {
    for (const r of rows) {
      r.kind = KIND_LABEL[r.record_type] || r.record_type;
      r.series = r.record_type === 'host' ? `Host ${r.host}` :
        r.record_type === 'step' ? `Step ${r.step}` : r.step;
    }
    return rows;
  }
}
