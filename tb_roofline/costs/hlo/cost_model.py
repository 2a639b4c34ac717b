"""Per-instruction cost of an HLO module: FLOPs, transcendentals, bytes read and written, precision.

The rules restate XLA's HloCostAnalysis so the module totals equal
`compiled.cost_analysis()`; docs/hlo_cost_model.md lists them with every deliberate difference:
- a `while` costs its body and condition × the known trip count (XLA: one iteration);
- cuBLAS / cuBLASLt gemm and cuDNN convolution custom calls cost as a dot / convolution, fused
  attention custom calls (Transformer Engine, cuDNN) as torch.utils.flop_counter counts SDPA
  (XLA's PJRT cost analysis reports −1 for every custom call); other custom calls take the
  `cost_estimate_json` in their backend config, else count 0 and are reported
  (`custom_calls.py`, `attention.py`);
- a pass-through nested fusion (Triton gemm operand tiles) reads its operand (`fusion_bytes.py`).
`xla_compatible=True` switches both back, for checking against XLA.

Costs are computed once per instruction and cached on the module (and by the module's content
digest across readers), so a second request for the same program costs a dictionary look-up.
"""

from __future__ import annotations

import collections
import math
import threading

from tb_roofline.costs.hlo.conv_geometry import (  # noqa: F401
    convolution_flops,
    transpose_is_bitcast,
    valid_positions,
)
from tb_roofline.costs.hlo.cost_basics import (  # noqa: F401 (kept importable from here)
    DEFAULT_BYTES,
    ELEMENTWISE,
    FMA,
    MIN_OPERANDS,
    NO_COST,
    TRANSCENDENTAL,
    Cost,
    HloError,
    Totals,
    category_of,
    dot_precision,
    first_array,
    in_precision,
    out_elements,
    out_precision,
    prod,
    trip_count,
)
from tb_roofline.costs.hlo.custom_calls import custom_call_cost
from tb_roofline.costs.hlo.fusion_bytes import fusion_read_bytes, fusion_written_bytes
from tb_roofline.costs.hlo.module import Computation, HloModule, Instruction
from tb_roofline.costs.hlo.shapes import Shape, byte_size, leaf_bytes


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
        self._comp_cache: dict[int, Totals] = {}
        self.unknown: collections.Counter = collections.Counter()  # opcode or custom-call target
        self._handlers = {
            "dot": self._dot,
            "scaled-dot": self._dot,
            "ragged-dot": self._ragged_dot,
            "convolution": self._convolution,
            "fft": self._fft,
            "triangular-solve": self._triangular_solve,
            "cholesky": self._cholesky,
            "sort": self._sort,
            "reduce": self._reduce,
            "reduce-window": self._reduce_window,
            "select-and-scatter": self._select_and_scatter,
            "map": self._map,
            "scan": self._scan,
            "fusion": self._fusion,
            "while": self._while,
            "call": self._call,
            "conditional": self._conditional,
            "async-start": self._call,
            "tuple": self._tuple,
            "slice": self._slice,
            "dynamic-slice": self._dynamic_slice,
            "dynamic-update-slice": self._dynamic_update_slice,
            "gather": self._gather,
            "scatter": self._scatter,
            "transpose": self._transpose,
            "infeed": self._feed,
            "outfeed": self._feed,
            "all-reduce": self._all_reduce,
            "all-reduce-start": self._all_reduce,
            "rng": self._rng,
            "rng-bit-generator": self._rng_bit_generator,
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
            except (
                IndexError,
                KeyError,
                TypeError,
                ValueError,
                AttributeError,
                ZeroDivisionError,
                OverflowError,
            ) as exc:
                # A dimension number its operand lacks, a malformed config...: name the place.
                raise HloError(
                    f"{self._where(ins)}: malformed {ins.opcode} ({type(exc).__name__})"
                ) from None
            self._cache[key] = c
        return c

    def _where(self, ins: Instruction) -> str:
        m = self.module
        program = f"program {m.name[:100]!r}" + (f" ({m.program_id})" if m.program_id else "")
        return f"{program}, instruction {ins.name[:100]!r}"

    def computation_totals(self, comp: Computation) -> Totals:
        t = self._comp_cache.get(comp.id)
        if t is None:
            active = self.__dict__.setdefault("_active", set())
            if comp.id in active:
                raise HloError(
                    f"program {self.module.name[:100]!r}: computation "
                    f"{comp.name[:100]!r} calls itself"
                )
            active.add(comp.id)
            try:
                t = Totals()
                for ins in comp.instructions:
                    t.add(self.cost(ins))
            finally:
                active.discard(comp.id)
            self._comp_cache[comp.id] = t
        return t

    def module_totals(self) -> Totals:
        entry = self.module.entry
        return Totals() if entry is None else self.computation_totals(entry)  # empty: nothing

    def all_costs(self) -> dict[str, Cost]:
        """Every instruction of the module by name (nested computations included)."""
        return {
            ins.name: self.cost(ins)
            for comp in self.module.computations
            for ins in comp.instructions
        }

    # ------------------------------------------------------------------ dispatch
    def _compute(self, ins: Instruction) -> Cost:
        op = ins.opcode
        need = MIN_OPERANDS.get(op)
        if need is not None and len(ins.operands) < need:
            raise HloError(
                f"{self._where(ins)}: a {op} needs {need} operands, it has {len(ins.operands)}"
            )
        if op in NO_COST:
            return Cost(precision=out_precision(ins), category=category_of(ins))
        if op in ELEMENTWISE:
            c = self._default(ins)
            c.flops = float(out_elements(ins))
            return c
        if op in TRANSCENDENTAL:
            c = self._default(ins)
            c.transcendentals = float(out_elements(ins))
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
        return Cost(
            0.0,
            0.0,
            float(read),
            float(leaf_bytes(ins.shape)),
            out_precision(ins) if precision is None else precision,
            category_of(ins),
        )

    # ------------------------------------------------------------------ matmul family
    def _dot(self, ins: Instruction) -> Cost:
        c = self._default(ins, dot_precision(ins))
        dn = ins.proto.dot_dimension_numbers
        lhs = ins.operands[0].shape
        c.flops = float(
            FMA * out_elements(ins) * prod(lhs.dims[d] for d in dn.lhs_contracting_dimensions)
        )
        return c

    def _ragged_dot(self, ins: Instruction) -> Cost:
        c = self._default(ins, dot_precision(ins))
        rdn = ins.proto.ragged_dot_dimension_numbers
        dn = rdn.dot_dimension_numbers
        lhs, rhs = ins.operands[0].shape, ins.operands[1].shape
        k = prod(lhs.dims[d] for d in dn.lhs_contracting_dimensions)
        out = first_array(ins.shape).elements()
        # The group dimensions of the rhs are not part of the output: the formula is the dot's.
        c.flops = float(FMA * out * k)
        del rhs
        return c

    def _convolution(self, ins: Instruction, out_shape: Shape | None = None) -> Cost:
        c = self._default(ins, dot_precision(ins))
        c.flops = float(convolution_flops(ins, out_shape or ins.shape))
        return c

    def _fft(self, ins: Instruction) -> Cost:
        c = self._default(ins)
        logs = prod(int(math.log2(n)) if n > 0 else 0 for n in ins.proto.fft_length)
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
        c = self._default(ins, in_precision(ins))
        n = ins.operands[0].shape.elements()
        c.flops = float(n * math.ceil(math.log2(n))) if n > 1 else 0.0
        return c

    # ------------------------------------------------------------------ reductions
    def _apply(self, ins: Instruction, index: int = 0) -> Totals:
        if len(ins.called) <= index:
            return Totals()
        return self.computation_totals(ins.called[index])

    def _reduce(self, ins: Instruction) -> Cost:
        c = self._default(ins, in_precision(ins))
        sub = self._apply(ins)
        count = ins.operands[0].shape.elements() - first_array(ins.shape).elements()
        c.flops = sub.flops * count
        c.transcendentals = sub.transcendentals * count
        return c

    def _reduce_window(self, ins: Instruction) -> Cost:
        c = self._default(ins, in_precision(ins))
        sub = self._apply(ins)
        out = first_array(ins.shape)
        dims = ins.proto.window.dimensions
        window = prod(d.size for d in dims)
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
        c = self._default(ins, in_precision(ins))
        select, scatter = self._apply(ins, 0), self._apply(ins, 1)
        source = ins.operands[1].shape.elements()
        window = prod(d.size for d in ins.proto.window.dimensions)
        c.flops = select.flops * source * (window - 1) + scatter.flops * source
        c.transcendentals = (
            select.transcendentals * source * (window - 1) + scatter.transcendentals * source
        )
        return c

    def _map(self, ins: Instruction) -> Cost:
        c = self._default(ins)
        sub = self._apply(ins)
        n = out_elements(ins)
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
                    return Cost(
                        c.flops, c.transcendentals, c.read, c.written, c.precision, category_of(ins)
                    )
        sub = self.computation_totals(comp)
        # GPU: a bitcast is looked through (fusion_bytes.py); CPU keeps XLA's rule exactly
        through = self.gpu and not self.xla_compatible
        read = fusion_read_bytes(comp, self.constant_max_elements, through)
        written = fusion_written_bytes(ins, comp)
        return Cost(
            sub.flops,
            sub.transcendentals,
            read,
            written,
            sub.precision or out_precision(ins),
            category_of(ins),
        )

    # ------------------------------------------------------------------ control flow
    def _called_totals(self, ins: Instruction) -> Totals:
        """The called computations' costs added up; precision of the one with the most FLOPs."""
        t = Totals()
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
        c = Cost(
            t.flops * n,
            t.transcendentals * n,
            t.read * n,
            t.written * n,
            t.precision or out_precision(ins),
            "while",
        )
        c.bytes = t.bytes * n
        return c

    def _call(self, ins: Instruction) -> Cost:
        t = self._called_totals(ins)
        c = Cost(t.flops, t.transcendentals, t.read, t.written, t.precision or out_precision(ins))
        c.bytes = t.bytes
        return c

    def _conditional(self, ins: Instruction) -> Cost:
        subs = [self.computation_totals(comp) for comp in ins.called]
        if not subs:
            return self._default(ins)
        c = Cost(
            max(s.flops for s in subs),
            max(s.transcendentals for s in subs),
            max(s.read for s in subs),
            max(s.written for s in subs),
            max(subs, key=lambda s: s.max_flops).precision or out_precision(ins),
        )
        c.bytes = max(s.bytes for s in subs)
        return c

    # ------------------------------------------------------------------ data movement
    def _tuple(self, ins: Instruction) -> Cost:
        return Cost(0.0, 0.0, 0.0, float(byte_size(ins.shape)), out_precision(ins))

    def _slice(self, ins: Instruction) -> Cost:
        out = float(byte_size(ins.shape))
        return Cost(0.0, 0.0, out, out, out_precision(ins))

    def _dynamic_slice(self, ins: Instruction) -> Cost:
        out = float(byte_size(ins.shape))
        idx = byte_size(ins.operands[1].shape) if len(ins.operands) > 1 else 0
        return Cost(0.0, 0.0, out + idx, out, out_precision(ins))

    def _dynamic_update_slice(self, ins: Instruction) -> Cost:
        upd = float(byte_size(ins.operands[1].shape))
        idx = byte_size(ins.operands[2].shape) if len(ins.operands) > 2 else 0
        return Cost(0.0, 0.0, upd + idx, upd, out_precision(ins))

    def _gather(self, ins: Instruction) -> Cost:
        out = float(byte_size(ins.shape))
        return Cost(0.0, 0.0, out + byte_size(ins.operands[1].shape), out, out_precision(ins))

    def _scatter(self, ins: Instruction) -> Cost:
        n = len(ins.operands) // 2  # inputs..., indices, updates...
        updates = ins.operands[n + 1 :]
        upd = float(sum(byte_size(u.shape) for u in updates))
        idx = byte_size(ins.operands[n].shape)
        c = Cost(0.0, 0.0, 2 * upd + idx, upd, out_precision(ins))
        sub = self._apply(ins)
        count = updates[0].shape.elements() if updates else 0
        c.flops, c.transcendentals = sub.flops * count, sub.transcendentals * count
        return c

    def _transpose(self, ins: Instruction) -> Cost:
        if transpose_is_bitcast(ins):
            return Cost(precision=out_precision(ins))
        return self._default(ins)

    def _feed(self, ins: Instruction) -> Cost:
        # infeed writes its data leaves; outfeed reads its operand's leaves.
        if ins.opcode == "infeed":
            return Cost(0.0, 0.0, 0.0, float(leaf_bytes(ins.shape)), out_precision(ins))
        data = ins.operands[0].shape if ins.operands else ins.shape
        return Cost(0.0, 0.0, float(leaf_bytes(data)), 0.0, out_precision(ins))

    def _all_reduce(self, ins: Instruction) -> Cost:
        c = self._default(ins)
        c.flops = float(ins.shape.leaf_elements())
        return c

    def _rng(self, ins: Instruction) -> Cost:
        c = self._default(ins)
        c.transcendentals = float(out_elements(ins))
        return c

    def _rng_bit_generator(self, ins: Instruction) -> Cost:
        c = self._default(ins)
        c.transcendentals = float(ins.shape.leaf_elements())
        return c

    # ------------------------------------------------------------------ custom calls
    def _custom_call(self, ins: Instruction) -> Cost:
        return custom_call_cost(ins, self.xla_compatible, self.unknown, self._where)


_CACHE_LOCK = threading.Lock()


# ---------------------------------------------------------------------- per-program cache
_GLOBAL_CACHE: collections.OrderedDict[tuple, ModuleCosts] = collections.OrderedDict()
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
