"""tb-roofline: roofline analysis of ML profiles, as a TensorBoard plugin, a CLI and a Python
API for notebooks (`tb_roofline.load(logdir)`, tb_roofline/serve/notebook.py)."""

from __future__ import annotations

__version__ = "0.1.0"


def load(logdir: str, run: str | None = None, host: str | None = None, **kwargs):
    """The analysis of one run of a logdir: `.device`, `.program()`, `.ops()`, `.guidance()`,
    `.diagnostics()`, `.compare(other)`; shown in Jupyter as the interactive report.
    (Imported when called: `import tb_roofline` stays instant.)"""
    from tb_roofline.serve.notebook import load as _load

    return _load(logdir, run, host, **kwargs)
