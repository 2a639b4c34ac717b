// THE op filter, as the API applies it (serve/service/answers.py `filter_mask`), for the rows the tab
// already holds: filtering them here answers a keystroke at once and works in the one-file
// report, which can answer no new query. A row is kept when its category is among those asked,
// its bound-by among those asked (an empty list asks for all) and the name filter is a
// case-insensitive substring of its operation. `prefixes`: the column sets a row has ('' for a
// record; 'base_' and 'cand_' for a comparison's pairs, where either side may match).
// tests/e2e/test_e2e_made_once.py checks it against the server's rule, row for row.

/** The predicate of the filters `{categories, boundBy, name}` (null when all rows pass). */
export function filterPredicate({categories = [], boundBy = [], name = ''} = {}, prefixes = ['']) {
  const cats = categories.length ? new Set(categories) : null;
  const bounds = boundBy.length ? new Set(boundBy) : null;
  const needle = (name || '').toLowerCase();
  if (!cats && !bounds && !needle) return null;
  const any = (set, r, key) => prefixes.some((p) => set.has(r[p + key]));
  const has = (v) => v !== null && v !== undefined && String(v).toLowerCase().includes(needle);
  return (r) => (!cats || any(cats, r, 'category')) && (!bounds || any(bounds, r, 'bound_by')) &&
      (!needle || prefixes.some((p) => has(r[p + 'operation'])));
}

/** The rows the filters keep, in their order (`rows` itself when all are kept). */
export function filterRows(rows, filters, prefixes = ['']) {
  const keep = filterPredicate(filters, prefixes);
  return keep ? rows.filter(keep) : rows;
}
