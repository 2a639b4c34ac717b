"""What a profile lacks or what was assumed, in words users read (never a blank page)."""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass
class Diagnostic:
    severity: str  # info | warning | error
    code: str
    message: str
    # A host of the run left out of the answer (its file could not be read) and how many
    # hosts the run has: what the tab's banner counts and names. Only on such a diagnostic.
    skipped_host: str | None = None
    hosts_total: int | None = None
    # A host of the run read in part only (its file cut short: its complete planes are in
    # the answer, the others not). Only on such a diagnostic.
    partial_host: str | None = None

    def to_json(self) -> dict:
        out = dataclasses.asdict(self)
        for key in ("skipped_host", "hosts_total", "partial_host"):
            if out[key] is None:
                del out[key]
        return out


def no_hw_counters_note(pytorch_gpu: bool, gpu: bool = False) -> Diagnostic:
    """Why the program table has no "Total (HW counters)" record. `pytorch_gpu`: a PyTorch
    trace of a GPU; `gpu`: another GPU profile (XLA's)."""
    if pytorch_gpu:
        text = (
            'no hardware counters in this trace, so there is no "Total (HW counters)" '
            "record: it needs PM-sampling counters (counter events of a 'GPU N Counters' "
            "process: DRAM bytes or throughput %, SASS FLOP counts), which a 2026 torch.profiler "
            "records when given a performance-metrics config, or, in older traces, CUPTI "
            "range-profiler SASS FLOP counters per kernel "
            "(smsp__sass_thread_inst_executed_op_{d,f,h}{add,mul,fma}_pred_on.sum); see "
            "docs/pytorch_traces.md"
        )
    elif gpu:
        text = (
            'no hardware counters in this profile, so there is no "Total (HW counters)" '
            "record: an XLA GPU profile has them when captured with CUPTI PM sampling (a "
            "'_counters_' line on the GPU plane measuring DRAM throughput % or bytes, e.g. "
            "jax.profiler.ProfileOptions().advanced_configuration = {'gpu_pm_sample_counters': "
            "'dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__cycles_active.avg'}); "
            "the FLOPs shown are the cost model's; see docs/pytorch_traces.md"
        )
    else:
        text = (
            'no "Total (HW counters)" record: this profile format carries no hardware '
            "counters (only GPU profiles do: PyTorch traces with PM sampling or CUPTI's range "
            "profiler, XLA GPU profiles with PM sampling); the FLOPs shown are the profile's "
            "or the cost model's"
        )
    return Diagnostic("info", "no_hw_counters", text)
