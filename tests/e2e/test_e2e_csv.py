"""The tab's CSV export (`toCsv` in static/columns.js) follows the API's rule
(`serve/service/core.py::csv_cell`): no cell opens as a formula, a lone CR cannot split a row."""

from __future__ import annotations

import csv
import io
import os
import sys

from e2e_helpers import MAIN_RUN, open_frame

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from test_hostile_inputs import CSV_CASES  # noqa: E402  (the Python side's cases)


def test_the_tab_csv_neutralises_formulas_like_the_api(page, tb):
    from tb_roofline.serve.service.export import to_csv

    open_frame(page, tb, run=MAIN_RUN)
    values = [v for v, _ in CSV_CASES if not isinstance(v, bool)]  # JS writes true, not True
    rows = [{"a": v, "b": "x"} for v in values]
    text = page.evaluate(
        """async ([url, rows]) => {
      const {toCsv} = await import(url);
      return toCsv(rows, ['a', 'b']);
    }""",
        [f"{tb.base}/data/plugin/roofline/static/columns.js", rows],
    )
    assert "\r\n" in text
    ours = list(csv.reader(io.StringIO(text, newline="")))
    api = list(csv.reader(io.StringIO(to_csv(["a", "b"], [[v, "x"] for v in values]), newline="")))
    assert ours == api and len(ours) == 1 + len(values)
    assert [r[0] for r in ours[1:4]] == ["'=1+1", "'+cmd|' /C calc'!A0", "'-2+3"]
