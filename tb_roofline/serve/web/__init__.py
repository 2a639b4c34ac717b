"""The HTTP front ends: the route table (`routes.py`) mounted by the TensorBoard plugin
(`plugin.py`) and `tb-roofline serve` (`standalone.py`), and the one-file HTML report
(`html_report.py`, with the frontend inlined by `report_bundle.py`).
"""
