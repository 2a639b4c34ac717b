"""Run comparison on real captured pairs (testdata/compare): which ops pair and by which rule,
the deltas against each run's own /ops and /program numbers, nothing dropped, a run against
itself, and a slowed copy of a real run tripping the CI gate."""

from __future__ import annotations

import glob
import io
import json
import os
import shutil

import pytest
from testpaths import TESTS

from tb_roofline.costs.hlo.fingerprint import text_fingerprint
from tb_roofline.protos import xplane_pb2
from tb_roofline.serve.cli.main import main
from tb_roofline.serve.service.core import RooflineService

REPO = os.path.dirname(TESTS)
DATA = os.path.join(REPO, "testdata", "compare")
REL = 1e-5  # /compare rounds numbers to 6 significant digits


@pytest.fixture(scope="module")
def service():
    return RooflineService(DATA)


@pytest.fixture(scope="module")
def runs(service):
    """Case name (`mlp_b64`, `convnet_b8`, ...) -> run name."""
    return {r["run"].split("/")[1]: r["run"] for r in service.list_runs()["runs"]}


def pairs(answer, table=None) -> list[dict]:
    t = table or answer
    return [dict(zip(t["columns"], row)) for row in zip(*t["values"])]


def records(answer) -> dict:
    """/ops or /program rows by operation (or step)."""
    out = {}
    for row in answer["rows"]:
        r = dict(zip(answer["columns"], row))
        out[r["operation"] if r["record_type"] == "op" else r["step"]] = r
    return out


def close(a, b, rel=REL, abs_=1e-9):
    return a == pytest.approx(b, rel=rel, abs=abs_)


# --- fingerprints ---------------------------------------------------------------------------


def test_text_fingerprint_ignores_names_layouts_and_metadata():
    a = (
        "%fusion.12 = f32[128,1024]{1,0:T(8,128)} fusion(f32[128,1024]{1,0} %param.1, "
        "bf16[1024]{0} %copy.3), kind=kLoop, calls=%fused_computation.12, "
        'metadata={op_name="jit(f)/add" source_file="a.py" source_line=3}'
    )
    renamed = (
        a.replace("fusion.12", "fusion.14")
        .replace("param.1", "p.7")
        .replace("{1,0:T(8,128)}", "{0,1}")
        .replace("source_line=3", "source_line=9")
    )
    assert text_fingerprint(a) == text_fingerprint(renamed)
    assert text_fingerprint(a).startswith("hlo:")
    assert text_fingerprint(a) != text_fingerprint(a.replace("f32[128,1024]", "f32[256,1024]"))
    assert text_fingerprint(a) != text_fingerprint(a.replace("kind=kLoop", "kind=kOutput"))
    assert text_fingerprint("fusion.12") == ""  # a bare name is no instruction


# --- matching on real pairs -----------------------------------------------------------------


def test_renamed_fusions_pair_by_fingerprint(service, runs):
    """XLA named the two branches' fusions the other way round: the same work pairs across
    the swapped names (its FLOPs per execution prove it), the rest by name."""
    a = service.compare(runs["branches"], runs["branches_swapped"])
    ps = pairs(a)
    assert all(p["status"] == "matched" for p in ps) and len(ps) == a["unfiltered_count"] == 4
    by_rule = {p["base_operation"]: (p["match_rule"], p["cand_operation"]) for p in ps}
    assert by_rule["ynn_fusion"] == ("fingerprint", "ynn_fusion.1")
    assert by_rule["ynn_fusion.1"] == ("fingerprint", "ynn_fusion")
    assert by_rule["ynn_fusion.2"] == ("name", "ynn_fusion.2")
    base_ops, cand_ops = (
        records(service.ops(r, "")) for r in (runs["branches"], runs["branches_swapped"])
    )
    for p in ps:
        flops_b = (
            base_ops[p["base_operation"]]["flops"] / base_ops[p["base_operation"]]["occurrences"]
        )
        flops_c = (
            cand_ops[p["cand_operation"]]["flops"] / cand_ops[p["cand_operation"]]["occurrences"]
        )
        assert close(flops_b, flops_c)
    # Pairing by name alone would have paired different work.
    assert base_ops["ynn_fusion"]["flops"] != cand_ops["ynn_fusion"]["flops"]
    assert a["summary"]["rules"] == {"fingerprint": 2, "name": 2}


def test_batch_sizes_pair_every_op_and_scale_the_work(service, runs):
    """MLP at batch 64 vs 128: every op pairs; ops whose shapes do not involve the batch (the
    weight updates) by name and fingerprint, the others by name with twice the FLOPs."""
    a = service.compare(runs["mlp_b64"], runs["mlp_b128"])
    ps = pairs(a)
    assert a["summary"]["new"] == a["summary"]["removed"] == 0
    assert len(ps) == len(service.ops(runs["mlp_b64"], "")["rows"])
    scaled = 0
    for p in ps:
        assert p["base_operation"] == p["cand_operation"]
        ratio = (
            (p["cand_flops"] / p["cand_occurrences"]) / (p["base_flops"] / p["base_occurrences"])
            if p["base_flops"]
            else None
        )
        if p["match_rule"] == "name":
            assert p["base_fingerprint"] == p["cand_fingerprint"]
            assert ratio is None or close(ratio, 1.0)
        else:
            assert p["match_rule"] == "name_only"
            assert p["base_fingerprint"] != p["cand_fingerprint"]
            if ratio is not None:  # more work: most ops twice as much (all of it per sample)
                assert ratio > 1.2, (p["base_operation"], ratio)
                scaled += 1.9 < ratio < 2.1
    assert scaled >= 15 and {p["match_rule"] for p in ps} == {"name", "name_only"}


def test_pytorch_batch_sizes_pair_each_call_with_its_own_shapes(service, runs):
    """Several calls of one aten op: each pairs with the call of the same layer (every batch
    dimension 8 became 16, every other dimension is the same)."""
    a = service.compare(runs["convnet_b8"], runs["convnet_b16"])
    ps = pairs(a)
    assert a["summary"]["new"] == a["summary"]["removed"] == 0
    reshaped = [p for p in ps if p["match_rule"] == "name_only"]
    assert len(reshaped) >= 20
    for p in reshaped:
        b = json.loads(p["base_fingerprint"][len("shapes:") :])
        c = json.loads(p["cand_fingerprint"][len("shapes:") :])
        assert len(b) == len(c)
        for x, y in zip(b, c):
            assert len(x) == len(y) and all(u == v or (u, v) == (8, 16) for u, v in zip(x, y)), p
    convs = [p for p in reshaped if p["base_operation"] == "aten::conv2d"]
    assert len(convs) == 2  # the two layers, each with its own pair


def test_channels_last_pairs_by_shapes_and_lists_new_and_removed_ops(service, runs):
    """channels_last keeps the logical shapes: the convolutions pair by name and shapes; the
    layout copies it adds are new, the view it replaces removed; times add up."""
    base, cand = runs["convnet_b8"], runs["convnet_b8_channels_last"]
    a = service.compare(base, cand)
    ps = pairs(a)
    s = a["summary"]
    assert s["rules"] == {"name": s["matched"]}
    assert any(p["status"] == "new" and p["cand_operation"] == "aten::clone" for p in ps)
    assert any(p["status"] == "removed" and p["base_operation"] == "ViewBackward0" for p in ps)
    conv = [p for p in ps if p["base_operation"] == "aten::conv2d"]
    assert len(conv) == 2 and all(p["base_fingerprint"] == p["cand_fingerprint"] for p in conv)
    # Nothing dropped: every op call of each run is in one pair, per op name (the /ops record
    # merges the calls of every shape).
    for side, run, key in (("base", base, "base_operation"), ("cand", cand, "cand_operation")):
        answer = service.ops(run, "")
        per_name: dict = {}
        for row in answer["rows"]:  # one /ops record per (op, precision)
            r = dict(zip(answer["columns"], row))
            per_name[r["operation"]] = per_name.get(r["operation"], 0) + r["total_self_time_us"]
        for name, t in per_name.items():
            mine = [p for p in ps if p[key] == name]
            assert close(sum(p[f"{side}_total_self_time_us"] for p in mine), t, rel=1e-4), name
    assert s["matched"] + s["removed"] == len([p for p in ps if p["base_operation"]])
    assert close(s["op_time_change_us"], sum(p["delta_time_us"] for p in ps), rel=1e-4)


def test_unfused_run_nothing_dropped(service, runs):
    base, cand = runs["mlp_b64"], runs["mlp_b64_unfused"]
    a = service.compare(base, cand)
    ps = pairs(a)
    s = a["summary"]
    n_base, n_cand = (len(service.ops(r, "")["rows"]) for r in (base, cand))
    assert s["matched"] + s["removed"] == n_base and s["matched"] + s["new"] == n_cand
    assert s["new"] > 50 and s["removed"] > 0  # the unfused elementwise ops, the fusions
    dots = [p for p in ps if p["base_operation"] in ("dot", "dot.1", "dot.2")]
    assert len(dots) == 3 and all(p["match_rule"] == "name" for p in dots)
    new_time = sum(p["cand_total_self_time_us"] for p in ps if p["status"] == "new")
    assert close(s["new_time_us"], new_time, rel=1e-4)


# --- deltas against each run's own numbers ----------------------------------------------------


def test_deltas_against_each_runs_own_records(service, runs):
    base, cand = runs["mlp_b64"], runs["mlp_b128"]
    a = service.compare(base, cand)
    ob, oc = records(service.ops(base, "")), records(service.ops(cand, ""))
    assert a["base"]["device"]["peaks_known"]  # testdata/compare/jax_cpu/roofline_device.json
    checked = 0
    for p in pairs(a):
        b, c = ob[p["base_operation"]], oc[p["cand_operation"]]
        tb, tc = b["total_self_time_us"], c["total_self_time_us"]
        assert close(p["base_total_self_time_us"], tb) and close(p["cand_total_self_time_us"], tc)
        assert close(p["delta_time_us"], tc - tb, abs_=1e-3)
        assert close(p["delta_time_percent"], 100 * (tc - tb) / tb)
        assert close(p["speedup"], tb / tc)
        assert close(p["delta_flop_rate"], c["flop_rate"] - b["flop_rate"], abs_=1e-3)
        assert close(
            p["delta_operational_intensity"],
            c["operational_intensity"] - b["operational_intensity"],
            abs_=1e-4,
        )
        assert p["bound_by_changed"] == (b["bound_by"] != c["bound_by"])
        assert close(p["base_peak_flop_rate"], b["peak_flop_rate"])
        # each side is a measurement exactly when its own run's record is
        assert (p["base_measurement"], p["cand_measurement"]) == (
            b["measurement"],
            c["measurement"],
        )
        if not (b["measurement"] and c["measurement"]):
            assert p["delta_roofline_efficiency"] is None  # not a measurement under its roof
        else:
            assert close(
                p["delta_roofline_efficiency"],
                c["roofline_efficiency"] - b["roofline_efficiency"],
                abs_=1e-5,
            )
            checked += 1
        assert p["change"] == ("slower" if tc > tb else "faster" if tc < tb else "same")
    assert checked >= 10
    # The summary: the Total's time change, and the share the top ops explain.
    pb, pc = records(service.program(base, "", True)), records(service.program(cand, "", True))
    change = pc["Total"]["total_time_us"] - pb["Total"]["total_time_us"]
    s = a["summary"]
    assert close(s["time_change_us"], change, rel=1e-9)
    assert close(s["speedup"], pb["Total"]["total_time_us"] / pc["Total"]["total_time_us"], 1e-9)
    top = s["top_contributors"]
    assert len(top) == 10
    assert close(s["explained_share"], sum(t["delta_time_us"] for t in top) / change, 1e-4)
    deltas = [abs(p["delta_time_us"]) for p in pairs(a)]
    assert deltas == sorted(deltas, reverse=True)  # the largest change first
    program = pairs(a, a["program"])
    assert [(p["base_step"], p["cand_step"]) for p in program] == [
        ("Total", "Total"),
        ("Average", "Average"),
        ("0", "0"),
        ("1", "1"),
        ("2", "2"),
    ]


def test_steps_and_average_step(service, runs):
    """Two steps of one run, and the average step: per-step op times from the op table."""
    run = runs["mlp_b64"]
    a = service.compare(run, run, base_step="0", step="2")
    program = pairs(a, a["program"])
    assert len(program) == 1 and program[0]["match_rule"] == "scope"
    prog = records(service.program(run, "", True))
    assert close(
        a["summary"]["time_change_us"],
        prog["2"]["total_time_us"] - prog["0"]["total_time_us"],
        1e-9,
    )
    per_step = [pairs(service.compare(run, run, step=s)) for s in ("0", "1", "2")]
    avg = {p["cand_operation"]: p for p in pairs(service.compare(run, run, step="Average"))}
    for name, p in avg.items():
        total = sum(
            q["cand_total_self_time_us"]
            for ps in per_step
            for q in ps
            if q["cand_operation"] == name
        )
        assert close(p["cand_total_self_time_us"] * 3, total, rel=1e-4)
    with pytest.raises(Exception, match="unknown step '7'"):
        service.compare(run, run, step="7")


def test_run_against_itself_is_zero_change(service, runs, tmp_path):
    run = runs["convnet_b8"]
    a = service.compare(run, run)
    s = a["summary"]
    assert s["time_change_us"] == 0 and s["op_time_change_us"] == 0 and s["speedup"] == 1
    assert s["same"] == s["matched"] == a["unfiltered_count"] and s["new"] == s["removed"] == 0
    assert all(p["delta_time_us"] == 0 and p["change"] == "same" for p in pairs(a))
    out = io.StringIO()
    run_dir = os.path.join(DATA, "torch_cpu", "convnet_b8")
    assert (
        main(
            [
                "diff",
                run_dir,
                run_dir,
                "--fail-if-slower",
                "0",
                "--fail-if-op-slower",
                "0",
                "--format",
                "json",
            ],
            out=out,
        )
        == 0
    )
    doc = json.loads(out.getvalue())
    assert doc["gate"]["passed"] and doc["summary"]["time_change_us"] == 0


# --- a slowed run trips the gate --------------------------------------------------------------


def _slowed_copy(src_run_dir: str, dst_logdir, factor: int = 2):
    """A copy of a real JAX CPU profile (`base`) and the same profile with every event of the
    host threads `factor` times longer and that much further apart (`slow`): every op and step
    takes `factor` times as long, the work is the same."""
    src = glob.glob(os.path.join(src_run_dir, "plugins", "profile", "*", "*.xplane.pb"))[0]
    session = os.path.basename(os.path.dirname(src))
    for name, scale in (("base", 1), ("slow", factor)):
        space = xplane_pb2.XSpace.FromString(open(src, "rb").read())
        lines = [line for p in space.planes for line in p.lines]
        origin = min(line.timestamp_ns for line in lines) * 1000
        for line in lines:
            start = line.timestamp_ns * 1000
            for ev in line.events:
                at = start + ev.offset_ps
                ev.offset_ps = origin + (at - origin) * scale - start
                ev.duration_ps *= scale
        out = dst_logdir / name / "plugins" / "profile" / session / os.path.basename(src)
        out.parent.mkdir(parents=True)
        out.write_bytes(space.SerializeToString())
    shutil.copy(os.path.join(os.path.dirname(src_run_dir), "roofline_device.json"), dst_logdir)


def test_slowed_run_trips_the_gate(tmp_path):
    _slowed_copy(os.path.join(DATA, "jax_cpu", "mlp_b64"), tmp_path)
    a = RooflineService(str(tmp_path)).compare(
        *[f"{n}/{os.listdir(tmp_path / n / 'plugins' / 'profile')[0]}" for n in ("base", "slow")]
    )
    for p in pairs(a):
        assert p["match_rule"] == "name" and close(p["delta_time_percent"], 100.0)
        assert close(p["speedup"], 0.5)
        if p["base_flop_rate"]:
            assert close(p["cand_flop_rate"], p["base_flop_rate"] / 2)
    assert close(a["summary"]["time_change_percent"], 100.0, rel=1e-6)

    def diff(*extra):
        out = io.StringIO()
        code = main(["diff", str(tmp_path / "base"), str(tmp_path / "slow"), *extra], out=out)
        return code, out.getvalue()

    code, text = diff("--fail-if-slower", "10")
    assert code == 1 and "REGRESSION" in text and "over --fail-if-slower 10%" in text
    assert "time per step (Average)" in text
    code, text = diff("--fail-if-slower", "150", "--fail-if-op-slower", "150")
    assert code == 0 and "Gate: passed" in text
    code, text = diff("--fail-if-op-slower", "50", "--min-op-time-us", "100", "--format", "json")
    doc = json.loads(text)
    assert code == 1 and not doc["gate"]["passed"]
    regressions = doc["gate"]["op_regressions"]
    assert regressions and all(
        max(r["base_total_self_time_us"], r["cand_total_self_time_us"]) >= 100 for r in regressions
    )
    big = [
        p
        for p in doc["ops"]
        if max(p["base_total_self_time_us"], p["cand_total_self_time_us"]) >= 100
    ]
    assert len(regressions) == len(big)


# --- CLI arguments and errors ------------------------------------------------------------------


def test_cli_sides_and_formats(runs):
    logdir = os.path.join(DATA, "jax_cpu")
    out = io.StringIO()
    code = main(
        [
            "diff",
            logdir,
            "--base-run",
            runs["mlp_b64"].split("/", 1)[1],
            "--run",
            runs["mlp_b128"].split("/", 1)[1],
            "--format",
            "csv",
            "--top",
            "5",
            "--level",
            "op",
        ],
        out=out,
    )
    lines = out.getvalue().splitlines()
    assert code == 0 and lines[0].startswith("status,match_rule,change,program,delta_time_us")
    assert len(lines) == 6
    out = io.StringIO()
    code = main(
        [
            "diff",
            os.path.join(logdir, "branches"),
            os.path.join(logdir, "branches_swapped"),
            "--level",
            "program",
            "--format",
            "json",
        ],
        out=out,
    )
    doc = json.loads(out.getvalue())
    assert code == 0 and doc["schema"] == "tb-roofline.compare/1" and "ops" not in doc
    assert {"base", "cand", "summary", "notes", "gate", "program"} <= set(doc)
    assert doc["program"][0]["base_record_type"] == "total"


@pytest.mark.parametrize(
    "argv",
    [
        ["diff", "/nonexistent/dir"],
        ["diff", os.path.join(DATA, "jax_cpu"), "--base-run", "nope"],
        ["diff", os.path.join(DATA, "torch_cpu", "convnet_b8"), "--step", "99"],
        ["diff", os.path.join(DATA, "torch_cpu", "convnet_b8"), "--view", "kernel"],
        ["diff", os.path.join(DATA, "torch_cpu", "convnet_b8"), "--fail-if-slower", "-1"],
    ],
)
def test_cli_bad_input_exits_2(argv, capsys):
    assert main(argv, out=io.StringIO()) == 2
    assert "tb-roofline diff:" in capsys.readouterr().err


# --- other profiles: hosts, devices, kernels --------------------------------------------------


def test_two_hosts_of_one_run_and_two_devices():
    demo = RooflineService(os.path.join(REPO, "testdata", "demo"))
    run = "v4_pod/2026_11_29_11_30_00"
    a = demo.compare(run, run, base_host="tpu-v4-host0", host="tpu-v4-host1")
    assert a["summary"]["new"] == a["summary"]["removed"] == 0
    assert a["base"]["host"] == "tpu-v4-host0" and a["cand"]["host"] == "tpu-v4-host1"
    other = demo.compare("v6e_train/2026_11_29_10_00_00", run)
    assert any("different devices" in n for n in other["notes"])
    ops = records(demo.ops(run, ""))
    for p in pairs(other):
        if p["cand_operation"] in ops:
            assert close(p["cand_peak_flop_rate"], ops[p["cand_operation"]]["peak_flop_rate"])


def test_kernel_view_pairs_by_kernel_name_and_grid():
    kineto = RooflineService(os.path.join(REPO, "testdata", "kineto"))
    run = "a100_alexnet"
    a = kineto.compare(run, run, view="kernel")
    ps = pairs(a)
    assert a["view"] == "kernel" and all(p["match_rule"] == "name" for p in ps)
    # One pair per (kernel, launch grid): a kernel launched with two grids is two pairs whose
    # times add up to its /ops record.
    kernels = kineto.ops(run, "", view="kernel")
    assert len(ps) > len(kernels["rows"])
    grids = {p["base_fingerprint"] for p in ps}
    assert any((g or "").startswith("grid:[") for g in grids)
    for row in kernels["rows"]:
        r = dict(zip(kernels["columns"], row))
        mine = [
            p
            for p in ps
            if p["base_operation"] == r["operation"] and p["base_precision"] == r["precision"]
        ]
        assert close(
            sum(p["base_total_self_time_us"] for p in mine), r["total_self_time_us"], rel=1e-4
        )


# --- the HTTP route ---------------------------------------------------------------------------


def test_compare_route_answers_and_errors(runs):
    from tensorboard.plugins import base_plugin
    from werkzeug.test import Client
    from werkzeug.wrappers import Response

    from tb_roofline.serve.web.plugin import RooflinePlugin

    apps = RooflinePlugin(base_plugin.TBContext(logdir=DATA)).get_plugin_apps()

    def get(**params):
        r = Client(apps["/compare"], Response).get("/compare", query_string=params)
        return r.status_code, json.loads(r.data)

    base, cand = runs["mlp_b64"], runs["mlp_b128"]
    status, a = get(base=base, run=cand, name="DOT", limit=2)
    assert status == 200 and a["total_count"] == 3 and len(a["values"][0]) == 2
    assert all("dot" in p["cand_operation"] for p in pairs(a))
    # The change filter: each change alone, `matched` for the pairs both sides have.
    every = pairs(get(base=base, run=cand)[1])
    for change in ("faster", "slower", "same", "new", "removed", "matched"):
        status, a = get(base=base, run=cand, change=change, category="loop fusion")
        want = [
            p
            for p in every
            if (p["status"] if change == "matched" else p["change"]) == change
            and "loop fusion" in (p["base_category"], p["cand_category"])
        ]
        assert status == 200 and a["total_count"] == len(want), change
        assert pairs(a) == want
    assert {p["change"] for p in every} >= {"faster", "slower"}
    status, a = get(base=base, run=cand, level="program")
    assert status == 200 and a["level"] == "program" and len(a["values"][0]) == 5
    for params, code in (
        ({"run": cand}, 400),
        ({"base": "nope", "run": cand}, 404),
        ({"base": base, "run": cand, "step": "42"}, 404),
        ({"base": base, "run": cand, "level": "x"}, 400),
        ({"base": base, "run": cand, "view": "kernel"}, 400),
        ({"base": "../x", "run": cand}, 400),
        ({"base": base, "run": cand, "host": "nope"}, 404),
        ({"base": base, "run": cand, "change": "better"}, 400),
    ):
        status, body = get(**params)
        assert status == code and body["error"]["status"] == code and body["error"]["message"]
