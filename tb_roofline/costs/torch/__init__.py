"""Costs of PyTorch ops from what `record_shapes=True` writes into a Kineto trace: aten, custom,
pooling, sparse and serving-engine ops.
"""
