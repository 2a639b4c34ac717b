"""The service behind every front end: runs, hosts, answers, comparison, report and exports
(`core.py` holds `RooflineService`).
"""
