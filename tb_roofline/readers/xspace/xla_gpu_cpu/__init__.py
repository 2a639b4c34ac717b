"""XSpaces of XLA on GPU and CPU (no TPU TensorCore planes) → op table costed by the HLO model.

Stages, one module each, composed by `reader.read_gpu_cpu_xspace`:
1. `events`: a plane's op executions. GPU: one plane `/device:GPU:N` per GPU, one line per
   stream; kernel and memcpy events carry `hlo_op` (may be `a::b`), `hlo_module`,
   `program_id`, maybe `group_id`; derived lines (`XLA Ops`, `Steps`...) repeat the kernels
   and are not read as ops. CPU: events of the `/host:CPU` threads with `hlo_op` (one per
   execution).
2. `steps`: GPU `Steps` line by `group_id`; CPU `StepTraceAnnotation` spans (`step_num`).
3. `costing`: events matched to the HLO instructions of `/host:metadata` and costed by
   `tb_roofline.costs.hlo` (per execution; executions = launches of the op's main kernel).
4. `rows`: sums per (op, step) into op rows; kernels matching no instruction keep their time
   as rows of category "unattributed" (zero FLOPs).
5. `reader`: the device (GPU peaks from the plane's capability stats), the timeline summary.
6. `notes`: the diagnostics.
7. `counters`: PM-sampling counters of a GPU plane's `_counters_` line as the op table's
   `CounterSeries` (the measured "Total (HW counters)" records; docs/pytorch_traces.md).

docs/hlo_cost_model.md gives the rules and choices.
"""

from tb_roofline.readers.xspace.xla_gpu_cpu.reader import read_gpu_cpu_xspace

__all__ = ["read_gpu_cpu_xspace"]
