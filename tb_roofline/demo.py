"""Write the bundled demo logdir (`testdata/demo`): realistic generated TPU profiles.

    python -m tb_roofline.demo testdata/demo
Two runs: a single-host v6e training run (with host-offload copies), and a two-host v4 run
(CMEM, megacore) whose hosts can be compared or aggregated. Seeds are fixed, so the files are
reproducible byte for byte.
"""

from __future__ import annotations

import argparse
import shutil

from tb_roofline.synthetic import SynthConfig, write_tpu_session


def write_demo(logdir: str) -> list[str]:
    paths = write_tpu_session(
        logdir,
        "v6e_train",
        "2026_11_29_10_00_00",
        [
            SynthConfig(
                seed=11,
                chip="v6e",
                num_cores=4,
                num_steps=6,
                distinct_ops=60,
                hostname="tpu-v6e-host0",
                host_offload_pairs=2,
                fixed_program=True,
            )
        ],
    )
    paths += write_tpu_session(
        logdir,
        "v4_pod",
        "2026_11_29_11_30_00",
        [
            SynthConfig(
                seed=21 + h,
                chip="v4",
                num_cores=2,
                num_steps=5,
                distinct_ops=40,
                hostname=f"tpu-v4-host{h}",
                program_seed=21,
                fixed_program=True,
            )
            for h in range(2)
        ],
    )
    return paths


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("logdir")
    parser.add_argument("--clean", action="store_true", help="remove the logdir first")
    args = parser.parse_args(argv)
    if args.clean:
        shutil.rmtree(args.logdir, ignore_errors=True)
    for p in write_demo(args.logdir):
        print(p)


if __name__ == "__main__":
    main()
