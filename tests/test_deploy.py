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

import tb_roofline
from tb_roofline.execute.cluster_connect import full_address

yaml = pytest.importorskip("yaml")

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
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
    assert re.search(r'pip install [^\n]*"/opt/tb-roofline\[dask,s3,gcs\]"', text)
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
