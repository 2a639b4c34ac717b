"""Costs of ops from what a profile records: HLO instructions (`costs/hlo/`), PyTorch calls
(`torch/`), and the bytes collectives move (`collectives.py`).
"""
