"""Serving engines' step annotations (SGLang, vLLM, ATOM) → per-step facts.

Serving engines name each forward step with a `record_function` span whose name carries the
shape of the batch (docs/pytorch_traces.md, "Serving steps"):

- SGLang: `step[EXTEND bs=15 toks=15360]`, `step[DECODE bs=32]` (the forward mode, the batch);
- roofline annotations (SGLang, ATOM and vLLM write them): `execute_<tokens>_context_<n>(sq…sk…
  sqsq…sqsk…)_generation_<m>(sq…sk…sqsq…sqsk…)`: per phase (context = prefill/extend,
  generation = decode) the request count and the sums over its requests of the query length
  Sq, the key length Sk, Sq² and Sq·Sk;
- vLLM: `execute_context_<n>(<tokens>)_generation_<m>(<tokens>)`: per phase the request count
  and its tokens (Σ Sq). Numbers after a `_` inside the parentheses (`(888_788544)`) are kept
  as `extra` and not interpreted: vLLM does not say which sum they are.

A step's attention work follows from the sums alone: Q·Kᵀ and P·V over every (query, key) pair
of every request, 4·H_q·D·Σ Sq·Sk FLOPs (costs/torch/serving_ops.py).
"""

from __future__ import annotations

import dataclasses
import re

_SGLANG_STEP = re.compile(r"^step\[([A-Z_]+)((?:\s+[a-z_]+=[0-9]+)*)\s*\]$")
_PHASE_SUMS = r"\(sq(\d+)sk(\d+)sqsq(\d+)sqsk(\d+)\)"
_SGLANG_EXEC = re.compile(
    r"^execute_(\d+)_context_(\d+)" + _PHASE_SUMS + r"_generation_(\d+)" + _PHASE_SUMS + r"$"
)
_VLLM_EXEC = re.compile(
    r"^execute_context_(\d+)\((\d+)((?:_\d+)*)\)_generation_(\d+)\((\d+)"
    r"((?:_\d+)*)\)$"
)
# SGLang forward modes → phase
_MODES = {
    "EXTEND": "prefill",
    "PREFILL": "prefill",
    "DECODE": "decode",
    "MIXED": "mixed",
    "TARGET_VERIFY": "mixed",
    "DRAFT_EXTEND": "prefill",
    "IDLE": "idle",
}
_MAX = 10**15  # a larger count is corrupt


@dataclasses.dataclass
class PhaseSums:
    """One phase of a step: its requests and the sums over them (None: not recorded)."""

    requests: int
    sq: int | None = None  # Σ Sq: the phase's query tokens
    sk: int | None = None  # Σ Sk: keys attended (cached + new)
    sqsq: int | None = None  # Σ Sq²
    sqsk: int | None = None  # Σ Sq·Sk
    extra: tuple = ()  # numbers the engine wrote that we do not interpret

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)


@dataclasses.dataclass
class StepFacts:
    """What one step annotation says (times are filled in by the reader)."""

    engine: str  # "sglang", "vllm", "unknown"; "" until the trace's ops decide (with_engine)
    phase: str  # "prefill", "decode", "mixed", "idle"
    batch: int | None  # requests in the step
    tokens: int | None  # tokens in the step
    context: PhaseSums | None = None
    generation: PhaseSums | None = None
    mode: str = ""  # the engine's own name (SGLang's forward mode)
    name: str = ""

    def sums_known(self) -> bool:
        """Σ Sq·Sk known for every phase that has requests."""
        return all(
            p is not None and (p.requests == 0 or p.sqsk is not None)
            for p in (self.context, self.generation)
        )

    def total(self, field: str) -> int | None:
        """A sum over both phases (None when a phase with requests lacks it)."""
        out = 0
        for p in (self.context, self.generation):
            if p is None:
                return None
            v = getattr(p, field)
            if v is None:
                if p.requests:
                    return None
                continue
            out += v
        return out


def _num(text: str) -> int:
    v = int(text)
    if v > _MAX:
        raise ValueError(f"count {text} too large")
    return v


def _phase_of(context: int, generation: int) -> str:
    if context and generation:
        return "mixed"
    if context:
        return "prefill"
    return "decode" if generation else "idle"


def parse(name: str) -> StepFacts | None:
    """The facts of one annotation name, or None when it is no serving step annotation."""
    if not name.startswith(("step[", "execute_")):
        return None
    try:
        return _parse(name)
    except ValueError:
        return None


def _parse(name: str) -> StepFacts | None:
    m = _SGLANG_EXEC.match(name)
    if m:
        g = [_num(x) for x in m.groups()]
        ctx = PhaseSums(g[1], g[2], g[3], g[4], g[5])
        gen = PhaseSums(g[6], g[7], g[8], g[9], g[10])
        return StepFacts(
            "",  # SGLang, ATOM and vLLM write this form: the trace's ops say (engine_of)
            _phase_of(ctx.requests, gen.requests),
            ctx.requests + gen.requests,
            g[0],
            ctx,
            gen,
            name=name,
        )
    m = _VLLM_EXEC.match(name)
    if m:
        n, ntok, nextra, k, ktok, kextra = m.groups()
        ctx_tokens, gen_tokens = _num(ntok), _num(ktok)
        ctx = PhaseSums(_num(n), ctx_tokens, extra=tuple(_num(x) for x in nextra.split("_")[1:]))
        gen = PhaseSums(_num(k), gen_tokens, extra=tuple(_num(x) for x in kextra.split("_")[1:]))
        return StepFacts(
            "vllm",
            _phase_of(ctx.requests, gen.requests),
            ctx.requests + gen.requests,
            ctx_tokens + gen_tokens,
            ctx,
            gen,
            name=name,
        )
    m = _SGLANG_STEP.match(name)
    if m:
        mode = m.group(1)
        fields = dict(kv.split("=") for kv in m.group(2).split())
        bs = _num(fields["bs"]) if "bs" in fields else None
        toks = _num(fields["toks"]) if "toks" in fields else None
        return StepFacts("sglang", _MODES.get(mode, mode.lower()), bs, toks, mode=mode, name=name)
    return None


# Op namespaces each engine registers (vLLM: `vllm::unified_attention`, `_C::rms_norm`,
# `_C_cache_ops::reshape_and_cache_flash`, `_moe_C::topk_softmax`, `_rocm_C::paged_attention`;
# SGLang: `sglang::`, `sgl_kernel::`, its profiler's `sglang_profiler::` wrappers). Kernel names
# do not decide: SGLang on ROCm runs vLLM's paged-attention kernels.
_ENGINE_OPS = {
    "vllm": ("vllm::", "_C::", "_C_cache_ops::", "_moe_C::", "_rocm_C::", "_vllm_fa"),
    "sglang": ("sglang::", "sgl_kernel::", "sglang_profiler::"),
}


def engine_of(op_names) -> str:
    """The engine whose ops the trace ran ("vllm", "sglang"), or "" when neither or both."""
    found = {
        engine
        for name in op_names
        for engine, prefixes in _ENGINE_OPS.items()
        if name.startswith(prefixes)
    }
    return found.pop() if len(found) == 1 else ""


def with_engine(facts: StepFacts, op_names) -> StepFacts:
    """An `execute_<tokens>_context_…` step (a form several engines write) with its engine:
    SGLang's when its `step[MODE …]` span was beside it, else the one whose ops the trace ran
    ("unknown" when the ops do not say)."""
    if facts.engine:
        return facts
    engine = "sglang" if facts.mode else engine_of(op_names) or "unknown"
    return dataclasses.replace(facts, engine=engine)


def merge(exec_facts: StepFacts, mode_facts: StepFacts) -> StepFacts:
    """An `execute_…` annotation with the `step[MODE …]` span beside it (SGLang writes both):
    the sums from the first, the engine's mode (and a batch or token count the first lacks)
    from the second."""
    out = dataclasses.replace(exec_facts, mode=mode_facts.mode)
    if out.batch is None:
        out.batch = mode_facts.batch
    if out.tokens is None:
        out.tokens = mode_facts.tokens
    return out


def label(step_id: int, facts: StepFacts) -> str:
    """`134 · decode bs 32` (the program record's step label)."""
    bs = f" bs {facts.batch}" if facts.batch is not None else ""
    return f"{step_id} · {facts.phase}{bs}"
