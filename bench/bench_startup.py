"""Start-up of `tb-roofline` commands: fresh processes, wall time, medians.

    python bench/bench_startup.py [--repeat 9] [--tree DIR ...]

Each command runs as a new interpreter (`python -m tb_roofline.serve.cli.main ...` with
`PYTHONPATH` the tree measured), the rows interleaved so that a busy machine slows every row
alike; beside them a bare interpreter and `import numpy`, the floors a reading command cannot
go under. Give several `--tree`s (git worktrees of two commits) to compare them side by side.
Disk cache off; the demo logdir of the tree measured.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)

import bench_env  # noqa: E402 (children run with bytecode, as an installed package does)

ROWS = [
    ("python -c pass", ["-c", "pass"]),
    ("python -c 'import numpy'", ["-c", "import numpy"]),
    ("tb-roofline --help", ["-m", "tb_roofline.serve.cli.main", "--help"]),
    ("tb-roofline runs DEMO", ["-m", "tb_roofline.serve.cli.main", "runs", "{demo}"]),
    (
        "tb-roofline report DEMO --run v6e",
        [
            "-m",
            "tb_roofline.serve.cli.main",
            "report",
            "{demo}",
            "--run",
            "v6e_train/2026_11_29_10_00_00",
        ],
    ),
]


def once(tree: str, args: list) -> float:
    env = bench_env.child_env(tree, TB_ROOFLINE_CACHE_DIR="off")
    args = [a.format(demo=os.path.join(tree, "testdata", "demo")) for a in args]
    t = time.perf_counter()
    subprocess.run(
        [sys.executable, *args],
        cwd=tree,
        env=env,
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    return time.perf_counter() - t


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=9)
    parser.add_argument("--tree", action="append", help="a checkout to measure (default: this)")
    args = parser.parse_args()
    trees = args.tree or [REPO]
    times = {(t, name): [] for t in trees for name, _ in ROWS}
    for _ in range(args.repeat):
        for name, cmd in ROWS:
            for tree in trees:
                times[(tree, name)].append(once(tree, cmd))
    print(f"load average {os.getloadavg()[0]:.2f}; medians of {args.repeat} (s)")
    print("| command | " + " | ".join(os.path.basename(t.rstrip("/")) for t in trees) + " |")
    print("|---|" + "---:|" * len(trees))
    for name, _ in ROWS:
        print(
            f"| `{name}` | "
            + " | ".join(f"{statistics.median(times[(t, name)]):.3f}" for t in trees)
            + " |"
        )


if __name__ == "__main__":
    main()
