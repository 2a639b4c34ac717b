"""The environment every benchmark's child interpreter runs in.

A user's installed tb-roofline has its bytecode compiled (pip compiles a wheel's modules at
install; an editable install writes `__pycache__` on first import), as the XProf package the
benchmarks compare with has in site-packages. A shell with `PYTHONDONTWRITEBYTECODE=1` (this
project's VM sets it) would instead make every child compile our modules from source on each
start: ~0.1 s of a whole-process figure that no user pays, and only on our side. So children
run without that variable, with their bytecode under one temporary prefix
(`PYTHONPYCACHEPREFIX`, nothing written into the tree), compiled once before the first timing.

    env = bench_env.child_env(tree)   # PYTHONPATH=tree, bytecode compiled once, kept apart
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile

PYCACHE = os.path.join(tempfile.gettempdir(), "tb_roofline_bench_pycache")
_compiled: set = set()


def child_env(tree: str, **extra: str) -> dict:
    """os.environ for a child measuring `tree`: PYTHONPATH the tree, bytecode written and read
    under PYCACHE (a prefix per interpreter, so trees of two commits never share a file)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env.update(PYTHONPATH=tree, PYTHONPYCACHEPREFIX=PYCACHE)
    if tree not in _compiled:  # before the first child is timed
        precompile(tree, env)
        _compiled.add(tree)
    env.update(extra)
    return env


def precompile(tree: str, env: dict) -> None:
    """Compile the tree's package once (the bytecode an installed package has)."""
    subprocess.run(
        [sys.executable, "-m", "compileall", "-q", os.path.join(tree, "tb_roofline")],
        env=env,
        check=True,
        stdout=subprocess.DEVNULL,
    )
