"""`tb-roofline`: the entry point (`main.py`), the command line (`parser.py`), the commands
(`report.py`, `commands.py`: runs, export; `comm.py`, `diff.py`) and plain-text tables."""
