"""A partial answer (a run's hosts not read, or read in part) said plainly: every command that
answers names those hosts on stderr and exits EXIT_PARTIAL unless `--allow-partial`."""

from __future__ import annotations

import sys

EXIT_PARTIAL = 3  # an answer that leaves hosts out, unless --allow-partial


def partial_status(missing: dict, allowed: bool, prog: str = "tb-roofline") -> int:
    """Each run's hosts not read, named on stderr with why; EXIT_PARTIAL unless `allowed`
    (a CI job must not take 47 hosts of 48 for the pod)."""
    for run, hosts in sorted(missing.items()):
        sys.stderr.write(
            f"{prog}: run {run!r}: partial answer: {len(hosts)} host(s) not read or read "
            "in part: "
            + ", ".join(sorted(hosts))
            + ("" if allowed else " (--allow-partial accepts a partial answer)")
            + "\n"
        )
        for why in (hosts[h] for h in sorted(hosts)):
            sys.stderr.write(f"{prog}:   {why}\n")
    return EXIT_PARTIAL if missing and not allowed else 0
