"""Per-instruction cost of an HLO module: FLOPs, transcendentals, bytes read and written, precision.

The rules restate XLA's HloCostAnalysis (HLO.md §3) so the module totals equal
`compiled.cost_analysis()`; docs/hlo_cost_model.md lists them with every deliberate difference:
- a `while` costs its body and condition × the known trip count (XLA: one iteration);
- cuBLAS / cuBLASLt gemm and cuDNN convolution custom calls cost as a dot / convolution (XLA's
  PJRT cost analysis reports −1 for every custom call); other custom calls take the
  `cost_estimate_json` in their backend config, else count 0 and are reported.
`xla_compatible=True` switches both back, for checking against XLA.

Costs are computed once per instruction and cached on the module (and by the module's content
digest across readers), so a second request for the same program costs a dictionary look-up.
"""
from __future__ import annotations

import collections
import json
import math
import re
import threading

from tb_roofline.errors import ProfileFormatError
from tb_roofline.hlo.module import Computation, HloModule, Instruction
from tb_roofline.hlo.shapes import TUPLE, Shape, byte_size, leaf_bytes, precision_name

FMA = 2  # one multiply-add counts as two FLOPs

ELEMENTWISE = frozenset("""
add subtract multiply divide remainder maximum minimum abs negate sign floor ceil
round-nearest-afz round-nearest-even and or xor not shift-left shift-right-arithmetic
shift-right-logical popcnt count-leading-zeros clz compare select clamp convert bitcast-convert
stochastic-convert reduce-precision complex real imag is-finite mulhi
""".split())
TRANSCENDENTAL = frozenset("""
acos acosh asin asinh atan2 atanh cbrt cosine cosh erf exponential exponential-minus-one log
log-plus-one logistic power rsqrt sine sinh sqrt tan tanh
""".split())
# Ops whose cost is XLA's default (no FLOPs; bytes = output + operands).
DEFAULT_BYTES = frozenset("""
copy reshape dynamic-reshape broadcast pad concatenate reverse iota send send-done recv recv-done
copy-start copy-done async-update async-done partition-id replica-id get-dimension-size
set-dimension-size opt-barrier batch-norm-training batch-norm-inference batch-norm-grad
all-gather all-gather-start all-gather-done reduce-scatter all-to-all ragged-all-to-all
collective-permute collective-permute-start collective-permute-done collective-broadcast
all-reduce-done rng-get-and-update-state topk
""".split())
NO_COST = frozenset("parameter constant get-tuple-element bitcast after-all add-dependency domain"
                    .split())
CONTAINERS = frozenset(("while", "call", "conditional"))
# Operands each rule needs (fewer is a malformed instruction, not a cost of 0).
MIN_OPERANDS = {"dot": 2, "scaled-dot": 2, "ragged-dot": 3, "convolution": 2, "fft": 1,
                "triangular-solve": 2, "cholesky": 1, "sort": 1, "reduce": 2, "reduce-window": 2,
                "select-and-scatter": 3, "dynamic-update-slice": 2, "gather": 2, "scatter": 3}
MAX_WINDOW_POSITIONS = 1 << 22  # kernel positions one convolution dimension may enumerate


class HloError(ProfileFormatError):
    """A malformed instruction: names its program and instruction."""

_TRIP_COUNT = re.compile(rb'"known_trip_count"\s*:\s*\{\s*"n"\s*:\s*"?(\d+)')
_COST_ESTIMATE_FLOPS = re.compile(rb'flops\\*["\']?\s*[:=]\s*\\*["\']?(\d+)')
_COST_ESTIMATE_BYTES = re.compile(rb'bytes_accessed\\*["\']?\s*[:=]\s*\\*["\']?(\d+)')
_ALGORITHM_PRECISION = {1: "fp8", 2: "fp8", 3: "f16", 4: "f16", 5: "bf16", 6: "bf16", 7: "bf16",
                        8: "bf16", 9: "tf32", 10: "tf32", 11: "f32", 12: "f64", 13: "bf16"}


def is_gemm_target(target: str) -> bool:
    """cuBLAS / cuBLASLt / hipBLASLt matmul custom calls (legacy and current names)."""
    t = target.lower()
    return t.startswith(("__cublas$", "__hipblas")) and ("gemm" in t or "matmul" in t)


def is_conv_target(target: str) -> bool:
    t = target.lower()
    return t.startswith(("__cudnn$conv", "__miopen$conv"))


class Cost:
    """One instruction's cost for ONE execution. `read + written = bytes` except where XLA's
    own bytes total counts otherwise (containers: the sum of their callees)."""
    __slots__ = ("flops", "transcendentals", "bytes", "read", "written", "precision", "category")

    def __init__(self, flops=0.0, transcendentals=0.0, read=0.0, written=0.0, precision="",
                 category=""):
        self.flops = flops
        self.transcendentals = transcendentals
        self.read = read
        self.written = written
        self.bytes = read + written
        self.precision = precision
        self.category = category

    def as_dict(self) -> dict:
        return {k: getattr(self, k) for k in self.__slots__}

    def __repr__(self):
        return (f"Cost(flops={self.flops}, transcendentals={self.transcendentals}, "
                f"bytes={self.bytes}, read={self.read}, written={self.written}, "
                f"precision={self.precision!r}, category={self.category!r})")


class _Totals:
    """Sums of the keys over a computation (XLA's sub-computation properties)."""
    __slots__ = ("flops", "transcendentals", "bytes", "read", "written", "precision",
                 "max_flops")

    def __init__(self):
        self.flops = self.transcendentals = self.bytes = self.read = self.written = 0.0
        self.precision = ""
        self.max_flops = -1.0

    def add(self, c: Cost, times: float = 1.0):
        self.flops += c.flops * times
        self.transcendentals += c.transcendentals * times
        self.bytes += c.bytes * times
        self.read += c.read * times
        self.written += c.written * times
        work = c.flops + c.transcendentals
        if work > self.max_flops:  # the precision of the heaviest work wins
            self.max_flops = work
            self.precision = c.precision


class CostModel:
    """Costs of one module's instructions. Options:
    - `gpu`: fusion constants count from 9 elements (GPU) instead of 2 (CPU / base);
    - `xla_compatible`: while = one iteration, every custom call = −1 (what cost_analysis says).
    """

    def __init__(self, module: HloModule, gpu: bool = False, xla_compatible: bool = False):
        self.module = module
        self.gpu = gpu
        self.xla_compatible = xla_compatible
        self.constant_max_elements = 8 if gpu else 1
        self._cache: dict[int, Cost] = {}
        self._comp_cache: dict[int, _Totals] = {}
        self.unknown: collections.Counter = collections.Counter()  # opcode or custom-call target
        self._handlers = {
            "dot": self._dot, "scaled-dot": self._dot, "ragged-dot": self._ragged_dot,
            "convolution": self._convolution, "fft": self._fft,
            "triangular-solve": self._triangular_solve, "cholesky": self._cholesky,
            "sort": self._sort, "reduce": self._reduce, "reduce-window": self._reduce_window,
            "select-and-scatter": self._select_and_scatter, "map": self._map,
            "scan": self._scan, "fusion": self._fusion, "while": self._while,
            "call": self._call, "conditional": self._conditional,
            "async-start": self._call, "tuple": self._tuple, "slice": self._slice,
            "dynamic-slice": self._dynamic_slice,
            "dynamic-update-slice": self._dynamic_update_slice, "gather": self._gather,
            "scatter": self._scatter, "transpose": self._transpose,
            "infeed": self._feed, "outfeed": self._feed,
            "all-reduce": self._all_reduce, "all-reduce-start": self._all_reduce,
            "rng": self._rng, "rng-bit-generator": self._rng_bit_generator,
            "custom-call": self._custom_call,
        }

    # ------------------------------------------------------------------ public
    def cost(self, ins: Instruction) -> Cost:
        key = id(ins)
        c = self._cache.get(key)
        if c is None:
            try:
                c = self._compute(ins)
            except HloError:
                raise
            except (IndexError, KeyError, TypeError, ValueError, AttributeError,
                    ZeroDivisionError, OverflowError) as exc:
                # A dimension number its operand lacks, a malformed config...: name the place.
                raise HloError(f"{self._where(ins)}: malformed {ins.opcode} "
                               f"({type(exc).__name__})") from None
            self._cache[key] = c
        return c

    def _where(self, ins: Instruction) -> str:
        m = self.module
        program = f"program {m.name[:100]!r}" + (f" ({m.program_id})" if m.program_id else "")
        return f"{program}, instruction {ins.name[:100]!r}"

    def computation_totals(self, comp: Computation) -> _Totals:
        t = self._comp_cache.get(comp.id)
        if t is None:
            active = self.__dict__.setdefault("_active", set())
            if comp.id in active:
                raise HloError(f"program {self.module.name[:100]!r}: computation "
                               f"{comp.name[:100]!r} calls itself")
            active.add(comp.id)
            try:
                t = _Totals()
                for ins in comp.instructions:
                    t.add(self.cost(ins))
            finally:
                active.discard(comp.id)
            self._comp_cache[comp.id] = t
        return t

    def module_totals(self) -> _Totals:
        return self.computation_totals(self.module.entry)

    def all_costs(self) -> dict[str, Cost]:
        """Every instruction of the module by name (nested computations included)."""
        return {ins.name: self.cost(ins) for comp in self.module.computations
                for ins in comp.instructions}

    # ------------------------------------------------------------------ dispatch
    def _compute(self, ins: Instruction) -> Cost:
        op = ins.opcode
        need = MIN_OPERANDS.get(op)
        if need is not None and len(ins.operands) < need:
            raise HloError(f"{self._where(ins)}: a {op} needs {need} operands, it has "
                           f"{len(ins.operands)}")
        if op in NO_COST:
            return Cost(precision=_out_precision(ins), category=category_of(ins))
        if op in ELEMENTWISE:
            c = self._default(ins)
            c.flops = float(_out_elements(ins))
            return c
        if op in TRANSCENDENTAL:
            c = self._default(ins)
            c.transcendentals = float(_out_elements(ins))
            return c
        handler = self._handlers.get(op)
        if handler is not None:
            c = handler(ins)
            if not c.category:
                c.category = category_of(ins)
            return c
        if op not in DEFAULT_BYTES:
            self.unknown[op] += 1
        return self._default(ins)

    def _default(self, ins: Instruction, precision: str | None = None) -> Cost:
        read = 0
        for o in ins.operands:
            read += byte_size(o.shape)
        return Cost(0.0, 0.0, float(read), float(leaf_bytes(ins.shape)),
                    _out_precision(ins) if precision is None else precision, category_of(ins))

    # ------------------------------------------------------------------ matmul family
    def _dot(self, ins: Instruction) -> Cost:
        c = self._default(ins, _dot_precision(ins))
        dn = ins.proto.dot_dimension_numbers
        lhs = ins.operands[0].shape
        c.flops = float(FMA * _out_elements(ins) * _prod(lhs.dims[d] for d in
                                                         dn.lhs_contracting_dimensions))
        return c

    def _ragged_dot(self, ins: Instruction) -> Cost:
        c = self._default(ins, _dot_precision(ins))
        rdn = ins.proto.ragged_dot_dimension_numbers
        dn = rdn.dot_dimension_numbers
        lhs, rhs = ins.operands[0].shape, ins.operands[1].shape
        k = _prod(lhs.dims[d] for d in dn.lhs_contracting_dimensions)
        out = _first_array(ins.shape).elements()
        # The group dimensions of the rhs are not part of the output: the formula is the dot's.
        c.flops = float(FMA * out * k)
        del rhs
        return c

    def _convolution(self, ins: Instruction, out_shape: Shape | None = None) -> Cost:
        c = self._default(ins, _dot_precision(ins))
        c.flops = float(convolution_flops(ins, out_shape or ins.shape))
        return c

    def _fft(self, ins: Instruction) -> Cost:
        c = self._default(ins)
        logs = _prod(int(math.log2(n)) if n > 0 else 0 for n in ins.proto.fft_length)
        c.flops = float(FMA * 4 * logs * ins.operands[0].shape.elements())
        return c

    def _triangular_solve(self, ins: Instruction) -> Cost:
        a, b = ins.operands[0].shape, ins.operands[1].shape
        c = self._default(ins)
        c.flops = float(FMA * a.dims[-1] * b.elements())
        c.read = byte_size(a) / 2 + byte_size(b)
        c.bytes = c.read + c.written
        return c

    def _cholesky(self, ins: Instruction) -> Cost:
        a = ins.operands[0].shape
        c = self._default(ins)
        c.flops = float(a.dims[-1] * a.elements() / 3) if a.dims else 0.0
        c.read = byte_size(a) / 2
        c.written = byte_size(a) / 2
        c.bytes = c.read + c.written
        return c

    def _sort(self, ins: Instruction) -> Cost:
        c = self._default(ins, _in_precision(ins))
        n = ins.operands[0].shape.elements()
        c.flops = float(n * math.ceil(math.log2(n))) if n > 1 else 0.0
        return c

    # ------------------------------------------------------------------ reductions
    def _apply(self, ins: Instruction, index: int = 0) -> _Totals:
        if len(ins.called) <= index:
            return _Totals()
        return self.computation_totals(ins.called[index])

    def _reduce(self, ins: Instruction) -> Cost:
        c = self._default(ins, _in_precision(ins))
        sub = self._apply(ins)
        count = ins.operands[0].shape.elements() - _first_array(ins.shape).elements()
        c.flops = sub.flops * count
        c.transcendentals = sub.transcendentals * count
        return c

    def _reduce_window(self, ins: Instruction) -> Cost:
        c = self._default(ins, _in_precision(ins))
        sub = self._apply(ins)
        out = _first_array(ins.shape)
        dims = ins.proto.window.dimensions
        window = _prod(d.size for d in dims)
        count = (window - 1) * out.elements()
        # "Reduce then broadcast" windows (cumsum): one dimension with a window of 2p+1, padded
        # p on both sides, p = output size - 1. XLA counts a scan of that dimension.
        sized = [i for i, d in enumerate(dims) if d.size != 1]
        padded = [i for i, d in enumerate(dims) if d.padding_low or d.padding_high]
        if len(sized) == 1 and len(padded) == 1 and sized == padded:
            d = dims[sized[0]]
            n = out.dims[sized[0]]
            if d.padding_low == d.padding_high == n - 1 and d.size == 2 * d.padding_low + 1:
                count = out.elements() // n + n - 1 if n else 0
        c.flops = sub.flops * count
        c.transcendentals = sub.transcendentals * count
        return c

    def _select_and_scatter(self, ins: Instruction) -> Cost:
        c = self._default(ins, _in_precision(ins))
        select, scatter = self._apply(ins, 0), self._apply(ins, 1)
        source = ins.operands[1].shape.elements()
        window = _prod(d.size for d in ins.proto.window.dimensions)
        c.flops = select.flops * source * (window - 1) + scatter.flops * source
        c.transcendentals = (select.transcendentals * source * (window - 1)
                             + scatter.transcendentals * source)
        return c

    def _map(self, ins: Instruction) -> Cost:
        c = self._default(ins)
        sub = self._apply(ins)
        n = _out_elements(ins)
        c.flops, c.transcendentals = sub.flops * n, sub.transcendentals * n
        return c

    def _scan(self, ins: Instruction) -> Cost:
        c = self._default(ins)
        sub = self._apply(ins)
        n = ins.operands[1].shape.elements() if len(ins.operands) > 1 else 0
        c.flops, c.transcendentals = sub.flops * n, sub.transcendentals * n
        return c

    # ------------------------------------------------------------------ fusion
    def _fusion(self, ins: Instruction) -> Cost:
        if not ins.called:
            self.unknown["fusion without computation"] += 1
            return self._default(ins)
        comp = ins.called[0]
        if ins.proto.fusion_kind == "kCustom":
            for inner in comp.instructions:
                if inner.opcode in ("gather", "scatter"):
                    c = self.cost(inner)
                    return Cost(c.flops, c.transcendentals, c.read, c.written, c.precision,
                                category_of(ins))
        sub = self.computation_totals(comp)
        written = 0.0
        root = comp.root
        if ins.shape.etype == TUPLE:
            for i, leaf in enumerate(ins.shape.tuple_shapes):
                if not leaf.is_array:
                    continue  # nested tuples: XLA visits every array subshape
                r = root.operands[i] if root is not None and root.opcode == "tuple" and \
                    i < len(root.operands) else None
                if r is not None and r.opcode == "dynamic-update-slice":
                    written += byte_size(r.operands[1].shape)
                else:
                    written += byte_size(leaf)
            for leaf in ins.shape.tuple_shapes:
                if leaf.etype == TUPLE:
                    written += leaf_bytes(leaf)
        elif ins.shape.is_array:
            if root is not None and root.opcode == "dynamic-update-slice":
                written = float(byte_size(root.operands[1].shape))
            else:
                written = float(byte_size(ins.shape))
        read = 0.0
        for inner in comp.instructions:
            if inner.opcode == "constant" and inner.shape.elements() > self.constant_max_elements \
                    and inner.shape.is_array:
                read += byte_size(inner.shape)
        for p in comp.parameters():
            if p.shape.etype != TUPLE:
                read += _param_read_bytes(p)
            else:
                for u in p.users:
                    if u.opcode == "get-tuple-element" and u.shape.etype != TUPLE:
                        read += _param_read_bytes(u)
        return Cost(sub.flops, sub.transcendentals, read, written, sub.precision or
                    _out_precision(ins), category_of(ins))

    # ------------------------------------------------------------------ control flow
    def _called_totals(self, ins: Instruction) -> "_Totals":
        """The called computations' costs added up; precision of the one with the most FLOPs."""
        t = _Totals()
        for comp in ins.called:
            sub = self.computation_totals(comp)
            t.flops += sub.flops
            t.transcendentals += sub.transcendentals
            t.read += sub.read
            t.written += sub.written
            t.bytes += sub.bytes
            if sub.max_flops > t.max_flops:
                t.max_flops, t.precision = sub.max_flops, sub.precision
        return t

    def _while(self, ins: Instruction) -> Cost:
        t = self._called_totals(ins)  # [body, condition]
        n = 1 if self.xla_compatible else (trip_count(ins) or 1)
        c = Cost(t.flops * n, t.transcendentals * n, t.read * n, t.written * n,
                 t.precision or _out_precision(ins), "while")
        c.bytes = t.bytes * n
        return c

    def _call(self, ins: Instruction) -> Cost:
        t = self._called_totals(ins)
        c = Cost(t.flops, t.transcendentals, t.read, t.written, t.precision or _out_precision(ins))
        c.bytes = t.bytes
        return c

    def _conditional(self, ins: Instruction) -> Cost:
        subs = [self.computation_totals(comp) for comp in ins.called]
        if not subs:
            return self._default(ins)
        c = Cost(max(s.flops for s in subs), max(s.transcendentals for s in subs),
                 max(s.read for s in subs), max(s.written for s in subs),
                 max(subs, key=lambda s: s.max_flops).precision or _out_precision(ins))
        c.bytes = max(s.bytes for s in subs)
        return c

    # ------------------------------------------------------------------ data movement
    def _tuple(self, ins: Instruction) -> Cost:
        return Cost(0.0, 0.0, 0.0, float(byte_size(ins.shape)), _out_precision(ins))

    def _slice(self, ins: Instruction) -> Cost:
        out = float(byte_size(ins.shape))
        return Cost(0.0, 0.0, out, out, _out_precision(ins))

    def _dynamic_slice(self, ins: Instruction) -> Cost:
        out = float(byte_size(ins.shape))
        idx = byte_size(ins.operands[1].shape) if len(ins.operands) > 1 else 0
        return Cost(0.0, 0.0, out + idx, out, _out_precision(ins))

    def _dynamic_update_slice(self, ins: Instruction) -> Cost:
        upd = float(byte_size(ins.operands[1].shape))
        idx = byte_size(ins.operands[2].shape) if len(ins.operands) > 2 else 0
        return Cost(0.0, 0.0, upd + idx, upd, _out_precision(ins))

    def _gather(self, ins: Instruction) -> Cost:
        out = float(byte_size(ins.shape))
        return Cost(0.0, 0.0, out + byte_size(ins.operands[1].shape), out, _out_precision(ins))

    def _scatter(self, ins: Instruction) -> Cost:
        n = len(ins.operands) // 2  # inputs..., indices, updates...
        updates = ins.operands[n + 1:]
        upd = float(sum(byte_size(u.shape) for u in updates))
        idx = byte_size(ins.operands[n].shape)
        c = Cost(0.0, 0.0, 2 * upd + idx, upd, _out_precision(ins))
        sub = self._apply(ins)
        count = updates[0].shape.elements() if updates else 0
        c.flops, c.transcendentals = sub.flops * count, sub.transcendentals * count
        return c

    def _transpose(self, ins: Instruction) -> Cost:
        if transpose_is_bitcast(ins):
            return Cost(precision=_out_precision(ins))
        return self._default(ins)

    def _feed(self, ins: Instruction) -> Cost:
        # infeed writes its data leaves; outfeed reads its operand's leaves.
        if ins.opcode == "infeed":
            return Cost(0.0, 0.0, 0.0, float(leaf_bytes(ins.shape)), _out_precision(ins))
        data = ins.operands[0].shape if ins.operands else ins.shape
        return Cost(0.0, 0.0, float(leaf_bytes(data)), 0.0, _out_precision(ins))

    def _all_reduce(self, ins: Instruction) -> Cost:
        c = self._default(ins)
        c.flops = float(ins.shape.leaf_elements())
        return c

    def _rng(self, ins: Instruction) -> Cost:
        c = self._default(ins)
        c.transcendentals = float(_out_elements(ins))
        return c

    def _rng_bit_generator(self, ins: Instruction) -> Cost:
        c = self._default(ins)
        c.transcendentals = float(ins.shape.leaf_elements())
        return c

    # ------------------------------------------------------------------ custom calls
    def _custom_call(self, ins: Instruction) -> Cost:
        target = ins.proto.custom_call_target
        if self.xla_compatible:
            return Cost(-1.0, 0.0, -1.0, 0.0, _out_precision(ins), "custom-call")
        result = _first_array(ins.shape)
        operands = float(sum(byte_size(o.shape) for o in ins.operands))
        if is_gemm_target(target):
            k, precision = _gemm_contracting(ins)
            flops = float(FMA * result.elements() * k)
            return Cost(flops, 0.0, operands, float(byte_size(result)), precision, "dot")
        if is_conv_target(target):
            if len(ins.operands) < 2:
                raise HloError(f"{self._where(ins)}: a convolution needs 2 operands, it has "
                               f"{len(ins.operands)}")
            flops = float(convolution_flops(ins, result))
            return Cost(flops, 0.0, operands, float(byte_size(result)), _dot_precision(ins),
                        "convolution")
        raw = bytes(ins.proto.backend_config)
        if b"cost_estimate_json" in raw:
            f = _COST_ESTIMATE_FLOPS.search(raw)
            b = _COST_ESTIMATE_BYTES.search(raw)
            c = Cost(float(f.group(1)) if f else 0.0, 0.0,
                     operands, float(leaf_bytes(ins.shape)), _out_precision(ins), "custom-call")
            if b:
                c.read, c.written, c.bytes = float(b.group(1)), 0.0, float(b.group(1))
            return c
        self.unknown[f"custom-call {target}"] += 1
        return Cost(0.0, 0.0, operands, float(leaf_bytes(ins.shape)), _out_precision(ins),
                    "custom-call")


_CACHE_LOCK = threading.Lock()


# ---------------------------------------------------------------------- helpers
def _prod(values) -> int:
    p = 1
    for v in values:
        p *= v
    return p


def _first_array(s: Shape) -> Shape:
    while s.etype == TUPLE and s.tuple_shapes:
        s = s.tuple_shapes[0]
    return s


def _out_elements(ins: Instruction) -> int:
    return _prod(ins.shape.dims) if ins.shape.etype != TUPLE else ins.shape.leaf_elements()


def _out_precision(ins: Instruction) -> str:
    s = _first_array(ins.shape)
    if ins.opcode in ("compare", "convert", "bitcast-convert", "select") and ins.operands:
        s = _first_array(ins.operands[-1].shape)
    return precision_name(s.etype) if s.etype != TUPLE else ""


def _in_precision(ins: Instruction) -> str:
    if ins.operands:
        return precision_name(_first_array(ins.operands[0].shape).etype)
    return _out_precision(ins)


def _dot_precision(ins: Instruction) -> str:
    algorithm = ins.proto.precision_config.algorithm
    if algorithm in _ALGORITHM_PRECISION:
        return _ALGORITHM_PRECISION[algorithm]
    return _in_precision(ins)


def _gemm_contracting(ins: Instruction) -> tuple[int, str]:
    """(contracted size, precision) of a gemm custom call from its GemmBackendConfig JSON."""
    precision = _in_precision(ins)
    try:
        cfg = json.loads(bytes(ins.proto.backend_config) or b"{}")
    except ValueError:
        cfg = {}
    gemm = cfg.get("gemm_backend_config", cfg) if isinstance(cfg, dict) else {}
    dims = (gemm.get("dot_dimension_numbers") or {}).get("lhs_contracting_dimensions")
    lhs = ins.operands[0].shape if ins.operands else None
    if dims is None or lhs is None:
        k = lhs.dims[-1] if lhs is not None and lhs.dims else 1
    else:
        k = _prod(lhs.dims[int(d)] for d in dims)
    alg = (gemm.get("precision_config") or {}).get("algorithm", "ALG_UNSET")
    names = {"ALG_DOT_TF32_TF32_F32": "tf32", "ALG_DOT_TF32_TF32_F32_X3": "tf32",
             "ALG_DOT_BF16_BF16_F32": "bf16", "ALG_DOT_BF16_BF16_F32_X3": "bf16",
             "ALG_DOT_BF16_BF16_F32_X6": "bf16", "ALG_DOT_BF16_BF16_F32_X9": "bf16",
             "ALG_DOT_F16_F16_F32": "f16", "ALG_DOT_ANY_F8_ANY_F8_F32": "fp8",
             "ALG_DOT_ANY_F8_ANY_F8_F32_FAST_ACCUM": "fp8"}
    return k, names.get(alg, precision)


def trip_count(ins: Instruction) -> int | None:
    """`known_trip_count.n` from a while's backend config, when XLA recorded it."""
    m = _TRIP_COUNT.search(bytes(ins.proto.backend_config))
    return int(m.group(1)) if m else None


def convolution_flops(ins: Instruction, out: Shape) -> int:
    """2 × (C_in/groups) × C_out × (N/batch groups) × Π valid (kernel, output) positions."""
    p = ins.proto
    dn = p.convolution_dimension_numbers
    lhs, rhs = ins.operands[0].shape, ins.operands[1].shape
    fgc = p.feature_group_count or 1
    bgc = p.batch_group_count or 1
    cin = lhs.dims[dn.input_feature_dimension]
    cout = out.dims[dn.output_feature_dimension]
    batch = lhs.dims[dn.input_batch_dimension]
    positions = 1
    wdims = p.window.dimensions
    for i, (ids, ods) in enumerate(zip(dn.input_spatial_dimensions, dn.output_spatial_dimensions)):
        in_size, out_size = lhs.dims[ids], out.dims[ods]
        if i < len(wdims):
            w = wdims[i]
            k_size = w.size or 1
            stride, lo = w.stride or 1, w.padding_low
            wd, bd = w.window_dilation or 1, w.base_dilation or 1
        else:
            k_size = rhs.dims[dn.kernel_spatial_dimensions[i]] if i < len(
                dn.kernel_spatial_dimensions) else 1
            stride, lo, wd, bd = 1, 0, 1, 1
        positions *= valid_positions(in_size, out_size, k_size, stride, lo, wd, bd)
    return FMA * (cin // fgc) * cout * (batch // bgc) * positions


def valid_positions(in_size, out_size, k_size, stride, pad_lo, wdil, bdil) -> int:
    """(kernel index, output index) pairs that land on a real input element: output o and
    kernel tap k read the base-dilated input at u = o·stride + k·wdil − pad_lo, a real element
    when 0 <= u <= (in_size − 1)·bdil and bdil divides u. Counted per tap in O(1), over the
    taps that can land at all (a corrupt window size cannot make this loop for ever)."""
    if in_size <= 0 or out_size <= 0 or k_size <= 0:
        return 0
    if stride <= 0 or wdil <= 0 or bdil <= 0:
        raise ValueError("non-positive stride or dilation")
    hi_u = (in_size - 1) * bdil
    k_lo = max(0, -(((out_size - 1) * stride - pad_lo) // wdil))  # ceil((pad_lo − …) / wdil)
    k_hi = min(k_size - 1, (hi_u + pad_lo) // wdil)
    if k_hi - k_lo >= MAX_WINDOW_POSITIONS:
        raise ValueError("convolution window too large")
    g = math.gcd(stride, bdil)
    period = bdil // g
    step_inv = pow(stride // g, -1, period) if period > 1 else 0
    total = 0
    for k in range(k_lo, k_hi + 1):
        base = k * wdil - pad_lo
        o_lo = max(0, -(base // stride))            # ceil(−base / stride)
        o_hi = min(out_size - 1, (hi_u - base) // stride)
        if o_lo > o_hi:
            continue
        if period == 1:
            if base % g == 0:  # g == bdil here: every o lands on an element, or none does
                total += o_hi - o_lo + 1
            continue
        if base % g:
            continue
        r = (-(base // g)) * step_inv % period      # o ≡ r (mod period) lands on an element
        first = o_lo + (r - o_lo) % period
        if first <= o_hi:
            total += (o_hi - first) // period + 1
    return total


def transpose_is_bitcast(ins: Instruction) -> bool:
    """A transpose that only relabels dimensions: same physical order in memory."""
    if not ins.operands:
        return False
    a, b = ins.operands[0].shape, ins.shape
    if not (a.has_layout and b.has_layout) or len(a.m2m) != len(a.dims) or \
            len(b.m2m) != len(b.dims):
        return False
    perm = list(ins.proto.dimensions)
    try:
        mapped = [perm[d] for d in b.m2m]
    except IndexError:
        return False
    return mapped == list(a.m2m)


def _param_read_bytes(p: Instruction) -> float:
    """Bytes a fused parameter (or a tuple parameter's element) is read with, by its users."""
    size = byte_size(p.shape)
    total = 0
    shared = False
    for u in p.users:
        op = u.opcode
        if op == "slice":
            total += byte_size(u.shape)
        elif op == "dynamic-slice":
            if u.operands and u.operands[0] is p:
                total += byte_size(u.shape)
            elif not shared:
                shared = True
                total += size
        elif op == "dynamic-update-slice":
            if not (u.operands and u.operands[0] is p) and not shared:
                shared = True
                total += size
        elif op in ("broadcast", "reshape"):
            total += size
        elif op == "fusion" and u.called:
            nested = u.called[0].parameters()
            for idx in u.operand_indices(p):
                if idx >= len(nested):
                    continue
                np_ = nested[idx]
                nested_shared = False
                for nu in np_.users:
                    if nu.opcode == "slice":
                        total += byte_size(nu.shape)
                    elif nu.opcode == "dynamic-slice":
                        if nu.operands and nu.operands[0] is np_:
                            total += byte_size(nu.shape)
                        elif not nested_shared:
                            nested_shared = True
                            total += size
                    elif nu.opcode == "dynamic-update-slice":
                        if not (nu.operands and nu.operands[0] is np_) and not nested_shared:
                            nested_shared = True
                            total += size
                    elif not nested_shared:
                        nested_shared = True
                        total += size
        elif not shared:
            shared = True
            total += size
    return float(total)


def category_of(ins: Instruction) -> str:
    """An XProf-style category: "convolution fusion", "loop fusion", "dot", "data formatting"..."""
    op = ins.opcode
    if op == "fusion":
        kinds = {i.opcode for i in ins.called[0].instructions} if ins.called else set()
        if "convolution" in kinds or "dot" in kinds or "scaled-dot" in kinds or \
                "ragged-dot" in kinds:
            return "convolution fusion"
        kind = ins.proto.fusion_kind
        return {"kLoop": "loop fusion", "kInput": "input fusion", "kOutput": "output fusion",
                "kCustom": "custom fusion"}.get(kind, "fusion")
    if op in ELEMENTWISE or op in TRANSCENDENTAL:
        return "non-fusion elementwise"
    if op in ("copy", "transpose", "reshape", "bitcast", "broadcast", "pad", "concatenate",
              "reverse", "slice", "dynamic-slice", "dynamic-update-slice", "gather", "scatter",
              "iota", "dynamic-reshape", "copy-start", "copy-done"):
        return "data formatting"
    if op in ("scaled-dot", "ragged-dot"):
        return "dot"
    return op


# ---------------------------------------------------------------------- per-program cache
_GLOBAL_CACHE: "collections.OrderedDict[tuple, ModuleCosts]" = collections.OrderedDict()
_GLOBAL_CACHE_SIZE = 256


class ModuleCosts:
    """All instruction costs of one program, computed once."""

    def __init__(self, module: HloModule, gpu: bool = False, xla_compatible: bool = False):
        model = CostModel(module, gpu=gpu, xla_compatible=xla_compatible)
        self.by_name = model.all_costs()
        self.totals = model.module_totals()
        self.unknown = dict(model.unknown)
        self.model = model

    def get(self, name: str) -> Cost | None:
        c = self.by_name.get(name)
        if c is None and "::" in name:
            c = self.by_name.get(name.rsplit("::", 1)[-1])
        return c


def module_costs(module: HloModule, gpu: bool = False, xla_compatible: bool = False) -> ModuleCosts:
    """Costs of every instruction of `module`, cached on the module and by its content digest."""
    key = (module.digest or id(module), gpu, xla_compatible)
    cached = module._costs.get(key)
    if cached is not None:
        return cached
    with _CACHE_LOCK:
        cached = _GLOBAL_CACHE.get(key) if module.digest else None
        if cached is not None:
            _GLOBAL_CACHE.move_to_end(key)
    if cached is None:
        cached = ModuleCosts(module, gpu=gpu, xla_compatible=xla_compatible)
        if module.digest:
            with _CACHE_LOCK:
                _GLOBAL_CACHE[key] = cached
                while len(_GLOBAL_CACHE) > _GLOBAL_CACHE_SIZE:
                    _GLOBAL_CACHE.popitem(last=False)
    module._costs[key] = cached
    return cached
