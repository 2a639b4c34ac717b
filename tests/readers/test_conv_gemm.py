"""The tiling rule judges a convolution by the implicit GEMM its kernels run (M = batch × output
positions, N = output channels, K = input channels per group × filter positions), not by its
input's spatial size: the reader's GEMM dims for every captured convolution equal the ones
worked out here from the trace's raw `Input Dims` and `Concrete Inputs` with PyTorch's
output-size formula (nothing of the product's cost code is imported)."""

from __future__ import annotations

import ast
import glob
import gzip
import json
import math
import os

import pytest
from testpaths import TESTS

from tb_roofline.readers import read_profile_file

CAPTURED = os.path.join(TESTS, "..", "testdata", "kineto_captured")
# Argument positions of stride, padding, dilation, transposed, output padding, groups per op
# (PyTorch's native_functions.yaml); None: the op's fixed value.
POSITIONS = {
    "aten::conv1d": (3, 4, 5, None, None, 6),
    "aten::conv2d": (3, 4, 5, None, None, 6),
    "aten::conv3d": (3, 4, 5, None, None, 6),
    "aten::convolution": (3, 4, 5, 6, 7, 8),
    "aten::conv_transpose1d": (3, 4, 7, None, 5, 6),
    "aten::conv_transpose2d": (3, 4, 7, None, 5, 6),
}


def _value(concrete, i):
    return ast.literal_eval(concrete[i]) if i is not None and concrete[i] != "" else None


def _by_hand(name, args):
    """(M, N, K) of one recorded convolution call, or None when its padding is not recorded."""
    x, w = args["Input Dims"][0], args["Input Dims"][1]
    c = args["Concrete Inputs"]
    s_i, p_i, d_i, t_i, op_i, g_i = POSITIONS[name]
    stride, pad, dil = _value(c, s_i), _value(c, p_i), _value(c, d_i)
    if pad is None:
        return None
    transposed = name.startswith("aten::conv_transpose") or bool(_value(c, t_i))
    out_pad = _value(c, op_i) or [0]
    groups = _value(c, g_i) or 1
    n = len(x) - 2

    def at(v, j):
        return v[j] if len(v) > 1 else v[0]

    out = []
    for j in range(n):
        i, k = x[2 + j], w[2 + j]
        if transposed:
            out.append((i - 1) * at(stride, j) - 2 * at(pad, j) + at(dil, j) * (k - 1) + 1)
            out[-1] += at(out_pad, j)
        else:
            out.append((i + 2 * at(pad, j) - at(dil, j) * (k - 1) - 1) // at(stride, j) + 1)
    if transposed:
        return x[0] * math.prod(out), w[1] * groups, w[0] // groups * math.prod(w[2:])
    return x[0] * math.prod(out), w[0], w[1] * math.prod(w[2:])


def _outermost_conv(path):
    """The first convolution call with a tiling fact: the outermost named conv op whose
    padding the trace recorded as numbers."""
    with gzip.open(path, "rt") as f:
        events = [e for e in json.load(f)["traceEvents"] if e.get("cat") == "cpu_op"]
    for e in sorted(events, key=lambda e: (e["ts"], -e["dur"])):
        if e["name"] in POSITIONS:
            mnk = _by_hand(e["name"], e["args"])
            if mnk is not None:
                return e["name"], mnk
    return None


CASES = sorted(
    p
    for p in glob.glob(os.path.join(CAPTURED, "conv*.pt.trace.json.gz"))
    if "backward" not in os.path.basename(p)
)


@pytest.mark.parametrize("path", CASES, ids=lambda p: os.path.basename(p).split(".")[0])
def test_convolution_gemm_is_the_implicit_gemm(path):
    name, mnk = _outermost_conv(path)
    shapes = read_profile_file(path, "kineto", "h").op_shapes
    uses = shapes[("", name, next(k[2] for k in shapes if k[1] == name))]
    assert [(u.kind, u.dims) for u in uses] == [("gemm", mnk)]
    assert uses[0].text.startswith(f"M={mnk[0]} N={mnk[1]} K={mnk[2]} (")


def test_vit_patch_embedding_is_not_billed_at_the_image_size():
    """A ViT patch embedding (16×16 filter, stride 16): the GEMM is 128·14·14 × 768 × 768, all
    multiples of 8, where the input's spatial size (128·224·224 × 768 × 3) would misalign K."""
    from tb_roofline.readers.shape_facts import torch_shape

    dims = [[128, 3, 224, 224], [768, 3, 16, 16], [768], [], [], [], []]
    types = ["c10::BFloat16"] * 3 + ["ScalarList", "ScalarList", "ScalarList", "Int"]
    concrete = ["", "", "", "[16, 16]", "[0, 0]", "[1, 1]", "1"]
    kind, mnk, _ = torch_shape("aten::conv2d", dims, types, concrete)
    assert (kind, mnk) == ("gemm", (128 * 14 * 14, 768, 3 * 16 * 16))
    # Without the stride and padding the output size is unknown: no tiling verdict.
    assert torch_shape("aten::conv2d", dims, types, None) is None


def test_xla_convolution_k_counts_the_filter_taps():
    """XLA GPU (MI300X, `cudnn-conv` custom call, weight [C_out, C_in, 1, 2, 2]): K = C_in × the
    filter's taps = 16 × 1 × 2 × 2, not C_in alone; M = the output's positions."""
    root = os.path.join(CAPTURED, "..", "xla_gpu_mi300_conv")
    (path,) = glob.glob(os.path.join(root, "**", "*.xplane.pb"), recursive=True)
    shapes = read_profile_file(path, "xplane", "h").op_shapes
    ((_, uses),) = [(k, u) for k, u in shapes.items() if k[1] == "cudnn-conv.1"]
    (u,) = [u for u in uses if u.kind == "gemm"]
    weight = [int(d) for d in u.text.split(" * bf16[")[1].split("]")[0].split(",")]
    assert weight == [5120, 16, 1, 2, 2]
    assert u.dims[1:] == (5120, 16 * 1 * 2 * 2)
