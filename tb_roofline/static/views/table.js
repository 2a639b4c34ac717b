// A sortable, searchable, paginated table of records: an essential set of columns by default
// (`essential`, so the table fits its section), a column chooser for the rest, the first
// columns up to `stickyKey` kept in view while scrolling sideways, "—" last in either sort.
import {h, setChildren} from './dom.js';
import {fmtInt} from '../columns.js';

/** Whether a cell holds a value (not "—": missing, or not a measurement for this row). */
function known(col, row) {
  const v = row[col.key];
  if (v === null || v === undefined || v === '') return false;
  return !col.known || col.known(v, row);
}

export class DataTable {
  /**
   * @param {HTMLElement} container
   * @param {{id: string, columns: Array, pageSize?: number, searchKeys?: string[],
   *          rowKey: (row) => any, onRowClick?: (row) => void, defaultSort?: {key, dir},
   *          searchable?: boolean, paginated?: boolean}} options
   */
  constructor(container, options) {
    this.options = {pageSize: 50, searchKeys: [], searchable: true, paginated: true,
      essential: null, stickyKey: null, ...options};
    this.allColumns = options.columns;
    this.columns = options.columns;
    this.chosen = null;  // The user's choice of column keys (null: the essential set).
    this.rows = [];
    this.view = [];
    this.sort = options.defaultSort || null;
    this.search = '';
    this.page = 0;
    this.selectedKey = null;

    this.searchInput = h('input', {type: 'search', class: 'table-search',
      placeholder: this.options.placeholder || 'Search ' + (this.options.searchKeys.join(', ') ||
        'rows'),
      'aria-label': 'Search table', oninput: () => {
        this.search = this.searchInput.value.trim().toLowerCase();
        this.page = 0;
        this._recompute();
        this._render();
      }});
    this.countEl = h('span', {class: 'table-count'});
    this.tableEl = h('table', {class: 'data-table', id: options.id});
    this.pagerEl = h('div', {class: 'pager'});
    this.chooserSummary = h('summary', {}, 'Columns');
    this.chooserList = h('div', {class: 'menu-list column-options'});
    this.chooserEl = h('details', {class: 'menu column-chooser', id: `${options.id}-columns`},
        this.chooserSummary, this.chooserList);
    setChildren(container,
        h('div', {class: 'table-toolbar'}, this.options.searchable ? this.searchInput : null,
            this.chooserEl, this.countEl),
        h('div', {class: 'table-scroll', onscroll: () => {
          if (this.stickStale) this._stick();
        }}, this.tableEl),
        this.options.paginated ? this.pagerEl : null);
  }

  /** The columns this table can show (those not shown are in the chooser). */
  setColumns(columns) {
    this.allColumns = columns;
    this._applyChoice();
  }

  /** Shows exactly these column keys (in the table's order); null: the essential set. */
  showColumns(keys) {
    this.chosen = keys ? [...keys] : null;
    this._applyChoice();
  }

  /** Keys of the columns shown. */
  shownKeys() {
    return this.columns.map((c) => c.key);
  }

  _applyChoice() {
    const essential = this.options.essential;
    const want = this.chosen ? new Set(this.chosen) : essential ? new Set(essential) : null;
    this.columns = want ? this.allColumns.filter((c) => want.has(c.key)) : this.allColumns;
    if (!this.columns.length) this.columns = this.allColumns;
    this.sortCache = null;
    this._renderChooser();
    this._render();
  }

  _renderChooser() {
    const shown = new Set(this.columns.map((c) => c.key));
    setChildren(this.chooserSummary, `Columns (${shown.size} of ${this.allColumns.length})`);
    const toggle = () => this.showColumns([...this.chooserList.querySelectorAll('input:checked')]
        .map((i) => i.dataset.key));
    setChildren(this.chooserList,
        h('div', {class: 'column-actions'},
            h('button', {type: 'button', class: 'link', onclick: () => this.showColumns(null)},
                'Essential'), ' · ',
            h('button', {type: 'button', class: 'link',
              onclick: () => this.showColumns(this.allColumns.map((c) => c.key))}, 'All')),
        this.allColumns.map((c) => h('label', {class: 'check', title: c.title || null},
            h('input', {type: 'checkbox', dataset: {key: c.key}, checked: shown.has(c.key),
              onchange: toggle}), ` ${c.label}`)));
  }

  /**
   * Replaces the rows. `base`: a superset the rows were filtered from (in any order); the
   * table then keeps that set sorted and filters it, instead of sorting the rows again.
   */
  setRows(rows, {base = null} = {}) {
    this.rows = rows;
    this.base = base;
    this._recompute();
    const pages = this.pageCount();
    if (this.page >= pages) this.page = Math.max(0, pages - 1);
    this._render();
  }

  setSearch(text) {
    this.searchInput.value = text;
    this.search = text.trim().toLowerCase();
    this.page = 0;
    this._recompute();
    this._render();
  }

  pageCount() {
    return this.options.paginated ?
        Math.max(1, Math.ceil(this.view.length / this.options.pageSize)) : 1;
  }

  /** The rows in display order (search + sort applied, all pages): what exports write. */
  visibleRows() {
    return this.view;
  }

  /** Highlights the row with `key` and shows its page; returns whether it is in the table. */
  select(key) {
    this.selectedKey = key;
    let index = this.view.findIndex((r) => this.options.rowKey(r) === key);
    if (index < 0 && this.search) {
      this.setSearch('');
      index = this.view.findIndex((r) => this.options.rowKey(r) === key);
    }
    if (index >= 0 && this.options.paginated) this.page = Math.floor(index / this.options.pageSize);
    this._render();
    const tr = this.tableEl.querySelector('tr.selected');
    if (tr && tr.scrollIntoView) tr.scrollIntoView({block: 'nearest'});
    return index >= 0;
  }

  /** Keeps the columns up to `stickyKey` in view when the table scrolls sideways. */
  _stick() {
    const upTo = this.columns.findIndex((c) => c.key === this.options.stickyKey);
    const n = upTo >= 0 ? upTo + 1 : 1;
    const heads = [...this.tableEl.querySelectorAll('thead th')].slice(0, n);
    // Each column's natural left edge within the table (measured unstuck); a table laid out
    // while hidden is measured again at its first sideways scroll.
    for (const th of heads) th.style.left = '';
    const origin = this.tableEl.getBoundingClientRect().left;
    const lefts = heads.map((th) => th.getBoundingClientRect().left - origin);
    this.stickStale = !this.tableEl.getClientRects().length;
    for (const tr of this.tableEl.rows) {
      for (let i = 0; i < n && i < tr.cells.length; i++) {
        const cell = tr.cells[i];
        cell.classList.add('sticky');
        cell.style.left = `${Math.max(0, lefts[i] || 0)}px`;
      }
    }
  }

  /** `rows` sorted by the current sort (a new array); cached for the `base` set. */
  _sorted(rows) {
    const sort = this.sort;
    // Per `base` array (e.g. each infeed/outfeed variant of the op list), for the current sort
    // and columns only.
    if (!this.sortCache || this.sortCache.sort !== sort || this.sortCache.columns !== this.columns) {
      this.sortCache = {sort, columns: this.columns, sorted: new WeakMap()};
    }
    const cached = rows === this.base ? this.sortCache.sorted.get(rows) : null;
    if (cached) return cached;
    const sorted = rows.slice();
    if (sort) {
      const {key, dir} = sort;
      const col = this.columns.find((c) => c.key === key);
      const numeric = !col || col.type === 'num';
      const sign = dir === 'asc' ? 1 : -1;
      const probe = col || {key};
      sorted.sort((a, b) => {
        const x = a[key];
        const y = b[key];
        const xn = !known(probe, a);
        const yn = !known(probe, b);
        if (xn || yn) return xn && yn ? 0 : xn ? 1 : -1;  // "—" last either way.
        if (numeric) return sign * (x - y);
        return sign * String(x).localeCompare(String(y));
      });
    }
    if (rows === this.base) this.sortCache.sorted.set(rows, sorted);
    return sorted;
  }

  _recompute() {
    let rows = this.rows;
    if (this.base && this.base !== rows) {
      // A subset of `base`: filter the sorted base (linear) rather than sort the subset.
      const keep = new Set(rows);
      rows = this._sorted(this.base).filter((r) => keep.has(r));
    } else {
      rows = this._sorted(rows);
    }
    if (this.search) {
      const keys = this.options.searchKeys;
      const q = this.search;
      rows = rows.filter((r) => keys.some((k) => r[k] !== null && r[k] !== undefined &&
          String(r[k]).toLowerCase().includes(q)));
    }
    this.view = rows;
  }

  _sortBy(key) {
    if (this.sort && this.sort.key === key) {
      this.sort = {key, dir: this.sort.dir === 'asc' ? 'desc' : 'asc'};
    } else {
      const col = this.columns.find((c) => c.key === key);
      this.sort = {key, dir: col && col.type === 'num' && key !== 'rank' ? 'desc' : 'asc'};
    }
    this.page = 0;
    this._recompute();
    this._render();
  }

  _render() {
    const {pageSize, paginated, rowKey, onRowClick} = this.options;
    const start = paginated ? this.page * pageSize : 0;
    const pageRows = paginated ? this.view.slice(start, start + pageSize) : this.view;
    const head = h('thead', {}, h('tr', {}, this.columns.map((c) => {
      const sorted = this.sort && this.sort.key === c.key ? this.sort.dir : null;
      return h('th', {
        class: `sortable ${c.type === 'num' ? 'num' : ''}`,
        // The full name on hover (long names wrap or are cut in the header).
        title: `${c.label}${c.title ? `: ${c.title}` : ''} (click to sort)`,
        dataset: {key: c.key}, 'aria-sort': sorted ? (sorted === 'asc' ? 'ascending' : 'descending') : 'none',
        tabindex: '0', onclick: () => this._sortBy(c.key),
        onkeydown: (e) => { if (e.key === 'Enter') this._sortBy(c.key); },
      }, c.label, sorted ? h('span', {class: 'sort-arrow'}, sorted === 'asc' ? ' ▲' : ' ▼') : null);
    })));
    const body = h('tbody', {}, pageRows.map((r) => {
      const key = rowKey(r);
      return h('tr', {class: key === this.selectedKey ? 'selected' : '', dataset: {key: String(key)},
        onclick: onRowClick ? () => onRowClick(r) : null},
      this.columns.map((c) => {
        const text = c.format(r[c.key], r);
        // Long names are cut to the column's width; the full text is on hover.
        const title = c.cellTitle ? c.cellTitle(r[c.key], r) : c.wide ? text : null;
        return h('td', {class: `${c.type === 'num' ? 'num' : ''} ${c.wide ? 'wide' : ''} ${
          c.cellClass ? c.cellClass(r[c.key], r) : ''}`, dataset: {key: c.key}, title}, text);
      }));
    }));
    if (!pageRows.length) {
      body.appendChild(h('tr', {}, h('td', {colspan: this.columns.length, class: 'muted'},
          this.rows.length ? 'No row matches the search.' : 'No rows.')));
    }
    setChildren(this.tableEl, head, body);
    this._stick();
    const n = this.view.length;
    setChildren(this.countEl, n === this.rows.length ? `${fmtInt(n)} rows` :
        `${fmtInt(n)} of ${fmtInt(this.rows.length)} rows`);
    this.countEl.dataset.count = String(n);
    if (paginated) {
      const pages = this.pageCount();
      const go = (p) => {
        this.page = Math.min(pages - 1, Math.max(0, p));
        this._render();
      };
      setChildren(this.pagerEl,
          h('button', {type: 'button', class: 'page-first', disabled: this.page === 0,
            onclick: () => go(0)}, '« First'),
          h('button', {type: 'button', class: 'page-prev', disabled: this.page === 0,
            onclick: () => go(this.page - 1)}, '‹ Prev'),
          h('span', {class: 'page-info', dataset: {page: String(this.page + 1), pages: String(pages)}},
              ` Page ${this.page + 1} of ${pages} (rows ${n ? start + 1 : 0}–${Math.min(n, start + pageSize)}) `),
          h('button', {type: 'button', class: 'page-next', disabled: this.page >= pages - 1,
            onclick: () => go(this.page + 1)}, 'Next ›'),
          h('button', {type: 'button', class: 'page-last', disabled: this.page >= pages - 1,
            onclick: () => go(pages - 1)}, 'Last »'));
    }
  }
}
