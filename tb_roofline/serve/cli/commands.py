"""What every command shares (picking the run, usage errors) and the small commands: `runs`
(the runs and hosts) and `export` (the API's `/export` files)."""

from __future__ import annotations

import json
import sys

USER_FILE_ERRORS = (
    "bad_device_file",
    "bad_workload_file",
    "bad_engine_metrics_file",
    "bad_model_config_file",
)


class UsageError(Exception):
    """A problem with the command line or the output path: one line, exit code 2."""


def pick_run(service, run: str | None) -> str:
    runs = service.list_runs()["runs"]
    if not runs:
        from tensorboard import errors as tb_errors

        raise tb_errors.NotFoundError(f"no profiles found under {service.logdir!r}")
    return run or runs[0]["run"]


def cmd_runs(service, args, out):
    runs = service.list_runs()["runs"]
    if args.json:
        out.write(json.dumps(runs, indent=1) + "\n")
        return
    if not runs:
        out.write(f"no profiles found under {service.logdir}\n")
    for r in runs:
        out.write(f"{r['run']}  [{r['format']}]  hosts: {', '.join(r['hosts'])}\n")


def cmd_export(service, args, out):
    run = pick_run(service, args.run)
    body, _, filename = service.export(
        run,
        args.host,
        not args.exclude_infeed_outfeed,
        level=args.level,
        fmt=args.format,
        categories=args.category or (),
        bound_by=args.bound_by or (),
        name=args.name or "",
        view=args.view,
    )
    if args.output == "-":
        out.write(body)
    else:
        path = args.output or filename
        try:
            with open(path, "w", encoding="utf-8") as f:
                f.write(body)
        except OSError as exc:
            raise UsageError(f"cannot write {path}: {exc.strerror or exc}") from None
        sys.stderr.write(f"wrote {path}\n")
