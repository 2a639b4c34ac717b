"""XSpace files (`*.xplane.pb`): the wire format, the file's plan, TPU TensorCore planes
(`tpu/`) and XLA on GPU and CPU (`xla_gpu_cpu/`).
"""
