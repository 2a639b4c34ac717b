"""The deployment in deploy/: the Kubernetes manifests parse (PyYAML), every container runs
the image deploy/Dockerfile builds (its tag carries this tb-roofline's version), and the
pieces name each other: the workers and TensorBoard reach the scheduler's Service at its
port, run as the ServiceAccount that carries the bucket-access annotations, and read the
Secret access.yaml defines."""

from __future__ import annotations

import glob
import os
import re

import pytest
from testpaths import TESTS

import tb_roofline
from tb_roofline.execute.cluster_connect import full_address

yaml = pytest.importorskip("yaml")

REPO = os.path.dirname(TESTS)
DEPLOY = os.path.join(REPO, "deploy")


def _dockerfile() -> str:
    with open(os.path.join(DEPLOY, "Dockerfile"), encoding="utf-8") as f:
        return f.read()


def _docs() -> list:
    docs = []
    for path in sorted(glob.glob(os.path.join(DEPLOY, "k8s", "*.yaml"))):
        with open(path, encoding="utf-8") as f:
            docs += [d for d in yaml.safe_load_all(f) if d]
    return docs


def _by(docs, kind) -> dict:
    return {d["metadata"]["name"]: d for d in docs if d["kind"] == kind}


def _containers(docs) -> list:
    return [
        c
        for d in _by(docs, "Deployment").values()
        for c in d["spec"]["template"]["spec"]["containers"]
    ]


def test_the_dockerfile_builds_the_image_the_manifests_run():
    text = _dockerfile()
    (base,) = re.findall(r"^ARG DASK_IMAGE=(\S+)", text, re.M)
    assert base.startswith("ghcr.io/dask/dask:")  # the official Dask image
    assert re.search(r"^FROM \$\{DASK_IMAGE\}", text, re.M)
    (tag,) = re.findall(r'org\.opencontainers\.image\.ref\.name="([^"]+)"', text)
    assert tag == f"tb-roofline:{tb_roofline.__version__}"
    assert f"docker build -f deploy/Dockerfile -t {tag} ." in text
    run = text.replace("\\\n", " ")  # continuation lines joined, as the shell reads them
    assert re.search(r'pip install [^\n]*"/opt/tb-roofline\[dask,s3,gcs\]"', run)
    images = {c["image"] for c in _containers(_docs())}
    assert images == {tag}


def test_the_manifests_parse_and_name_each_other():
    docs = _docs()
    assert {d["kind"] for d in docs} >= {
        "Namespace",
        "ServiceAccount",
        "Secret",
        "Deployment",
        "Service",
    }
    (ns,) = _by(docs, "Namespace")
    assert all(d["metadata"].get("namespace") == ns for d in docs if d["kind"] != "Namespace")
    deployments, services = _by(docs, "Deployment"), _by(docs, "Service")
    assert set(deployments) == {
        "tb-roofline-scheduler",
        "tb-roofline-workers",
        "tb-roofline-tensorboard",
    }
    for name, d in deployments.items():  # each Deployment's selector picks its own pods
        labels = d["spec"]["template"]["metadata"]["labels"]
        assert d["spec"]["selector"]["matchLabels"].items() <= labels.items(), name
    scheduler = services["tb-roofline-scheduler"]
    port = next(p["port"] for p in scheduler["spec"]["ports"] if p["name"] == "comm")
    sched_pod = deployments["tb-roofline-scheduler"]["spec"]["template"]
    assert scheduler["spec"]["selector"].items() <= sched_pod["metadata"]["labels"].items()
    want = f"tcp://tb-roofline-scheduler:{port}"
    (worker,) = deployments["tb-roofline-workers"]["spec"]["template"]["spec"]["containers"]
    assert worker["args"][:3] == ["dask", "worker", want]
    assert worker["args"][worker["args"].index("--nthreads") + 1] == "1"
    tb_spec = deployments["tb-roofline-tensorboard"]["spec"]["template"]["spec"]
    env = {e["name"]: e.get("value") for e in tb_spec["containers"][0]["env"]}
    assert env["TB_ROOFLINE_SCHEDULER"] == want == full_address(want)
    # bucket access: the readers run as the annotated ServiceAccount, with the Secret's env
    (account,) = _by(docs, "ServiceAccount").values()
    notes = account["metadata"]["annotations"]
    assert "eks.amazonaws.com/role-arn" in notes and "iam.gke.io/gcp-service-account" in notes
    (secret,) = _by(docs, "Secret")
    for name in ("tb-roofline-workers", "tb-roofline-tensorboard"):
        spec = deployments[name]["spec"]["template"]["spec"]
        assert spec["serviceAccountName"] == account["metadata"]["name"]
        refs = [e["secretRef"] for e in spec["containers"][0]["envFrom"]]
        assert refs == [{"name": secret, "optional": True}]


def _constraints() -> dict:
    with open(os.path.join(DEPLOY, "constraints.txt"), encoding="utf-8") as f:
        lines = [ln.strip() for ln in f if ln.strip() and not ln.startswith("#")]
    return dict(ln.lower().split("==") for ln in lines)


def test_the_image_installs_exact_versions():
    run = _dockerfile().replace("\\\n", " ")
    (line,) = [ln for ln in run.splitlines() if "pip install" in ln]
    assert "-c /opt/tb-roofline/deploy/constraints.txt" in line
    pins = _constraints()
    assert all(re.fullmatch(r"[0-9][0-9A-Za-z.+]*", v) for v in pins.values()), pins
    # what the pip line adds to the base image: the runtime dependencies, the s3 and gcs
    # extras and lz4 (distributed comes pinned with the Dask image)
    wanted = {"tensorboard", "werkzeug", "numpy", "protobuf", "s3fs", "gcsfs", "lz4"}
    assert wanted <= set(pins), wanted - set(pins)
    assert pins["fsspec"] == pins["s3fs"]  # s3fs asks for its own fsspec release


def _memory(text: str) -> float:
    units = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30}
    number, unit = re.fullmatch(r"([0-9.]+)([A-Za-z]*)", text).groups()
    return float(number) * units[unit]


def test_every_pod_runs_unprivileged_on_a_read_only_root():
    for d in _by(_docs(), "Deployment").values():
        spec = d["spec"]["template"]["spec"]
        pod = spec["securityContext"]
        assert pod["runAsNonRoot"] is True and pod["runAsUser"] != 0, d["metadata"]["name"]
        mounts_from = {v["name"] for v in spec.get("volumes", []) if "emptyDir" in v}
        for c in spec["containers"]:
            sc = c["securityContext"]
            assert sc["allowPrivilegeEscalation"] is False, c["name"]
            assert sc["readOnlyRootFilesystem"] is True, c["name"]
            assert sc.get("privileged", False) is False and sc["capabilities"]["drop"] == ["ALL"]
            # the one writable place is a scratch volume at /tmp, where HOME points
            tmp = [m for m in c["volumeMounts"] if m["mountPath"] == "/tmp"]
            assert tmp and tmp[0]["name"] in mounts_from, c["name"]
            assert {e["name"]: e.get("value") for e in c["env"]}["HOME"] == "/tmp"


def test_a_worker_is_restarted_by_dask_before_the_kernel_kills_it():
    deployments = _by(_docs(), "Deployment")
    (worker,) = deployments["tb-roofline-workers"]["spec"]["template"]["spec"]["containers"]
    dask_limit = _memory(worker["args"][worker["args"].index("--memory-limit") + 1])
    container_limit = _memory(worker["resources"]["limits"]["memory"])
    assert dask_limit <= 0.8 * container_limit, (dask_limit, container_limit)


def test_only_the_workers_and_tensorboard_reach_the_scheduler():
    docs = _docs()
    (policy,) = _by(docs, "NetworkPolicy").values()
    sched = _by(docs, "Deployment")["tb-roofline-scheduler"]["spec"]["template"]["metadata"]
    assert policy["spec"]["podSelector"]["matchLabels"].items() <= sched["labels"].items()
    assert policy["spec"]["policyTypes"] == ["Ingress"]
    (rule,) = policy["spec"]["ingress"]
    allowed = [p["podSelector"]["matchLabels"]["component"] for p in rule["from"]]
    assert sorted(allowed) == ["tensorboard", "worker"]
    assert all(set(p) == {"podSelector"} for p in rule["from"])  # no namespace or IP blocks
    service = _by(docs, "Service")["tb-roofline-scheduler"]
    comm = next(p["port"] for p in service["spec"]["ports"] if p["name"] == "comm")
    assert rule["ports"] == [{"protocol": "TCP", "port": comm}]
