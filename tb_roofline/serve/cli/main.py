"""`tb-roofline`: the entry point. Parses the command line (`parser.py`, whose text is the
`--help`), runs one command against a `RooflineService` (its conversions on a Dask cluster with
--scheduler), and turns the service's public errors into one line on stderr and an exit
status: 0, 1 for a profile that cannot be analysed, 2 for a bad command line or input file, 3
for a partial answer (hosts of a run not read, or read in part from a file cut short: each
named on stderr with why; --allow-partial accepts it, still naming them).
"""

from __future__ import annotations

import os
import sys
import time

from tb_roofline import settings, storage
from tb_roofline.serve.cli.commands import USER_FILE_ERRORS, UsageError
from tb_roofline.serve.cli.parser import build_parser
from tb_roofline.serve.cli.partial import partial_status

COMMANDS = ("report", "runs", "export", "comm", "calibrate", "diff", "mcp", "serve", "html")
LONG_LIVED = ("mcp", "serve")  # servers: their reader processes stay between requests


class _Progress:
    """Stderr progress for slow reads (only when it takes long enough to matter): on a
    terminal one line rewritten in place; elsewhere (a CI log, a Kubernetes Job) whole lines
    "reading: k of N hosts", the first after FIRST_S, then at most one per EVERY_S and the
    last when every host is read."""

    FIRST_S, EVERY_S = 2.0, 5.0

    def __init__(self, enabled: bool, tty: bool = True):
        self.enabled, self.tty = enabled, tty
        self.start = time.monotonic()
        self.shown = False
        self.last = 0.0

    def __call__(self, host: str, done: int, total: int, hosts_done=None, hosts_total=None):
        if not self.enabled:
            return
        now = time.monotonic()
        took = now - self.start
        hosts = f"{hosts_done} of {hosts_total} hosts" if hosts_total else ""
        if self.tty:
            if took > 0.5 or self.shown:
                self.shown = True
                sys.stderr.write(
                    f"\rreading {host}: {done}/{total} planes"
                    + (f", {hosts}" if hosts else "")
                    + f" ({took:.1f} s)   "
                )
                sys.stderr.flush()
            return
        if not hosts:
            return
        finished = hosts_done == hosts_total and done >= total
        if took < self.FIRST_S and not self.shown:
            return
        if finished or not self.shown or now - self.last >= self.EVERY_S:
            sys.stderr.write(f"tb-roofline: reading: {hosts} ({took:.1f} s)\n")
            sys.stderr.flush()
            self.shown, self.last = True, now

    def finish(self):
        if self.shown and self.tty:
            sys.stderr.write("\n")


def main(argv=None, out=None) -> int:
    try:
        code = _main(argv, out)
        (out or sys.stdout).flush()
        return code
    except BrokenPipeError:  # `tb-roofline ... | head`: the reader has all it wanted
        try:  # no second error when Python flushes stdout at exit
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        except (OSError, ValueError):
            pass
        return 1


def _main(argv=None, out=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] not in COMMANDS and not argv[0].startswith("-"):
        argv.insert(0, "report")  # `tb-roofline LOGDIR` means `report`
    args = build_parser(argv[0] if argv and argv[0] in COMMANDS else "").parse_args(argv)
    out = out or sys.stdout
    if not (args.scheduler or "").strip():  # local conversion: no cluster module (start-up)
        return _command(args, out)
    from tb_roofline.execute import cluster

    # A server outlives the cluster's faults: it converts here, saying so in its log and in
    # `/progress`, as TensorBoard does; a one-shot command stops with the cluster's error.
    serving = args.command in LONG_LIVED
    cluster.configure(
        args.scheduler, strict=not serving, allow_partial=getattr(args, "allow_partial", False)
    )
    try:
        addr = cluster.address()  # (stripped, as the environment variable is)
        assert addr is not None, "configure() set the scheduler"
        if args.command not in ("runs", "calibrate"):
            _check_cluster(cluster, addr, args.command, serving)
        return _command(args, out)
    except cluster.ClusterError as exc:  # no hang, no traceback: what is wrong, exit 2
        sys.stderr.write(f"tb-roofline: {exc}\n")
        return 2
    finally:
        cluster.configure(None)


def _check_cluster(cluster, addr: str, command: str, serving: bool):
    """The cluster answers with a worker running our code; else its ClusterError, which a
    server (mcp, serve) only logs: it converts here until the cluster answers again."""
    try:
        cluster.usable_workers(cluster.get_client(addr), addr)
    except cluster.ClusterError as exc:
        if not serving:
            raise
        cluster.note_unavailable(addr, exc)
        import logging

        logging.getLogger("tb_roofline").warning(
            "tb-roofline %s: %s: converting in this process instead, as each answer's "
            "diagnostics say (cluster_unavailable)%s; the cluster is tried again %g s after "
            "a failure",
            command,
            exc,
            " and /progress" if command == "serve" else "",
            cluster.RETRY_S,
        )


def _command(args, out) -> int:
    """One command. Its reader processes leave as soon as a conversion is done (unless
    TB_ROOFLINE_POOL_IDLE_S says otherwise; not for the long-lived servers, mcp and serve): nothing
    would reuse them, and their memory would add to the model's (execute/pool.py). A
    default for this call alone: the environment, and other threads of a caller that runs
    commands in its own process, are left as they are."""
    if args.command in LONG_LIVED:
        return _run_command(args, out)
    return settings.run_with_defaults({settings.POOL_IDLE_S.name: "0"}, _run_command, args, out)


def _run_command(args, out) -> int:
    if getattr(args, "run_standalone", None):
        return args.run_standalone(args, out)
    problem = storage.directory_problem(args.logdir)
    if problem:
        sys.stderr.write(f"tb-roofline: {problem}\n")
        return 2
    from tensorboard import errors as tb_errors

    from tb_roofline.serve.service.core import RooflineService

    progress = _Progress(enabled=not args.no_progress, tty=sys.stderr.isatty())
    service = RooflineService(
        args.logdir,
        progress=progress,
        device_file=getattr(args, "device_file", None),
        workload_file=getattr(args, "workload_file", None),
        engine_metrics_file=getattr(args, "engine_metrics", None),
        model_config_file=getattr(args, "model_config", None),
    )
    try:
        args.func(service, args, out)
    except tb_errors.PublicError as exc:
        progress.finish()
        sys.stderr.write(f"tb-roofline: {exc}\n")
        # A device or workload file is what the user gave, as the command line is.
        return 2 if getattr(exc, "code", "") in USER_FILE_ERRORS else 1
    except UsageError as exc:
        progress.finish()
        sys.stderr.write(f"tb-roofline: {exc}\n")
        return 2
    except Exception:  # the cluster's error is told by the caller, after this line ends
        progress.finish()
        raise
    progress.finish()
    return partial_status(service.hosts_not_read(), getattr(args, "allow_partial", False))


if __name__ == "__main__":
    sys.exit(main())
