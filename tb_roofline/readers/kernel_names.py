"""What a GPU kernel's name says about what ran: the math unit and precision, and the kind of work
(docs/device_peaks.md, "Precision from kernel names"). A trace's dtypes say what the tensors held;
the kernel says how they were computed: f32 `aten::mm` runs `cutlass_80_tensorop_s1688gemm_*` on
TF32 tensor cores, or `ampere_sgemm_*` on the FP32 CUDA cores.

`kernel_unit(name)` answers a ceiling name (`tf32`, `fp32`, `fp16`, `bf16`, `fp8`, `fp6`, `fp4`,
`int8`, `fp64`, `fp64_tc`, `fp32_tc`) or '' when the name does not say. FP4 is E2M1 (NVFP4,
MXFP4), FP6 E2M3 / E3M2, FP8 E4M3 / E5M2.
"""

from __future__ import annotations

import functools
import re

from tb_roofline.costs.weight_formats import NVJET_FP8

# Order matters: the first rule that matches wins (bf16 before f16; explicit types before the
# generic tensor-op shapes).
_UNIT_RULES = [
    (re.compile(r"e2m1|nvfp4|mxfp4|fp4"), "fp4"),
    (re.compile(r"e2m3|e3m2|mxfp6|fp6"), "fp6"),
    # cuBLAS `nvjet_…qq…`: two fp8 operands (costs/weight_formats.py says how that is known).
    (re.compile(r"e4m3|e5m2|fp8|f8f8|_f8_|qkve4m3|" + NVJET_FP8), "fp8"),
    # `DF16b` is the Itanium mangling of std::bfloat16_t (aiter's and CK's templated kernels:
    # `add_rmsnorm_quant_kernelIDF16bDF16b…`); `DF16_` is _Float16. Before the fp16 rule,
    # whose `f16` would match both.
    (re.compile(r"bf16|bfloat16|df16b"), "bf16"),
    (re.compile(r"fp16|f16|half|[_a-z]h884|[_a-z]h1688|[_a-z]h16816|hgemm|hmma"), "fp16"),
    (re.compile(r"tf32|xf32"), "tf32"),
    (re.compile(r"i8816|i8832|imma|int8|s8s8|i8i8|igemm"), "int8"),
    (re.compile(r"dmma|d884|tensorop_d|dgemm"), "fp64_tc"),
    # CUTLASS/cuBLAS tensor-op GEMMs on f32 operands without a 16-bit type: TF32 MMA.
    (re.compile(r"tensorop_s\d|s1688gemm|s16816gemm|s1684gemm"), "tf32"),
    (re.compile(r"sgemm|scudnn|_sgemv|gcgemm|cgemm|fp32|f32f32"), "fp32"),
]
# AMD Tensile GEMMs: Cijk_<layouts>_<types>_..._MI<m>x<n>x<k>_ (MI = matrix cores).
_TENSILE = re.compile(r"^cijk_[a-z]+_[a-z]+_([a-z0-9]+)_")
_TENSILE_TYPES = {
    "s": ("fp32_tc", "fp32"),
    "d": ("fp64_tc", "fp64"),
    "h": ("fp16", "fp16"),
    "b": ("bf16", "bf16"),
    "i8": ("int8", "int8"),
}

_CATEGORY_RULES = [
    # Inductor's Triton kernels: pointwise, reduction / persistent reduction, template (GEMM)
    (re.compile(r"^triton_poi_"), "elementwise"),
    (re.compile(r"^triton_(red|per)_"), "reduction"),
    (re.compile(r"^triton_tem_.*(mm|conv)"), "matmul"),
    (re.compile(r"^triton_"), "fusion"),
    (
        re.compile(r"nccl|rccl|all_?reduce|all_?gather|reduce_?scatter|sendrecv|multimem"),
        "communication",
    ),
    (re.compile(r"fmha|flash|attention|attn"), "attention"),
    (
        re.compile(r"(?<!type)conv|fprop|dgrad|wgrad|scudnn|implicit_gemm|im2col|winograd|fft"),
        "convolution",
    ),
    (
        re.compile(r"(?<!fb)gemm|gemv|matmul|cijk_|nvjet|bmm_|_mma|tensorop|cutlass::kernel"),
        "matmul",
    ),
    (re.compile(r"reduce|softmax|norm"), "reduction"),
    (re.compile(r"elementwise|functor|_copy|memcpy|fill"), "elementwise"),
]


@functools.lru_cache(maxsize=65536)
def kernel_unit(name: str) -> str:
    low = name.lower()
    m = _TENSILE.match(low)
    if m:
        code = m.group(1)
        for prefix, (matrix, vector) in _TENSILE_TYPES.items():
            if code.startswith(prefix):
                return matrix if "_mi" in low else vector
        return ""
    # vLLM's paged attention names its KV cache's storage type (`Fp8KVCacheDataType)0` is
    # "as the model", 1/2 fp8 storage): not the type its math runs in.
    low = _KV_CACHE_TYPE.sub("", low)
    for pattern, unit in _UNIT_RULES:
        if pattern.search(low):
            return unit
    return ""


_KV_CACHE_TYPE = re.compile(r"\(?[a-z_:]*fp8kvcachedatatype\)?\d*")


@functools.lru_cache(maxsize=65536)
def kernel_category(name: str) -> str:
    """A category for kernels whose op is unknown ('' when the name does not say)."""
    low = name.lower()
    for pattern, category in _CATEGORY_RULES:
        if pattern.search(low):
            return category
    return ""


def is_communication_kernel(name: str) -> bool:
    """A kernel that moves a collective's data between devices (NCCL / RCCL, named so): the one
    rule for what counts as communication time (a collective's copy and concat kernels are
    device work), for the timeline's exposed time and the communication roofline alike."""
    return kernel_category(name) == "communication"


def is_matmul_kernel(name: str) -> bool:
    return kernel_category(name) in ("matmul", "convolution", "attention")


def is_triton_kernel(name: str) -> bool:
    """A kernel Triton compiled (Inductor names them `triton_<kind>_fused_...`, older
    versions `triton__0d1d2d...`)."""
    return name.startswith("triton_")
