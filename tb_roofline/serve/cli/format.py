"""Plain-text tables for the command line (`tb-roofline report`, `tb-roofline diff`)."""

from __future__ import annotations


def _fmt(value) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        if value == 0:
            return "0"
        if abs(value) >= 1e6 or abs(value) < 1e-3:
            return f"{value:.3e}"
        return f"{value:,.3f}" if abs(value) < 1000 else f"{value:,.1f}"
    return str(value)


NAME_WIDTH = 64  # long kernel names would push every other column off the screen


def _cell(value) -> str:
    text = _fmt(value)
    return text if len(text) <= NAME_WIDTH else text[: NAME_WIDTH - 1] + "…"


def _table(headers: list[str], rows: list[list]) -> str:
    cells = [headers] + [[_cell(v) for v in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    lines = [
        "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths)))
        for row in cells
    ]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)
