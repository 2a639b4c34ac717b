"""The service behind every front end: runs, hosts, answers, comparison, report and exports
(`core.py` holds `RooflineService`; `analyses.py`, `hosts.py`, `budget.py` what it reads and
keeps; `compare.py`, `report.py`, `export.py`, `answers.py` plain functions of analyses).
"""
