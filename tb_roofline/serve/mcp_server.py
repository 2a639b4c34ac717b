"""`tb-roofline mcp LOGDIR`: the tools of `serve/mcp_tools.py` over the official MCP Python SDK
(`pip install 'tb-roofline[mcp]'`), on stdio or on streamable HTTP bound to 127.0.0.1.

Thin wiring only: each tool here declares its input schema (types, ranges and choices, checked
by the SDK before the tool runs), calls the plain function with the server's one
`RooflineService`, and turns the service's public errors into MCP errors carrying the HTTP
API's message, status and code (`docs/mcp.md`). A failure, even a bug or running out of
memory, answers that one call; the server keeps serving. Read-only: nothing is written.
"""
import logging
from typing import Annotated, Any, Literal, Optional

from tensorboard import errors as tb_errors

from tb_roofline import errors
from tb_roofline.serve import mcp_tools

logger = logging.getLogger(__name__)

SERVER_NAME = "tb-roofline"
MCP_INVALID_PARAMS = -32602  # JSON-RPC: the arguments are wrong (HTTP 400)
MCP_SERVER_ERROR = -32000  # JSON-RPC's implementation-defined server error (other statuses)
MCP_INTERNAL_ERROR = -32603

INSTRUCTIONS = """\
tb-roofline: roofline analysis of the ML profiles (XLA XSpace for TPU/GPU/CPU, PyTorch Kineto
traces) in one TensorBoard logdir. Start with list_runs, then get_guidance for the findings
(what to change, time saved), top_ops for the ops, get_op for one op in full, compare for two
runs, hosts or steps, get_diagnostics for what the profile lacks. Every number is the Roofline
tab's and the HTTP API's; field names carry their units (_us, _gflops = GFLOP/s, _gibs =
GiB/s, _flop_per_byte); fractions are 0..1, _percent 0..100.

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
  order=time_saved) rather than by efficiency alone: a slow tiny op matters little.
- A row with a caveat (async_start, async_wait, host_transfer, peer_transfer, no_cost,
  above_roof, container) is not a roofline measurement as it stands: count its time, do not
  judge its efficiency. flop_coverage / bytes_coverage under 1 mean only part of the time has
  known costs; read get_diagnostics before trusting program-level rates.
- Peaks come with a source (profile, datasheet, measured, user): without known peaks
  (peaks_known false) efficiencies are null; a roofline_device.json gives them.
"""

IoArg = Literal["include", "exclude"]
Answer = dict[str, Any]  # a JSON object: the structured content of a tool's result


def _mcp_error(exc: tb_errors.PublicError):
    from mcp.shared.exceptions import MCPError
    status = getattr(exc, "http_code", 500)
    code = MCP_INVALID_PARAMS if status == 400 else MCP_SERVER_ERROR
    return MCPError(code=code, message=str(exc),
                    data={"status": status, "code": errors.error_code(exc)})


def call(service, fn, **kwargs) -> dict:
    """Run one tool: its answer, or an MCP error with the HTTP API's message (a bug or a lack
    of memory answered as the plugin answers it: one failed call, the server lives on)."""
    from mcp.shared.exceptions import MCPError
    from tb_roofline import storage
    try:
        with storage.request_deadline():  # a slow store cannot hold a tool call for ever
            return fn(service, **kwargs)
    except tb_errors.PublicError as exc:
        raise _mcp_error(exc) from None
    except MCPError:
        raise
    except MemoryError:
        pass  # answered below, outside this block: the failed call's memory is free
    except Exception as exc:  # a bug: say what, keep serving
        logger.exception("tb-roofline mcp: %s failed", fn.__name__)
        raise MCPError(code=MCP_INTERNAL_ERROR,
                       message=f"internal error: {type(exc).__name__}: {exc}",
                       data={"status": 500, "code": "internal"}) from None
    raise _mcp_error(errors.TooLargeError(
        "not enough memory to answer this request: the profile is too large for this server "
        "(lower TB_ROOFLINE_MAX_FILE_MB or TB_ROOFLINE_MAX_EVENTS, or give it more memory)"))


def build_server(service):
    """The MCPServer with every tool of `mcp_tools`, bound to `service`."""
    from pydantic import Field
    from mcp.server.mcpserver import MCPServer
    from mcp.types import ToolAnnotations

    server = MCPServer(SERVER_NAME, instructions=INSTRUCTIONS)
    read_only = ToolAnnotations(read_only_hint=True, destructive_hint=False,
                                idempotent_hint=True, open_world_hint=False)
    tool = lambda: server.tool(annotations=read_only, structured_output=True)  # noqa: E731
    Run = Annotated[str, Field(description="run name exactly as list_runs gives it")]
    Host = Annotated[str, Field(description="one host of the run; '' or '*' = all hosts")]
    Io = Annotated[IoArg, Field(description="whether infeed/outfeed ops count")]
    Off = Annotated[int, Field(ge=0, description="rows to skip (paging)")]
    Lim = Annotated[Optional[int], Field(ge=0, le=mcp_tools.MAX_LIMIT,
                                         description="rows to return (default 10)")]
    Cols = Annotated[Optional[list[str]], Field(
        description="fields to return (HTTP column names or these answers' names); "
                    "default: the main ones")]
    Dig = Annotated[Optional[int], Field(ge=0, le=17, description=(
        "significant digits of every number (default 6; 0 = full precision)"))]
    View = Annotated[str, Field(description="op (default), kernel or kernel_hw (PyTorch GPU)")]
    Values = Annotated[Optional[list[str]], Field(description="keep rows with one of these")]
    Step = Annotated[Optional[str], Field(description="Total (default), Average or a step")]

    @tool()
    def list_runs(offset: Off = 0, limit: Annotated[Optional[int], Field(
            ge=0, le=mcp_tools.MAX_LIMIT)] = 50) -> Answer:
        """Profiling runs in the logdir, newest first, with their hosts and format."""
        return call(service, mcp_tools.list_runs, offset=offset, limit=limit)

    @tool()
    def list_hosts(run: Run) -> Answer:
        """The hosts of one run ('*' aggregates all)."""
        return call(service, mcp_tools.list_hosts, run=run)

    @tool()
    def get_device(run: Run, host: Host = "", significant_digits: Dig = None) -> Answer:
        """The device and its roofs: peak FLOP rate per precision and bandwidth per memory,
        ridge points, each with its source (profile, datasheet, measured, user)."""
        return call(service, mcp_tools.get_device, run=run, host=host,
                    significant_digits=significant_digits)

    @tool()
    def get_program(run: Run, host: Host = "", infeed_outfeed: Io = "include",
                    offset: Off = 0, limit: Lim = None, columns: Cols = None,
                    significant_digits: Dig = None) -> Answer:
        """Program records: the Total, Total (HW), one per host, Average and each step, with
        rates, intensity, bound-by, efficiency and cost coverage."""
        return call(service, mcp_tools.get_program, run=run, host=host,
                    infeed_outfeed=infeed_outfeed, offset=offset, limit=limit,
                    columns=columns, significant_digits=significant_digits)

    @tool()
    def top_ops(run: Run, host: Host = "", infeed_outfeed: Io = "include", view: View = "op",
                category: Values = None, bound_by: Values = None,
                name: Annotated[str, Field(description="case-insensitive substring")] = "",
                precision: Values = None,
                caveat: Annotated[Optional[list[str]], Field(
                    description="caveat codes to keep; 'none' = rows without a caveat")] = None,
                order: Annotated[Literal["self_time", "time_saved"], Field(
                    description="self_time (rank) or time_saved (opportunities first)")]
                = "self_time",
                offset: Off = 0, limit: Lim = None, columns: Cols = None,
                significant_digits: Dig = None) -> Answer:
        """The top ops by self time or by potential time saved, filtered by category,
        bound_by, name, precision and caveat, paged (next_offset)."""
        return call(service, mcp_tools.top_ops, run=run, host=host,
                    infeed_outfeed=infeed_outfeed, view=view, category=category,
                    bound_by=bound_by, name=name, precision=precision, caveat=caveat,
                    order=order, offset=offset, limit=limit, columns=columns,
                    significant_digits=significant_digits)

    @tool()
    def get_op(run: Run, operation: Annotated[str, Field(min_length=1, description=(
            "the op's exact name, as top_ops gives it"))], host: Host = "",
               program_id: Optional[str] = None, precision: Optional[str] = None,
               view: View = "op", infeed_outfeed: Io = "include",
               significant_digits: Dig = None) -> Answer:
        """One op in full: every column of its records, the guidance findings naming it with
        their evidence, the shapes it ran with and the kernels it launched (PyTorch)."""
        return call(service, mcp_tools.get_op, run=run, operation=operation, host=host,
                    program_id=program_id, precision=precision, view=view,
                    infeed_outfeed=infeed_outfeed, significant_digits=significant_digits)

    @tool()
    def get_guidance(run: Run, host: Host = "", infeed_outfeed: Io = "include",
                     offset: Off = 0, limit: Lim = None,
                     significant_digits: Dig = None) -> Answer:
        """What to change: findings (rule, ops, evidence, time saved, suggestion), step time
        by class (compute, memory, communication, idle) and throughput (MFU, HFU)."""
        return call(service, mcp_tools.get_guidance, run=run, host=host,
                    infeed_outfeed=infeed_outfeed, offset=offset, limit=limit,
                    significant_digits=significant_digits)

    @tool()
    def compare(base: Annotated[str, Field(description="the base run")], run: Run,
                base_host: Host = "", host: Host = "", base_step: Step = None,
                step: Step = None, level: Literal["op", "program"] = "op",
                infeed_outfeed: Io = "include", view: View = "op", category: Values = None,
                bound_by: Values = None, name: str = "", offset: Off = 0, limit: Lim = None,
                columns: Cols = None, significant_digits: Dig = None) -> Answer:
        """Two runs, two hosts of one run or two steps: the summary (time change, speedup,
        top contributors) first, then one page of matched op (or program) pairs."""
        return call(service, mcp_tools.compare, base=base, run=run, base_host=base_host,
                    host=host, base_step=base_step, step=step, level=level,
                    infeed_outfeed=infeed_outfeed, view=view, category=category,
                    bound_by=bound_by, name=name, offset=offset, limit=limit, columns=columns,
                    significant_digits=significant_digits)

    @tool()
    def get_diagnostics(run: Run, host: Host = "", severity: Annotated[
            Optional[list[Literal["info", "warning", "error"]]], Field(
                description="keep these severities")] = None) -> Answer:
        """What the profile lacks or what was skipped (unknown peaks, low cost coverage, ...)."""
        return call(service, mcp_tools.get_diagnostics, run=run, host=host,
                    severity=severity)

    _refuse_unknown_arguments(server)
    return server


def _refuse_unknown_arguments(server):
    """A misspelt argument (`limt`) is an error, not a silent default: each tool's argument
    model forbids extra fields and its published schema says so (additionalProperties false).
    Reaches into the SDK's tool records; where they differ, extra arguments stay ignored."""
    from pydantic import ConfigDict
    try:
        tools = server._tool_manager.list_tools()
        for t in tools:
            base = t.fn_metadata.arg_model
            strict = type(base.__name__, (base,), {
                "model_config": ConfigDict(**base.model_config, extra="forbid"),
                "__module__": base.__module__})
            t.fn_metadata.arg_model = strict
            t.parameters = strict.model_json_schema(by_alias=True)
    except (AttributeError, TypeError, ValueError) as exc:  # another SDK version
        logger.debug("tb-roofline mcp: extra arguments stay ignored (%s)", exc)


def run(logdir: str, http: bool = False, port: int = 8000, device_file: Optional[str] = None,
        workload_file: Optional[str] = None) -> int:
    """Serve until the client goes (stdio) or Ctrl-C (HTTP, on 127.0.0.1 only)."""
    from tb_roofline.serve.service import RooflineService
    service = RooflineService(logdir, device_file=device_file, workload_file=workload_file)
    server = build_server(service)
    if http:
        server.run("streamable-http", host="127.0.0.1", port=port)
    else:
        server.run("stdio")
    return 0


def add_mcp_subparser(subparsers):
    """Add `mcp` to the CLI's subparsers; dispatch with `run_from_args(args, out)`."""
    p = subparsers.add_parser("mcp", help="serve the analysis to coding agents (MCP server)",
                              description="An MCP server over the logdir's roofline analysis "
                                          "(tools: docs/mcp.md); read-only")
    p.add_argument("logdir", help="TensorBoard logdir (or one run's directory), path or URL")
    p.add_argument("--http", action="store_true",
                   help="streamable HTTP on 127.0.0.1 (at /mcp) instead of stdio")
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
        sys.stderr.write(f"tb-roofline mcp: the MCP SDK is not installed ({exc}); "
                         "pip install 'tb-roofline[mcp]'\n")
        return 2
    try:
        is_dir = storage.isdir(args.logdir)
    except OSError as exc:
        sys.stderr.write(f"tb-roofline mcp: cannot read {args.logdir!r}: "
                         f"{exc.strerror or exc}\n")
        return 2
    if not is_dir:
        sys.stderr.write(f"tb-roofline mcp: {args.logdir!r} is not a directory\n")
        return 2
    if not 0 < args.port < 65536:
        sys.stderr.write(f"tb-roofline mcp: --port {args.port} is not a port\n")
        return 2
    return run(args.logdir, http=args.http, port=args.port, device_file=args.device_file,
               workload_file=args.workload_file)
