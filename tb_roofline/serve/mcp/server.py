"""`tb-roofline mcp LOGDIR`: the tools of `serve/mcp/tools.py` over the official MCP Python SDK
(`pip install 'tb-roofline[mcp]'`), on stdio or on streamable HTTP bound to 127.0.0.1.

Thin wiring only: each tool here declares its input schema (types, ranges and choices, checked
by the SDK before the tool runs; choices in any case), calls the plain function with the
server's one `RooflineService`, and answers with its result and the versions. The service's
public errors are tool results with `isError` (MCP 2025-11-25: the model reads them, a
JSON-RPC error it would not) carrying the HTTP API's message, status and code and the valid
values of the argument at fault (`docs/mcp.md`). A failure, even a bug or running out of
memory, answers that one call; the server keeps serving. Progress notifications ("k of N
hosts read") go to a client that gave a progressToken. Read-only: nothing is written.
"""

import contextvars
import json
import logging
from typing import Annotated, Any, Literal, Optional

from tensorboard import errors as tb_errors

from tb_roofline import errors, storage
from tb_roofline.serve.mcp import answers as mcp_answers
from tb_roofline.serve.mcp import tools as mcp_tools

logger = logging.getLogger(__name__)

SERVER_NAME = "tb-roofline"

INSTRUCTIONS = """\
tb-roofline: roofline analysis of the ML profiles (XLA XSpace for TPU/GPU/CPU, PyTorch Kineto
traces) in one TensorBoard logdir. Start with list_runs, then get_guidance for the findings
(what to change, time saved), top_ops for the ops, get_op for one op in full, compare for two
runs, hosts or steps, get_diagnostics for what the profile lacks, get_comm for the
collectives (message size, bus bandwidth under the link roof, exposed time). Every number is
the Roofline tab's and the HTTP API's; field names carry their units (_us, _gflops = GFLOP/s,
_gibs = GiB/s, _flop_per_byte); fractions are 0..1, _percent 0..100.

How to read a roofline:
- Each op is a point: x = operational intensity (FLOPs per byte moved from the memory that
  bounds it), y = its FLOP rate. The roofs are the device's peak FLOP rate (flat, one per
  precision) and peak bandwidth x intensity (sloped, one per memory: HBM, VMEM, ...).
- The ridge point (peak FLOP rate / peak bandwidth, FLOP/byte) divides the plot: an op left of
  it is memory-bound (bound_by names the memory), right of it compute-bound.
- roofline_efficiency = the op's rate / the roof above it. Low efficiency on a memory-bound op:
  fewer bytes (fuse with its neighbours, keep data in a faster memory, smaller dtypes); on a
  compute-bound op: a better kernel, shapes that fill the matrix units, a lower precision.
- potential_time_saved_us = time x (1 - efficiency): where the time is. Rank by it (top_ops
  order=time_saved: the ranked ops only, those with a proven saving and no caveat, by
  opportunity_rank) rather than by efficiency alone: a slow tiny op matters little.
- A row with measurement false (its caveat: async_start, async_wait, peer_transfer, no_cost,
  above_roof, a host_transfer without a known link roof) is not a roofline measurement as it
  stands: count its time, do not judge its efficiency. flop_coverage / bytes_coverage under 1
  mean only part of the time has known costs; read get_diagnostics before trusting
  program-level rates.
- Peaks come with a source (profile, datasheet, measured, user): without known peaks
  (peaks_known false) efficiencies are null; a roofline_device.json gives them.
"""

IoArg = Literal["include", "exclude"]
# The choices are the model's tuples, read when the module loads (the schema the SDK builds
# lists them); a static checker cannot evaluate them.
ViewArg = Literal[mcp_tools.VIEWS]  # type: ignore[valid-type]
CaveatArg = Literal[mcp_tools.CAVEATS]  # type: ignore[valid-type]
Answer = dict[str, Any]  # a JSON object: the structured content of a tool's result


_PROGRESS: contextvars.ContextVar = contextvars.ContextVar("tb_roofline_mcp_progress", default=None)


def _reading(host: str, done: int, total: int, hosts_done=None, hosts_total=None):
    """The service's progress callback: hands it to the call being answered (each call runs
    on a thread of its own, with its own context)."""
    report = _PROGRESS.get()
    if report is not None:
        report(host, done, total, hosts_done, hosts_total)


def _notifier(ctx):
    """Progress notifications for `ctx`'s call ("k of N hosts read"); the SDK sends them
    only when the client gave a progressToken. At most one per host finished."""
    if ctx is None:
        return None
    import anyio.from_thread

    def report(host, done, total, hosts_done, hosts_total):
        if hosts_total is None or done != total:
            return
        try:
            anyio.from_thread.run(
                ctx.report_progress,
                float(hosts_done),
                float(hosts_total),
                f"{hosts_done} of {hosts_total} hosts read ({host})",
            )
        except Exception as exc:  # noqa: BLE001 (the client went: the answer still matters)
            logger.debug("tb-roofline mcp: progress not sent (%s)", exc)

    return report


def _result(structured: dict, is_error: bool = False):
    from mcp.types import CallToolResult, TextContent

    text = json.dumps(structured, separators=(",", ":"), allow_nan=False)
    return CallToolResult(
        content=[TextContent(type="text", text=text)],
        structured_content=structured,
        is_error=is_error,
    )


def _error(service, exc, kwargs: dict):
    """A tool result with isError (the model reads it): the HTTP API's message, status and
    code, and the valid values of the argument at fault where they are known."""
    status = getattr(exc, "http_code", 500)
    valid = mcp_tools.valid_values(service, exc, kwargs) if service is not None else None
    return _result(mcp_answers.error_answer(exc, status, errors.error_code(exc), valid), True)


def call(service, fn, ctx=None, **kwargs):
    """Run one tool: its answer with the versions, or a tool result with isError carrying
    the HTTP API's message (a bug or a lack of memory answered as the plugin answers it:
    one failed call, the server lives on)."""
    token = _PROGRESS.set(_notifier(ctx))
    try:
        with storage.request_deadline():  # a slow store cannot hold a tool call for ever
            return _result({**fn(service, **kwargs), **mcp_answers.versions()})
    except tb_errors.PublicError as exc:
        return _error(service, exc, kwargs)
    except MemoryError:
        pass  # answered below, outside this block: the failed call's memory is free
    except Exception as exc:  # a bug: say what, keep serving
        logger.exception("tb-roofline mcp: %s failed", fn.__name__)
        exc = mcp_answers.InternalError(f"internal error: {type(exc).__name__}: {exc}")
        return _error(None, exc, kwargs)
    finally:
        _PROGRESS.reset(token)
    return _error(
        None,
        errors.TooLargeError(
            "not enough memory to answer this request: the profile is too large for this server "
            "(lower TB_ROOFLINE_MAX_FILE_MB or TB_ROOFLINE_MAX_EVENTS, or give it more memory)"
        ),
        kwargs,
    )


def _lower(value):
    """Choices are matched without regard to case ("HBM", "hbm")."""
    if isinstance(value, str):
        return value.strip().lower()
    if isinstance(value, list):
        return [_lower(v) for v in value]
    return value


def _answer_model():
    """The output schema of every tool: an object with the versions (docs/mcp.md lists each
    tool's other fields)."""
    from pydantic import BaseModel, ConfigDict, Field

    class ToolAnswer(BaseModel):
        """A tool's answer: its fields (docs/mcp.md) and the versions."""

        model_config = ConfigDict(extra="allow")
        server_version: str = Field(description="tb-roofline's version")
        schema_version: str = Field(
            description=("the version of the answers' shape (docs/mcp.md, changelog)")
        )

    return ToolAnswer


def _types():
    """The argument types the tools share (descriptions, ranges, choices in any case) and
    the answer's: what the input and output schemas publish."""
    from types import SimpleNamespace

    from mcp.server.mcpserver import Context
    from pydantic import BeforeValidator, Field

    Run = Annotated[str, Field(description="run name exactly as list_runs gives it")]
    Host = Annotated[str, Field(description="one host of the run; '' or '*' = all hosts")]
    Io = Annotated[
        IoArg, BeforeValidator(_lower), Field(description="whether infeed/outfeed ops count")
    ]
    Off = Annotated[int, Field(ge=0, description="rows to skip (paging)")]
    Lim = Annotated[
        Optional[int],
        Field(
            ge=0,
            le=mcp_tools.MAX_LIMIT,
            description=("rows to return (default 10; 0: the counts only, next_offset null)"),
        ),
    ]
    Cols = Annotated[
        Optional[list[str]],
        Field(
            description="fields to return (HTTP column names or these answers' names); "
            "default: the main ones"
        ),
    ]
    Dig = Annotated[
        Optional[int],
        Field(
            ge=0,
            le=17,
            description=("significant digits of every number (default 6; 0 = full precision)"),
        ),
    ]
    View = Annotated[
        ViewArg,
        BeforeValidator(_lower),
        Field(description="op (default), kernel or kernel_hw (PyTorch GPU traces); any case"),
    ]
    Category = Annotated[
        Optional[list[str]],
        Field(
            description=(
                "keep ops of these categories, any case (the answer's facets.category lists the "
                "run's; a value the run has not is an error naming them)"
            )
        ),
    ]
    BoundBy = Annotated[
        Optional[list[str]],
        Field(
            description=(
                "keep ops bound by these: Compute, HBM, VMEM Read, ..., Unknown, Async; any case "
                "(facets.bound_by lists the run's; a value the run has not is an error naming them)"
            )
        ),
    ]
    Values = Annotated[Optional[list[str]], Field(description="keep rows with one of these")]
    Step = Annotated[Optional[str], Field(description="Total (default), Average or a step")]
    Caveats = Annotated[
        Optional[list[CaveatArg]],
        BeforeValidator(_lower),
        Field(description="caveat codes to keep, any case; 'none' = rows without a caveat"),
    ]
    return SimpleNamespace(
        Run=Run,
        Host=Host,
        Io=Io,
        Off=Off,
        Lim=Lim,
        Cols=Cols,
        Dig=Dig,
        View=View,
        Category=Category,
        BoundBy=BoundBy,
        Values=Values,
        Step=Step,
        Caveats=Caveats,
        Answer=_answer_model(),
        Context=Context,
        Field=Field,
        BeforeValidator=BeforeValidator,
    )


def build_server(service):
    """The MCPServer with every tool of `mcp_tools`, bound to `service`."""
    from mcp.server.mcpserver import MCPServer
    from mcp.types import ToolAnnotations

    server = MCPServer(SERVER_NAME, instructions=INSTRUCTIONS, version=mcp_answers.server_version())
    read_only = ToolAnnotations(
        read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False
    )

    def tool():
        return server.tool(annotations=read_only, structured_output=True)

    T = _types()  # noqa: N806
    _run_tools(tool, service, T)
    _op_tools(tool, service, T)
    _refuse_unknown_arguments(server)
    return server


def _run_tools(tool, service, T):  # noqa: N803
    """Runs, hosts, the device, program records, diagnostics, the communication roofline."""

    @tool()
    def list_runs(
        ctx: T.Context,
        offset: T.Off = 0,
        limit: Annotated[Optional[int], T.Field(ge=0, le=mcp_tools.MAX_LIMIT)] = 50,
    ) -> T.Answer:
        """Profiling runs in the logdir, newest first, with their hosts and format."""
        return call(service, mcp_tools.list_runs, ctx, offset=offset, limit=limit)

    @tool()
    def list_hosts(ctx: T.Context, run: T.Run) -> T.Answer:
        """The hosts of one run ('*' aggregates all)."""
        return call(service, mcp_tools.list_hosts, ctx, run=run)

    @tool()
    def get_device(
        ctx: T.Context, run: T.Run, host: T.Host = "", significant_digits: T.Dig = None
    ) -> T.Answer:
        """The device and its roofs: peak FLOP rate per precision and bandwidth per memory,
        ridge points, each with its source (profile, datasheet, measured, user)."""
        return call(
            service,
            mcp_tools.get_device,
            ctx,
            run=run,
            host=host,
            significant_digits=significant_digits,
        )

    @tool()
    def get_program(
        ctx: T.Context,
        run: T.Run,
        host: T.Host = "",
        infeed_outfeed: T.Io = "include",
        offset: T.Off = 0,
        limit: T.Lim = None,
        columns: T.Cols = None,
        significant_digits: T.Dig = None,
    ) -> T.Answer:
        """Program records: the Total, Total (HW), one per host, Average and each step, with
        rates, intensity, bound-by, efficiency and cost coverage."""
        return call(
            service,
            mcp_tools.get_program,
            ctx,
            run=run,
            host=host,
            infeed_outfeed=infeed_outfeed,
            offset=offset,
            limit=limit,
            columns=columns,
            significant_digits=significant_digits,
        )

    @tool()
    def get_diagnostics(
        ctx: T.Context,
        run: T.Run,
        host: T.Host = "",
        severity: Annotated[
            Optional[list[Literal["info", "warning", "error"]]],
            T.BeforeValidator(_lower),
            T.Field(description="keep these severities"),
        ] = None,
        offset: T.Off = 0,
        limit: T.Lim = None,
    ) -> T.Answer:
        """What the profile lacks or what was skipped (unknown peaks, low cost coverage, ...),
        one entry per message the hosts share (count, first hosts), paged."""
        return call(
            service,
            mcp_tools.get_diagnostics,
            ctx,
            run=run,
            host=host,
            severity=severity,
            offset=offset,
            limit=limit,
        )

    @tool()
    def get_comm(
        ctx: T.Context,
        run: T.Run,
        host: T.Host = "",
        infeed_outfeed: T.Io = "include",
        kind: Annotated[
            Optional[list[str]],
            T.Field(
                description=(
                    "keep these collectives (all-reduce, all-gather, ...), any case (the "
                    "answer's kinds lists the run's; a value it has not is an error naming "
                    "them)"
                )
            ),
        ] = None,
        offset: T.Off = 0,
        limit: T.Lim = None,
        significant_digits: T.Dig = None,
    ) -> T.Answer:
        """The communication roofline: one point per collective and message size (message
        bytes, bus and algorithm bandwidth in GB/s, the link roof and its fraction, the
        exposed time, group size, algorithm), longest first, and the device's link roofs."""
        return call(
            service,
            mcp_tools.get_comm,
            ctx,
            run=run,
            host=host,
            infeed_outfeed=infeed_outfeed,
            kind=kind,
            offset=offset,
            limit=limit,
            significant_digits=significant_digits,
        )


def _op_tools(tool, service, T):  # noqa: N803
    """Ops, one op, the guidance, comparisons."""

    @tool()
    def top_ops(
        ctx: T.Context,
        run: T.Run,
        host: T.Host = "",
        infeed_outfeed: T.Io = "include",
        view: T.View = "op",
        category: T.Category = None,
        bound_by: T.BoundBy = None,
        name: Annotated[str, T.Field(description="case-insensitive substring")] = "",
        precision: Annotated[
            Optional[list[str]],
            T.Field(
                description=(
                    "precisions to keep (bf16, fp32, ...), any case; 'none' = rows without one"
                )
            ),
        ] = None,
        caveat: T.Caveats = None,
        order: Annotated[
            Literal["self_time", "time_saved"],
            T.BeforeValidator(_lower),
            T.Field(
                description="self_time (rank) or time_saved "
                "(the top opportunities only, by "
                "opportunity_rank)"
            ),
        ] = "self_time",
        offset: T.Off = 0,
        limit: T.Lim = None,
        columns: T.Cols = None,
        significant_digits: T.Dig = None,
    ) -> T.Answer:
        """The top ops by self time or by potential time saved, filtered by category,
        bound_by, name, precision and caveat, paged (next_offset). Each op carries its
        fingerprints (what it computes, as compare's pairs name it)."""
        return call(
            service,
            mcp_tools.top_ops,
            ctx,
            run=run,
            host=host,
            infeed_outfeed=infeed_outfeed,
            view=view,
            category=category,
            bound_by=bound_by,
            name=name,
            precision=precision,
            caveat=caveat,
            order=order,
            offset=offset,
            limit=limit,
            columns=columns,
            significant_digits=significant_digits,
        )

    @tool()
    def get_op(
        ctx: T.Context,
        run: T.Run,
        operation: Annotated[
            str, T.Field(min_length=1, description="the op's exact name, as top_ops gives it")
        ],
        host: T.Host = "",
        program_id: Optional[str] = None,
        precision: Optional[str] = None,
        view: T.View = "op",
        infeed_outfeed: T.Io = "include",
        significant_digits: T.Dig = None,
    ) -> T.Answer:
        """One op in full: every column of its records, the guidance findings naming it with
        their evidence, the shapes it ran with and the kernels it launched (PyTorch)."""
        return call(
            service,
            mcp_tools.get_op,
            ctx,
            run=run,
            operation=operation,
            host=host,
            program_id=program_id,
            precision=precision,
            view=view,
            infeed_outfeed=infeed_outfeed,
            significant_digits=significant_digits,
        )

    @tool()
    def get_guidance(
        ctx: T.Context,
        run: T.Run,
        host: T.Host = "",
        infeed_outfeed: T.Io = "include",
        offset: T.Off = 0,
        limit: T.Lim = None,
        significant_digits: T.Dig = None,
    ) -> T.Answer:
        """What to change: findings (rule, ops, evidence, time saved, suggestion), step time
        by class (compute, memory, communication, idle) and throughput (MFU, HFU)."""
        return call(
            service,
            mcp_tools.get_guidance,
            ctx,
            run=run,
            host=host,
            infeed_outfeed=infeed_outfeed,
            offset=offset,
            limit=limit,
            significant_digits=significant_digits,
        )

    @tool()
    def compare(
        ctx: T.Context,
        base: Annotated[str, T.Field(description="the base run")],
        run: T.Run,
        base_host: T.Host = "",
        host: T.Host = "",
        base_step: T.Step = None,
        step: T.Step = None,
        level: Annotated[Literal["op", "program"], T.BeforeValidator(_lower)] = "op",
        infeed_outfeed: T.Io = "include",
        view: T.View = "op",
        category: T.Category = None,
        bound_by: T.BoundBy = None,
        name: str = "",
        offset: T.Off = 0,
        limit: T.Lim = None,
        columns: T.Cols = None,
        significant_digits: T.Dig = None,
    ) -> T.Answer:
        """Two runs, two hosts of one run or two steps: the summary (time change, speedup,
        top contributors) first, then one page of matched op (or program) pairs."""
        return call(
            service,
            mcp_tools.compare,
            ctx,
            base=base,
            run=run,
            base_host=base_host,
            host=host,
            base_step=base_step,
            step=step,
            level=level,
            infeed_outfeed=infeed_outfeed,
            view=view,
            category=category,
            bound_by=bound_by,
            name=name,
            offset=offset,
            limit=limit,
            columns=columns,
            significant_digits=significant_digits,
        )


def _refuse_unknown_arguments(server):
    """A misspelt argument (`limt`) is an error, not a silent default: each tool's argument
    model forbids extra fields and its published schema says so (additionalProperties false).
    Reaches into the SDK's tool records; where they differ, extra arguments stay ignored."""
    from pydantic import ConfigDict

    try:
        tools = server._tool_manager.list_tools()
        for t in tools:
            base = t.fn_metadata.arg_model
            strict = type(
                base.__name__,
                (base,),
                {
                    "model_config": ConfigDict(**base.model_config, extra="forbid"),
                    "__module__": base.__module__,
                },
            )
            t.fn_metadata.arg_model = strict
            t.parameters = strict.model_json_schema(by_alias=True)
    except (AttributeError, TypeError, ValueError) as exc:  # another SDK version
        logger.debug("tb-roofline mcp: extra arguments stay ignored (%s)", exc)


def run(
    logdir: str,
    http: bool = False,
    port: int = 8000,
    device_file: Optional[str] = None,
    workload_file: Optional[str] = None,
) -> int:
    """Serve until the client goes (stdio) or Ctrl-C (HTTP, on 127.0.0.1 only)."""
    from tb_roofline.serve.service.core import RooflineService

    service = RooflineService(
        logdir, progress=_reading, device_file=device_file, workload_file=workload_file
    )
    server = build_server(service)
    if http:
        server.run("streamable-http", host="127.0.0.1", port=port)
    else:
        server.run("stdio")
    return 0


def add_mcp_subparser(subparsers):
    """Add `mcp` to the CLI's subparsers; dispatch with `run_from_args(args, out)`."""
    p = subparsers.add_parser(
        "mcp",
        help="serve the analysis to coding agents (MCP server)",
        description="An MCP server over the logdir's roofline analysis "
        "(tools: docs/mcp.md); read-only",
    )
    p.add_argument("logdir", help="TensorBoard logdir (or one run's directory), path or URL")
    p.add_argument(
        "--http",
        action="store_true",
        help="streamable HTTP on 127.0.0.1 (at /mcp) instead of stdio",
    )
    p.add_argument("--port", type=int, default=8000, help="port for --http (default 8000)")
    p.add_argument("--device-file", help="peaks from a device file for every run")
    p.add_argument("--workload-file", help="model FLOPs / tokens per step, for MFU")
    p.set_defaults(run_standalone=run_from_args)
    return p


def run_from_args(args, out=None) -> int:
    import sys

    from tb_roofline import storage

    try:
        import mcp.server.mcpserver  # noqa: F401
    except ImportError as exc:
        sys.stderr.write(
            f"tb-roofline mcp: the MCP SDK is not installed ({exc}); "
            "pip install 'tb-roofline[mcp]'\n"
        )
        return 2
    try:
        is_dir = storage.isdir(args.logdir)
    except OSError as exc:
        sys.stderr.write(f"tb-roofline mcp: cannot read {args.logdir!r}: {exc.strerror or exc}\n")
        return 2
    if not is_dir:
        sys.stderr.write(f"tb-roofline mcp: {args.logdir!r} is not a directory\n")
        return 2
    if not 0 < args.port < 65536:
        sys.stderr.write(f"tb-roofline mcp: --port {args.port} is not a port\n")
        return 2
    return run(
        args.logdir,
        http=args.http,
        port=args.port,
        device_file=args.device_file,
        workload_file=args.workload_file,
    )
