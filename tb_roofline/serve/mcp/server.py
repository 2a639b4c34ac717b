"""`tb-roofline mcp LOGDIR`: the tools of `serve/mcp/tools.py` and `op_tools.py` over the MCP SDK
(`pip install 'tb-roofline[mcp]'`), on stdio or on streamable HTTP bound to 127.0.0.1.

Thin wiring only: each tool declares its input schema (`tool_declarations.py`, with the types
of `tool_types.py`: ranges and choices, checked by the SDK before the tool runs; choices in
any case), calls the plain function with the server's one `RooflineService` and answers with
its result and the versions (`calls.py`). The service's
public errors are tool results with `isError` (MCP 2025-11-25: the model reads them, a
JSON-RPC error it would not) carrying the HTTP API's message, status and code and the valid
values of the argument at fault (`docs/mcp.md`). A failure, even a bug or running out of
memory, answers that one call; the server keeps serving. Progress notifications ("k of N
hosts read") go to a client that gave a progressToken. Read-only: nothing is written.
"""

import logging
from typing import Optional, cast

from tb_roofline.serve.mcp import envelope
from tb_roofline.serve.mcp.calls import argument_error, reading
from tb_roofline.serve.mcp.tool_declarations import register_tools
from tb_roofline.serve.mcp.tool_types import arg_types

logger = logging.getLogger(__name__)

SERVER_NAME = "tb-roofline"

INSTRUCTIONS = """\
tb-roofline: roofline analysis of the ML profiles (XLA XSpace for TPU/GPU/CPU, PyTorch Kineto
traces) in one TensorBoard logdir. Start with list_runs, then get_summary (one call: roofs,
Total, time by class, top findings and ops); get_guidance for the findings
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


def build_server(service):
    """The MCPServer with every tool of `mcp_tools`, bound to `service`."""
    from mcp.types import ToolAnnotations

    server = _server_class()(
        SERVER_NAME, instructions=INSTRUCTIONS, version=envelope.server_version()
    )
    read_only = ToolAnnotations(
        read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False
    )

    def tool():
        return server.tool(annotations=read_only, structured_output=True)

    register_tools(tool, service, arg_types())
    _refuse_unknown_arguments(server)
    _compact_listing(server)
    return server


def _compact_listing(server):
    """The tool listing is read by the model at every session's start, so it is kept to what
    informs a call: descriptions on one line, no generated titles, an optional argument shown
    as its type (null is its default). The argument models still accept exactly what they did."""
    import inspect

    try:
        for t in server._tool_manager.list_tools():
            t.description = " ".join(inspect.cleandoc(t.description or "").split())
            t.parameters = compact_schema(t.parameters)
            if t.fn_metadata.output_schema is not None:
                t.fn_metadata.output_schema = compact_schema(t.fn_metadata.output_schema)
    except (AttributeError, TypeError) as exc:  # another SDK version: the full listing
        logger.debug("tb-roofline mcp: tool listing left as the SDK makes it (%s)", exc)


def compact_schema(schema):
    """`schema` without `title`s and with `anyOf: [X, {"type": "null"}]` (default null) as X,
    not required."""
    if isinstance(schema, list):
        return [compact_schema(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {}
    for key, value in schema.items():
        if key == "title" and isinstance(value, str):
            continue
        if key == "properties" and isinstance(value, dict):  # names, not schema keywords
            out[key] = {name: compact_schema(v) for name, v in value.items()}
        else:
            out[key] = compact_schema(value)
    options = out.get("anyOf")
    if isinstance(options, list) and len(options) == 2 and {"type": "null"} in options:
        if out.get("default", "absent") is None:
            (kept,) = [o for o in options if o != {"type": "null"}]
            out.pop("anyOf")
            out.pop("default")
            out = {**kept, **out}
    if "description" in out and isinstance(out["description"], str):
        out["description"] = " ".join(out["description"].split())
    return out


def _server_class():
    """MCPServer whose refusals of a call's arguments (the SDK checks them against the input
    schema before the tool runs) are the project's structured errors (`calls.argument_error`),
    not pydantic's text: the model reads every error the same way."""
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
    from pydantic import ValidationError

    class Server(MCPServer):
        async def call_tool(self, name, arguments, context=None):
            try:
                return await super().call_tool(name, arguments, context)
            except ToolError as exc:
                if isinstance(exc, UnexpectedToolError) or not isinstance(
                    exc.__cause__, ValidationError
                ):
                    raise
                tool = self._tool_manager.get_tool(name)
                parameters = tool.parameters if tool is not None else None
                return argument_error(name, exc.__cause__, parameters)

    return Server


def _refuse_unknown_arguments(server):
    """A misspelt argument (`limt`) is an error, not a silent default: each tool's argument
    model forbids extra fields and its published schema says so (additionalProperties false).
    Reaches into the SDK's tool records; where they differ, extra arguments stay ignored."""
    from pydantic import BaseModel, ConfigDict

    try:
        tools = server._tool_manager.list_tools()
        for t in tools:
            base = t.fn_metadata.arg_model
            # A subclass of a pydantic model is one: `type` dispatches to pydantic's metaclass.
            strict = cast(
                "type[BaseModel]",
                type(
                    base.__name__,
                    (base,),
                    {
                        "model_config": ConfigDict(**base.model_config, extra="forbid"),
                        "__module__": base.__module__,
                    },
                ),
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
    engine_metrics_file: Optional[str] = None,
    model_config_file: Optional[str] = None,
) -> int:
    """Serve until the client goes (stdio) or Ctrl-C (HTTP, on 127.0.0.1 only)."""
    from tb_roofline.serve.service.core import RooflineService

    service = RooflineService(
        logdir,
        progress=reading,
        device_file=device_file,
        workload_file=workload_file,
        engine_metrics_file=engine_metrics_file,
        model_config_file=model_config_file,
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
    p.add_argument(
        "--engine-metrics", help="a vLLM/SGLang /metrics file whose FLOPs/bytes to set beside ours"
    )
    p.add_argument(
        "--model-config",
        help="a serving model's Hugging Face config.json: its sliding-window layers clamp the "
        "attention counts (default: the nearest model_config.json)",
    )
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
    problem = storage.directory_problem(args.logdir)
    if problem:
        sys.stderr.write(f"tb-roofline mcp: {problem}\n")
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
        engine_metrics_file=args.engine_metrics,
        model_config_file=args.model_config,
    )
