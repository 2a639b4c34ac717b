// A sortable, searchable, paginated table of records.
import {h, setChildren} from './dom.js';
import {fmtInt} from '../columns.js';

export class DataTable {
  /**
   * @param {HTMLElement} container
   * @param {{id: string, columns: Array, pageSize?: number, searchKeys?: string[],
   *          rowKey: (row) => any, onRowClick?: (row) => void, defaultSort?: {key, dir},
   *          searchable?: boolean, paginated?: boolean}} options
   */
  constructor(container, options) {
    this.options = {pageSize: 50, searchKeys: [], searchable: true, paginated: true, ...options};
    this.columns = options.columns;
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
    setChildren(container,
        h('div', {class: 'table-toolbar'}, this.options.searchable ? this.searchInput : null,
            this.countEl),
        h('div', {class: 'table-scroll'}, this.tableEl),
        this.options.paginated ? this.pagerEl : null);
  }

  setColumns(columns) {
    this.columns = columns;
    this.sortCache = null;
    this._render();
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
      sorted.sort((a, b) => {
        const x = a[key];
        const y = b[key];
        const xn = x === null || x === undefined;
        const yn = y === null || y === undefined;
        if (xn || yn) return xn && yn ? 0 : xn ? 1 : -1;  // Unknown last either way.
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
        class: `sortable ${c.type === 'num' ? 'num' : ''}`, title: c.title || `Sort by ${c.label}`,
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
