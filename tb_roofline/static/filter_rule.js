// THE op filter, as the API applies it (serve/service/answers.py `filter_mask`), for the rows the tab
// already holds: filtering them here answers a keystroke at once and works in the one-file
// report, which can answer no new query. A row is kept when its category, bound-by, precision
// and caveat are among those asked (an empty list asks for all; 'none' asks for rows without a
// precision or a caveat) and the name filter is a case-insensitive substring of its operation.
// `prefixes`: the column sets a row has ('' for a record; 'base_' and 'cand_' for a comparison's
// pairs, where either side may match).
// tests/e2e/test_e2e_made_once.py checks it against the server's rule, row for row.

const NO_VALUE = 'none';  // (serve/service/answers.py NO_VALUE)

/** The predicate of the filters `{categories, boundBy, name}` (null when all rows pass). */
export function filterPredicate(
    {categories = [], boundBy = [], precisions = [], caveats = [], name = ''} = {},
    prefixes = ['']) {
  const asked = [[categories, 'category', false], [boundBy, 'bound_by', false],
    [precisions, 'precision', true], [caveats, 'caveat', true]]
      .filter(([values]) => values.length)
      .map(([values, key, optional]) => [new Set(values), key, optional]);
  const needle = (name || '').toLowerCase();
  if (!asked.length && !needle) return null;
  const value = (r, key, optional) => (optional ? r[key] || NO_VALUE : r[key]);
  const any = (set, r, key, optional) => prefixes.some((p) => set.has(value(r, p + key, optional)));
  const has = (v) => v !== null && v !== undefined && String(v).toLowerCase().includes(needle);
  return (r) => asked.every(([set, key, optional]) => any(set, r, key, optional)) &&
      (!needle || prefixes.some((p) => has(r[p + 'operation'])));
}

/** The rows the filters keep, in their order (`rows` itself when all are kept). */
export function filterRows(rows, filters, prefixes = ['']) {
  const keep = filterPredicate(filters, prefixes);
  return keep ? rows.filter(keep) : rows;
}
