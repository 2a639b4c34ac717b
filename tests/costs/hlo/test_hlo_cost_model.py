"""The HLO cost model: XLA's own cost_analysis() on real profiles, and every rule by hand.

Each real profile in testdata/jax_cpu holds XLA's `compiled.cost_analysis()` for the profiled
program (one execution). In `xla_compatible` mode our totals must equal it within 0.1% (XLA sums
in float32, so the last digits may differ). Our default mode differs on purpose for while loops
(× the known trip count); that value is checked against a hand derivation.
"""

from __future__ import annotations

import glob
import json
import os

import pytest
from testpaths import TESTS

from tb_roofline.costs.hlo import CostModel, HloIndex, module_costs, parse_module
from tb_roofline.costs.hlo.cost_model import valid_positions
from tb_roofline.costs.hlo.shapes import BF16, F32, F64, PRED, S8, S32, TUPLE, U8
from tb_roofline.protos import hlo_pb2
from tb_roofline.readers.xspace.xplane import load_xspace

REPO = os.path.dirname(TESTS)
PROFILES = sorted(
    os.path.dirname(p)
    for p in glob.glob(os.path.join(REPO, "testdata", "jax_cpu", "*", "cost_analysis.json"))
)
F8E4M3FN = 20


# ---------------------------------------------------------------------------- a tiny HLO builder
class HloBuilder:
    """Builds an HloModuleProto by hand: computations of instructions with shapes and fields."""

    def __init__(self, name="m"):
        self.module = hlo_pb2.HloModuleProto(name=name)
        self._next_id = 1
        self._comp = None

    def computation(self, name, fusion=False):
        comp = self.module.computations.add(
            name=name, id=len(self.module.computations) + 1, is_fusion_computation=fusion
        )
        self._comp = comp
        return comp

    @staticmethod
    def shape(etype, dims=(), layout=True, tuple_shapes=None):
        s = hlo_pb2.ShapeProto(element_type=etype)
        if tuple_shapes is not None:
            s.element_type = TUPLE
            for t in tuple_shapes:
                s.tuple_shapes.add().CopyFrom(t)
            return s
        s.dimensions.extend(dims)
        if layout:
            s.layout.minor_to_major.extend(reversed(range(len(dims))))
        return s

    def add(self, name, opcode, shape, operands=(), called=(), **fields):
        ins = self._comp.instructions.add(name=name, opcode=opcode, id=self._next_id)
        self._next_id += 1
        ins.shape.CopyFrom(shape if isinstance(shape, hlo_pb2.ShapeProto) else self.shape(*shape))
        ins.operand_ids.extend(o.id for o in operands)
        ins.called_computation_ids.extend(c.id for c in called)
        for key, value in fields.items():
            target = getattr(ins, key)
            if isinstance(value, (list, tuple)):
                target.extend(value)
            elif hasattr(target, "CopyFrom"):
                target.CopyFrom(value)
            else:
                setattr(ins, key, value)
        self._comp.root_id = ins.id
        return ins

    def param(self, name, shape, number):
        return self.add(name, "parameter", shape, parameter_number=number)

    def adder(self, name="add_f32", etype=F32):
        comp = self.computation(name)
        a = self.param("a", (etype, ()), 0)
        b = self.param("b", (etype, ()), 1)
        self.add("sum", "add", (etype, ()), [a, b])
        return comp

    def build(self, entry):
        self.module.entry_computation_id = entry.id
        self.module.entry_computation_name = entry.name
        return parse_module(hlo_pb2.HloProto(hlo_module=self.module).SerializeToString(), "1")


def _cost(module, name, **opts):
    model = CostModel(module, **opts)
    return model.cost(module.by_name[name]), model


def _single(opcode, out, operands, **fields):
    """A module whose entry holds parameters and one instruction `op`."""
    b = HloBuilder()
    entry = b.computation("main")
    params = [b.param(f"p{i}", s, i) for i, s in enumerate(operands)]
    b.add("op", opcode, out, params, **fields)
    return b.build(entry)


# ---------------------------------------------------------------------------- real profiles
def _profiled_program(folder):
    """(module, reference): the program whose ops the profile timed, and XLA's cost_analysis."""
    path = glob.glob(os.path.join(folder, "plugins", "profile", "*", "*.xplane.pb"))[0]
    space = load_xspace(path)
    index = HloIndex.from_space(space)
    from tb_roofline.readers.xspace.xla_gpu_cpu import read_gpu_cpu_xspace

    data = read_gpu_cpu_xspace(space, "h")
    pids = set(data.ops["program_id"].tolist())
    assert len(pids) == 1, pids
    module = index.get(pids.pop())
    program = os.path.join(folder, "program.json")
    if os.path.exists(program):
        assert module.name == json.load(open(program))["module"]
    return module, json.load(open(os.path.join(folder, "cost_analysis.json"))), data


def test_there_are_real_profiles_with_convolution_attention_and_while():
    names = {os.path.basename(p) for p in PROFILES}
    assert {"mlp", "matmul_tanh", "convnet", "attention", "while_loop"} <= names


@pytest.mark.parametrize("folder", PROFILES, ids=os.path.basename)
def test_matches_xla_cost_analysis_within_0_1_percent(folder):
    module, ref, _ = _profiled_program(folder)
    model = CostModel(module, xla_compatible=True)
    t = model.module_totals()
    assert not model.unknown
    for ours, key in (
        (t.flops, "flops"),
        (t.transcendentals, "transcendentals"),
        (t.bytes, "bytes accessed"),
    ):
        want = ref.get(key, 0.0)
        assert abs(ours - want) <= 1e-3 * max(abs(want), 1.0), (key, ours, want)
    assert t.read + t.written == pytest.approx(t.bytes)


@pytest.mark.parametrize("folder", PROFILES, ids=os.path.basename)
def test_default_mode_equals_xla_without_while_loops(folder):
    module, ref, _ = _profiled_program(folder)
    has_while = any(i.opcode == "while" for c in module.computations for i in c.instructions)
    ours = CostModel(module).module_totals()
    if not has_while:
        assert abs(ours.flops - ref["flops"]) <= 1e-3 * ref["flops"]
        assert abs(ours.bytes - ref["bytes accessed"]) <= 1e-3 * ref["bytes accessed"]


def test_while_loop_profile_counts_every_iteration():
    """fori_loop(0, 6, x -> tanh(x @ w) + x) with x: f32[64,256], w: f32[256,256].
    Per iteration: dot 2·64·256·256 = 8,388,608 flops, the add 64·256 = 16,384, the loop counter
    add 1 and the condition's compare 1; tanh 16,384 transcendentals. XLA counts 1 iteration."""
    module, ref, data = _profiled_program(os.path.join(REPO, "testdata", "jax_cpu", "while_loop"))
    per_iter = 2 * 64 * 256 * 256 + 64 * 256 + 1 + 1
    xla = CostModel(module, xla_compatible=True).module_totals()
    ours = CostModel(module).module_totals()
    assert xla.flops == pytest.approx(ref["flops"], rel=1e-3)
    assert ours.flops - xla.flops == 5 * per_iter
    assert ours.transcendentals == 6 * 64 * 256
    (w,) = [i for c in module.computations for i in c.instructions if i.opcode == "while"]
    assert CostModel(module).cost(w).flops == 6 * per_iter
    # In the op table the while is a container; its body ops ran 6 × 5 times. The condition's
    # compare (1 flop per iteration) runs inside the while thunk and has no event of its own.
    t = data.ops
    inner = ~t["is_container"]
    assert t["flops"][inner].sum() == 5 * (ours.flops - 6 * 1)
    assert t["occurrences"][t["operation"] == "tanh_add_fusion"].sum() == 6 * 5


def test_reader_per_execution_totals_equal_cost_analysis():
    """Ops timed 5 times: the op table's FLOPs / 5 are XLA's per-execution FLOPs."""
    for folder in PROFILES:
        if os.path.basename(folder) == "while_loop":
            continue
        _, ref, data = _profiled_program(folder)
        inner = ~data.ops["is_container"]
        assert data.ops["flops"][inner].sum() / 5 == pytest.approx(ref["flops"], rel=1e-3)
        # Bytes: instructions without an event (tuple, parameters) hold only a few bytes.
        assert data.ops["bytes"][inner].sum() / 5 == pytest.approx(ref["bytes accessed"], rel=1e-3)


def test_mlp_matmuls_dominate_and_are_f32():
    module, _, _ = _profiled_program(os.path.join(REPO, "testdata", "jax_cpu", "mlp"))
    costs = module_costs(module)
    dots = 0
    for comp in module.computations:
        for ins in comp.instructions:
            if ins.opcode == "dot":
                dots += costs.model.cost(ins).flops
                assert costs.model.cost(ins).precision == "f32"
    # By hand: the 8 dots give 1,224,212,480 flops.
    assert dots == 1_224_212_480


# ---------------------------------------------------------------------------- rules by hand
def test_elementwise_counts_output_elements_and_default_bytes():
    m = _single("add", (F32, (4, 8)), [(F32, (4, 8)), (F32, (4, 8))])
    c, _ = _cost(m, "op")
    assert (c.flops, c.transcendentals) == (32, 0)
    assert (c.read, c.written, c.bytes) == (256, 128, 384)
    assert c.precision == "f32" and c.category == "non-fusion elementwise"


@pytest.mark.parametrize(
    "opcode", ["exponential", "tanh", "log", "rsqrt", "power", "erf", "logistic", "sine", "atan2"]
)
def test_transcendentals_instead_of_flops(opcode):
    m = _single(opcode, (F32, (10,)), [(F32, (10,)), (F32, (10,))])
    c, _ = _cost(m, "op")
    assert (c.flops, c.transcendentals) == (0, 10)


def test_compare_precision_is_the_operands():
    m = _single("compare", (PRED, (10,)), [(BF16, (10,)), (BF16, (10,))])
    c, _ = _cost(m, "op")
    assert c.flops == 10 and c.precision == "bf16"
    assert c.bytes == 10 * 1 + 2 * 10 * 2  # pred is stored in a byte


def test_dot_with_batch_dims():
    # [2,3,5] x [2,5,7] -> [2,3,7]: 2 · (2·3·7) · 5 = 420 flops.
    dn = hlo_pb2.DotDimensionNumbers(
        lhs_contracting_dimensions=[2],
        rhs_contracting_dimensions=[1],
        lhs_batch_dimensions=[0],
        rhs_batch_dimensions=[0],
    )
    m = _single(
        "dot", (F32, (2, 3, 7)), [(F32, (2, 3, 5)), (F32, (2, 5, 7))], dot_dimension_numbers=dn
    )
    c, _ = _cost(m, "op")
    assert c.flops == 420
    assert c.bytes == 4 * (30 + 70 + 42)
    assert c.category == "dot"


@pytest.mark.parametrize(
    "etype,name",
    [(BF16, "bf16"), (F8E4M3FN, "fp8"), (S8, "int8"), (U8, "int8"), (F64, "f64"), (F32, "f32")],
)
def test_dot_precision_follows_the_operands(etype, name):
    dn = hlo_pb2.DotDimensionNumbers(lhs_contracting_dimensions=[1], rhs_contracting_dimensions=[0])
    m = _single("dot", (F32, (4, 4)), [(etype, (4, 8)), (etype, (8, 4))], dot_dimension_numbers=dn)
    c, _ = _cost(m, "op")
    assert c.precision == name and c.flops == 2 * 16 * 8


def test_dot_algorithm_overrides_precision():
    dn = hlo_pb2.DotDimensionNumbers(lhs_contracting_dimensions=[1], rhs_contracting_dimensions=[0])
    m = _single(
        "dot",
        (F32, (4, 4)),
        [(F32, (4, 8)), (F32, (8, 4))],
        dot_dimension_numbers=dn,
        precision_config=hlo_pb2.PrecisionConfig(algorithm=9),
    )  # TF32_TF32_F32
    assert _cost(m, "op")[0].precision == "tf32"


def _conv(in_dims, k_dims, out_dims, window, fgc=1, bgc=1):
    """NWC / WIO / NWC 1-D convolution."""
    dn = hlo_pb2.ConvolutionDimensionNumbers(
        input_batch_dimension=0,
        input_feature_dimension=2,
        input_spatial_dimensions=[1],
        kernel_input_feature_dimension=1,
        kernel_output_feature_dimension=2,
        kernel_spatial_dimensions=[0],
        output_batch_dimension=0,
        output_feature_dimension=2,
        output_spatial_dimensions=[1],
    )
    w = hlo_pb2.Window()
    w.dimensions.add(**window)
    return _single(
        "convolution",
        (F32, out_dims),
        [(F32, in_dims), (F32, k_dims)],
        convolution_dimension_numbers=dn,
        window=w,
        feature_group_count=fgc,
        batch_group_count=bgc,
    )


def test_convolution_same_padding_skips_padded_taps():
    # Input 5, kernel 3, pad 1/1, stride 1 -> 5 outputs; taps on real input: 4 + 5 + 4 = 13.
    m = _conv(
        (1, 5, 1),
        (3, 1, 1),
        (1, 5, 1),
        dict(size=3, stride=1, padding_low=1, padding_high=1, window_dilation=1, base_dilation=1),
    )
    assert _cost(m, "op")[0].flops == 2 * 13


def test_convolution_stride_batch_and_channels():
    # N=2, Cin=3, Cout=4; input 5, kernel 3, stride 2, VALID -> 2 outputs, 3 taps each.
    m = _conv(
        (2, 5, 3), (3, 3, 4), (2, 2, 4), dict(size=3, stride=2, window_dilation=1, base_dilation=1)
    )
    assert _cost(m, "op")[0].flops == 2 * 3 * 4 * 2 * 6


def test_convolution_feature_groups():
    # Cin=4 in 2 groups (kernel input features 2), Cout=6, input 4, kernel 1: 2·(4/2)·6·4.
    m = _conv(
        (1, 4, 4),
        (1, 2, 6),
        (1, 4, 6),
        dict(size=1, stride=1, window_dilation=1, base_dilation=1),
        fgc=2,
    )
    assert _cost(m, "op")[0].flops == 2 * 2 * 6 * 4


def test_convolution_dilations_by_enumeration():
    # Base (lhs) dilation 2 on 3 inputs: real elements at dilated positions 0, 2, 4.
    # Window 3, pad 1/1, stride 1 over the 5 dilated positions -> 5 outputs.
    # Output o, tap k reads dilated position o - 1 + k; real when even and in [0, 4].
    expected = sum(
        1 for o in range(5) for k in range(3) if (o - 1 + k) % 2 == 0 and 0 <= (o - 1 + k) // 2 < 3
    )
    assert expected == 7
    assert valid_positions(3, 5, 3, 1, 1, 1, 2) == 7
    m = _conv(
        (1, 3, 1),
        (3, 1, 1),
        (1, 5, 1),
        dict(size=3, stride=1, padding_low=1, padding_high=1, window_dilation=1, base_dilation=2),
    )
    assert _cost(m, "op")[0].flops == 2 * 7
    # Window dilation 2: taps at 0, 2, 4 over input 6, VALID -> 2 outputs x 3 taps.
    assert valid_positions(6, 2, 3, 1, 0, 2, 1) == 6


def test_reduce_costs_the_reducer_per_eliminated_element():
    b = HloBuilder()
    add = b.adder()
    entry = b.computation("main")
    x = b.param("x", (F32, (10, 20)), 0)
    init = b.add("zero", "constant", (F32, ()))
    b.add("r", "reduce", (F32, (10,)), [x, init], [add], dimensions=[1])
    m = b.build(entry)
    c, _ = _cost(m, "r")
    assert c.flops == 200 - 10
    assert c.bytes == 800 + 4 + 40
    assert c.category == "reduce"


def test_reduce_window_and_cumsum_special_case():
    b = HloBuilder()
    add = b.adder()
    entry = b.computation("main")
    x = b.param("x", (F32, (8,)), 0)
    init = b.add("zero", "constant", (F32, ()))
    w = hlo_pb2.Window()
    w.dimensions.add(size=3, stride=1, window_dilation=1, base_dilation=1)
    b.add("rw", "reduce-window", (F32, (6,)), [x, init], [add], window=w)
    # cumsum over 8: window 15, pad 7/7 -> "reduce then broadcast": 8/8 + 8 - 1 = 8 reductions.
    w2 = hlo_pb2.Window()
    w2.dimensions.add(
        size=15, stride=1, padding_low=7, padding_high=7, window_dilation=1, base_dilation=1
    )
    b.add("cs", "reduce-window", (F32, (8,)), [x, init], [add], window=w2)
    m = b.build(entry)
    assert _cost(m, "rw")[0].flops == (3 - 1) * 6
    assert _cost(m, "cs")[0].flops == 8 // 8 + 8 - 1


def test_fusion_sums_inner_flops_and_counts_only_fusion_inputs_and_outputs():
    b = HloBuilder()
    fused = b.computation("fused", fusion=True)
    p0 = b.param("fp0", (F32, (100,)), 0)
    p1 = b.param("fp1", (F32, ()), 1)
    bc = b.add("bc", "broadcast", (F32, (100,)), [p1], dimensions=[])
    mul = b.add("mul", "multiply", (F32, (100,)), [p0, bc])
    b.add("e", "exponential", (F32, (100,)), [mul])
    entry = b.computation("main")
    x = b.param("x", (F32, (100,)), 0)
    s = b.param("s", (F32, ()), 1)
    b.add("fusion", "fusion", (F32, (100,)), [x, s], [fused], fusion_kind="kLoop")
    m = b.build(entry)
    c, _ = _cost(m, "fusion")
    assert (c.flops, c.transcendentals) == (100, 100)
    # Reads x (400 B) and the scalar through its broadcast user (4 B); writes 400 B.
    assert (c.read, c.written) == (404, 400)
    assert c.category == "loop fusion"


def test_fusion_parameter_read_rules():
    b = HloBuilder()
    fused = b.computation("fused", fusion=True)
    p0 = b.param("fp0", (F32, (100,)), 0)
    p1 = b.param("fp1", (F32, (10,)), 1)
    sl = b.add(
        "sl",
        "slice",
        (F32, (10,)),
        [p0],
        slice_dimensions=[hlo_pb2.HloInstructionProto.SliceDimensions(start=0, limit=10, stride=1)],
    )
    r1 = b.add("r1", "reshape", (F32, (2, 5)), [p1])
    r2 = b.add("r2", "reshape", (F32, (5, 2)), [p1])
    a = b.add("a", "add", (F32, (10,)), [sl, p1])
    root = b.add(
        "root",
        "tuple",
        HloBuilder.shape(
            0,
            tuple_shapes=[
                HloBuilder.shape(F32, (10,)),
                HloBuilder.shape(F32, (2, 5)),
                HloBuilder.shape(F32, (5, 2)),
            ],
        ),
        [a, r1, r2],
    )
    entry = b.computation("main")
    x = b.param("x", (F32, (100,)), 0)
    y = b.param("y", (F32, (10,)), 1)
    b.add("fusion", "fusion", root.shape, [x, y], [fused], fusion_kind="kLoop")
    m = b.build(entry)
    c, _ = _cost(m, "fusion")
    # x is read only through its 10-element slice: 40 B. y: two reshape users count 40 B each,
    # and the add shares one more read: 120 B. Outputs: 3 arrays of 10 f32.
    assert c.read == 40 + 120
    assert c.written == 3 * 40
    assert c.flops == 10


def test_fusion_with_dynamic_update_slice_root_writes_only_the_update():
    b = HloBuilder()
    fused = b.computation("fused", fusion=True)
    buf = b.param("buf", (F32, (1000,)), 0)
    upd = b.param("upd", (F32, (10,)), 1)
    idx = b.param("idx", (S32, ()), 2)
    b.add("dus", "dynamic-update-slice", (F32, (1000,)), [buf, upd, idx])
    entry = b.computation("main")
    x = b.param("x", (F32, (1000,)), 0)
    u = b.param("u", (F32, (10,)), 1)
    i = b.param("i", (S32, ()), 2)
    b.add("fusion", "fusion", (F32, (1000,)), [x, u, i], [fused], fusion_kind="kLoop")
    m = b.build(entry)
    c, _ = _cost(m, "fusion")
    # buf is aliased (operand 0 of the DUS): not read. upd and idx read once each.
    assert (c.read, c.written) == (40 + 4, 40)


def test_fusion_constants_count_above_the_immediate_limit():
    b = HloBuilder()
    fused = b.computation("fused", fusion=True)
    p = b.param("p", (F32, (4,)), 0)
    k = b.add("k", "constant", (F32, (4,)))
    b.add("a", "add", (F32, (4,)), [p, k])
    entry = b.computation("main")
    x = b.param("x", (F32, (4,)), 0)
    b.add("fusion", "fusion", (F32, (4,)), [x], [fused], fusion_kind="kLoop")
    m = b.build(entry)
    assert _cost(m, "fusion")[0].read == 16 + 16  # CPU: constants over 1 element
    assert _cost(m, "fusion", gpu=True)[0].read == 16  # GPU: over 8 elements only


def _while_module(trip=5):
    b = HloBuilder()
    state = (S32, ())
    body = b.computation("body")
    p = b.param("bp", state, 0)
    one = b.add("one", "constant", state)
    b.add("inc", "add", state, [p, one])
    cond = b.computation("cond")
    cp = b.param("cp", state, 0)
    lim = b.add("lim", "constant", state)
    b.add("lt", "compare", (PRED, ()), [cp, lim], comparison_direction="LT")
    entry = b.computation("main")
    x = b.param("x", state, 0)
    cfg = json.dumps({"known_trip_count": {"n": str(trip)}}).encode() if trip else b""
    b.add("w", "while", state, [x], [body, cond], backend_config=cfg)
    return b.build(entry)


def test_while_multiplies_body_and_condition_by_the_trip_count():
    m = _while_module(5)
    c, _ = _cost(m, "w")
    # body: add (1 flop, 4+4+4 bytes); condition: compare (1 flop, 4+4+1 bytes).
    assert c.flops == 5 * 2
    assert c.bytes == 5 * (12 + 9)
    assert c.category == "while"
    xla, _ = _cost(m, "w", xla_compatible=True)
    assert xla.flops == 2 and xla.bytes == 21


def test_while_without_trip_count_is_one_iteration():
    assert _cost(_while_module(None), "w")[0].flops == 2


def test_call_and_conditional():
    b = HloBuilder()
    cheap = b.computation("cheap")
    p = b.param("cp", (F32, (10,)), 0)
    b.add("neg", "negate", (F32, (10,)), [p])
    dear = b.computation("dear")
    q = b.param("dp", (F32, (10,)), 0)
    e = b.add("ex", "exponential", (F32, (10,)), [q])
    b.add("mul", "multiply", (F32, (10,)), [e, e])
    entry = b.computation("main")
    pred = b.param("pred", (PRED, ()), 0)
    x = b.param("x", (F32, (10,)), 1)
    b.add("cond", "conditional", (F32, (10,)), [pred, x, x], [cheap, dear])
    b.add("call", "call", (F32, (10,)), [x], [dear])
    m = b.build(entry)
    cond, _ = _cost(m, "cond")
    assert (cond.flops, cond.transcendentals) == (10, 10)  # max over branches per key
    call, _ = _cost(m, "call")
    assert (call.flops, call.transcendentals, call.bytes) == (10, 10, 80 + 120)


def test_gemm_custom_call_costs_as_a_dot():
    cfg = {
        "operation_queue_id": "0",
        "gemm_backend_config": {
            "alpha_real": 1,
            "beta": 0,
            "dot_dimension_numbers": {
                "lhs_contracting_dimensions": ["1"],
                "rhs_contracting_dimensions": ["0"],
                "lhs_batch_dimensions": [],
                "rhs_batch_dimensions": [],
            },
            "precision_config": {
                "operand_precision": ["DEFAULT", "DEFAULT"],
                "algorithm": "ALG_UNSET",
            },
            "epilogue": "DEFAULT",
        },
    }
    out = HloBuilder.shape(
        0, tuple_shapes=[HloBuilder.shape(BF16, (64, 32)), HloBuilder.shape(S8, (4096,))]
    )
    for target in ("__cublas$lt$matmul", "__cublas$gemm", "__cublas$lt$matmul$f8"):
        m = _single(
            "custom-call",
            out,
            [(BF16, (64, 128)), (BF16, (128, 32))],
            custom_call_target=target,
            backend_config=json.dumps(cfg).encode(),
        )
        c, model = _cost(m, "op")
        assert c.flops == 2 * 64 * 32 * 128
        assert c.read == 2 * (64 * 128 + 128 * 32) and c.written == 2 * 64 * 32  # no workspace
        assert c.precision == "bf16" and c.category == "dot"
        assert not model.unknown
        xla, _ = _cost(m, "op", xla_compatible=True)
        assert xla.flops == -1  # what jax's cost_analysis reports for custom calls


def test_cudnn_convolution_custom_call_costs_as_a_convolution():
    dn = hlo_pb2.ConvolutionDimensionNumbers(
        input_batch_dimension=0,
        input_feature_dimension=2,
        input_spatial_dimensions=[1],
        kernel_input_feature_dimension=1,
        kernel_output_feature_dimension=2,
        kernel_spatial_dimensions=[0],
        output_batch_dimension=0,
        output_feature_dimension=2,
        output_spatial_dimensions=[1],
    )
    w = hlo_pb2.Window()
    w.dimensions.add(
        size=3, stride=1, padding_low=1, padding_high=1, window_dilation=1, base_dilation=1
    )
    out = HloBuilder.shape(
        0, tuple_shapes=[HloBuilder.shape(F32, (1, 5, 1)), HloBuilder.shape(U8, (0,))]
    )
    m = _single(
        "custom-call",
        out,
        [(F32, (1, 5, 1)), (F32, (3, 1, 1))],
        custom_call_target="__cudnn$convForward",
        convolution_dimension_numbers=dn,
        window=w,
    )
    c, _ = _cost(m, "op")
    assert c.flops == 2 * 13 and c.category == "convolution"


def test_other_custom_calls_use_the_cost_estimate_or_are_reported():
    m = _single(
        "custom-call",
        (F32, (10,)),
        [(F32, (10,))],
        custom_call_target="my_kernel",
        backend_config=b'{"cost_estimate_json":"{\\"flops\\":1234,\\"bytes_accessed\\":99}"}',
    )
    c, model = _cost(m, "op")
    assert (c.flops, c.bytes) == (1234, 99) and not model.unknown
    m = _single("custom-call", (F32, (10,)), [(F32, (10,))], custom_call_target="mystery")
    c, model = _cost(m, "op")
    assert c.flops == 0 and c.bytes == 80
    assert model.unknown == {"custom-call mystery": 1}


def test_unknown_opcode_is_zero_flops_and_reported():
    m = _single("brand-new-op", (F32, (10,)), [(F32, (10,))])
    c, model = _cost(m, "op")
    assert c.flops == 0 and c.bytes == 80
    assert model.unknown == {"brand-new-op": 1}
    assert module_costs(m).unknown == {"brand-new-op": 1}


def test_collectives():
    m = _single("all-reduce", (F32, (8, 4)), [(F32, (8, 4))])
    c, _ = _cost(m, "op")
    assert c.flops == 32 and c.bytes == 256
    m = _single("all-gather", (F32, (32, 4)), [(F32, (8, 4))])
    c, model = _cost(m, "op")
    assert c.flops == 0 and c.bytes == 512 + 128 and not model.unknown


def test_data_movement_bytes():
    sd = hlo_pb2.HloInstructionProto.SliceDimensions
    m = _single(
        "slice", (F32, (10,)), [(F32, (100,))], slice_dimensions=[sd(start=0, limit=10, stride=1)]
    )
    assert _cost(m, "op")[0].bytes == 2 * 40
    m = _single("dynamic-slice", (F32, (10,)), [(F32, (100,)), (S32, ())], dynamic_slice_sizes=[10])
    assert _cost(m, "op")[0].bytes == 2 * 40 + 4
    m = _single("dynamic-update-slice", (F32, (100,)), [(F32, (100,)), (F32, (10,)), (S32, ())])
    assert _cost(m, "op")[0].bytes == 2 * 40 + 4
    m = _single("gather", (F32, (5, 8)), [(F32, (100, 8)), (S32, (5, 1))])
    assert _cost(m, "op")[0].bytes == 2 * 160 + 20
    m = _single("copy", (F32, (10,)), [(F32, (10,))])
    c, _ = _cost(m, "op")
    assert c.bytes == 80 and c.category == "data formatting"
    m = _single("broadcast", (F32, (10, 10)), [(F32, (10,))], dimensions=[0])
    assert _cost(m, "op")[0].bytes == 400 + 40


def test_scatter_costs_updates_three_times_and_the_combiner():
    b = HloBuilder()
    add = b.adder()
    entry = b.computation("main")
    a = b.param("a", (F32, (100, 8)), 0)
    i = b.param("i", (S32, (5, 1)), 1)
    u = b.param("u", (F32, (5, 8)), 2)
    b.add("s", "scatter", (F32, (100, 8)), [a, i, u], [add])
    c, _ = _cost(b.build(entry), "s")
    assert c.flops == 40
    assert c.bytes == 3 * 160 + 20


def test_transpose_that_is_a_bitcast_is_free():
    b = HloBuilder()
    entry = b.computation("main")
    x = b.param("x", (F32, (4, 8)), 0)
    same = HloBuilder.shape(F32, (8, 4), layout=False)
    same.layout.minor_to_major.extend([0, 1])  # output dim 0 (= input dim 1) is minor: same bytes
    b.add("tb", "transpose", same, [x], dimensions=[1, 0])
    b.add("tc", "transpose", (F32, (8, 4)), [x], dimensions=[1, 0])
    m = b.build(entry)
    assert _cost(m, "tb")[0].bytes == 0
    assert _cost(m, "tc")[0].bytes == 256


def test_free_ops_shapes_without_layout_and_tuples():
    b = HloBuilder()
    entry = b.computation("main")
    x = b.param("x", (F32, (10,)), 0)
    nolayout = b.add("n", "negate", (F32, (10,), False), [x])
    t = b.add(
        "t",
        "tuple",
        HloBuilder.shape(
            0, tuple_shapes=[HloBuilder.shape(F32, (10,)), HloBuilder.shape(F32, (10,))]
        ),
        [x, nolayout],
    )
    b.add("g", "get-tuple-element", (F32, (10,)), [t], tuple_index=0)
    m = b.build(entry)
    assert _cost(m, "x")[0].bytes == 0
    assert _cost(m, "g")[0].bytes == 0
    assert _cost(m, "n")[0].bytes == 40  # its own output has no layout: 0 B (XLA's rule)
    assert _cost(m, "t")[0].bytes == 16  # a pointer table of 2


def test_sort_and_sub_byte_sizes():
    m = _single("sort", (F32, (1000,)), [(F32, (1000,))])
    assert _cost(m, "op")[0].flops == 1000 * 10
    from tb_roofline.costs.hlo.shapes import Shape, byte_size

    assert byte_size(Shape(21, (9,))) == 9  # s4 takes a byte per element...
    assert byte_size(Shape(21, (9,), bits=4)) == 5  # ...unless packed: ceil(9·4/8)


def test_costs_are_cached_per_program():
    module, _, _ = _profiled_program(os.path.join(REPO, "testdata", "jax_cpu", "mlp"))
    first = module_costs(module)
    assert module_costs(module) is first
    # The same program decoded again (another reader, another request) hits the digest cache.
    again = parse_module(module.proto.SerializeToString(), module.program_id)
    assert again.digest != "" and module_costs(again).totals is not None
