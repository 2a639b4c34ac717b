"""TPU TensorCore planes: the rules (`rules.py`), the file read plane by plane (`file.py`), one
plane (`plane.py`) and its timeline (`timeline.py`).
"""
