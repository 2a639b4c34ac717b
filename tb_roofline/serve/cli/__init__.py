"""`tb-roofline`: the command line (`main.py`), `comm`, `diff` and plain-text tables."""
