"""Caches of converted profiles and answers: in memory (`memory.py`) and on disk (`disk.py`, its
encoding `codec.py` and directory `path.py`).
"""
