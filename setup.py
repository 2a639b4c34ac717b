"""tb-roofline: a TensorBoard plugin for roofline analysis of ML profiles."""

from setuptools import find_packages, setup

setup(
    name="tb-roofline",
    version="0.1.0",
    description="Roofline analysis of JAX, TensorFlow and PyTorch profiles inside TensorBoard",
    long_description=open("README.md", encoding="utf-8").read(),
    long_description_content_type="text/markdown",
    license="Apache-2.0",
    python_requires=">=3.9",
    packages=find_packages(include=["tb_roofline", "tb_roofline.*"]),
    package_data={"tb_roofline": ["static/*", "static/**/*", "protos/*.proto"]},
    include_package_data=True,
    install_requires=[
        "tensorboard>=2.12",
        "werkzeug>=2.0",
        "numpy>=1.22",
        "protobuf>=4.21",
    ],
    extras_require={
        # Remote logdirs (read through fsspec, imported only for a URL logdir):
        "s3": ["s3fs>=2023.1"],  # s3://
        "gcs": ["gcsfs>=2023.1"],  # gs://
        "remote": ["fsspec>=2023.1"],  # any other fsspec scheme (plus that scheme's package)
        "mcp": ["mcp>=2,<3"],  # `tb-roofline mcp LOGDIR`: the official MCP Python SDK (2.x API)
        # Conversions on a Dask cluster (TB_ROOFLINE_SCHEDULER / --scheduler; docs/cluster.md):
        "dask": ["distributed>=2023.1"],
        # `tb_roofline.load(...)` tables as DataFrames (numpy record arrays without it):
        "notebook": ["pandas>=1.5"],
        # PyTorch traces decoded by msgspec's compiled, typed JSON decoder (only the fields the
        # reader uses; readers/kineto/fast_json.py); the standard library without it:
        "fast": ["msgspec>=0.18"],
        # The project's habits (CONTRIBUTING.md): lint and format, types, pre-commit hooks.
        "dev": ["ruff==0.17.6", "mypy==2.4.1", "import-linter==2.17", "pre-commit>=3"],
        "test": [
            "pytest>=7",
            "ruff==0.17.6",  # CI checks lint and format (pyproject.toml) before the tests
            "mypy==2.4.1",  # and types at the level pyproject.toml sets (pinned: a new release
            # may find new errors in unchanged code)
            "import-linter==2.17",  # and the import contracts of pyproject.toml (lint-imports)
            "xprof>=2.20",  # the reference converter the conformance tests compare against
            "playwright>=1.40",  # drives Debian's chromium (executable_path), no browser download
            "grpcio-tools>=1.62",  # checks the committed *_pb2.py match the .proto files
            "s3fs>=2023.1",  # the s3 extra, for the remote-logdir tests
            # A real S3-compatible server, run as a separate process; it brings boto3 (the tests
            # upload with it). boto3 is not listed itself: a newer boto3 than aiobotocore's
            # botocore range makes pip backtrack s3fs to a release whose fsspec is yanked.
            "moto[server]>=5",
            "mcp>=2,<3",  # the mcp extra: tests/serve/mcp/test_mcp.py (a real MCP client)
            "distributed>=2023.1",  # the dask extra: tests/execute/test_dask_cluster.py
            "pandas>=1.5",  # the notebook extra: tests/serve/notebook/test_notebook.py
            "pyyaml>=5",  # tests/execute/test_deploy.py parses the Kubernetes manifests in deploy/
            "msgspec>=0.18",  # the fast extra: tests/readers/kineto/test_kineto_fast_json.py
        ],
    },
    entry_points={
        "tensorboard_plugins": ["roofline = tb_roofline.serve.web.plugin:RooflinePlugin"],
        "console_scripts": ["tb-roofline = tb_roofline.serve.cli.main:main"],
    },
)
