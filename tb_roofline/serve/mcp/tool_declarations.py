"""Each MCP tool's declaration: its arguments (types, ranges, choices: `tool_types.py`), its
description (what the model reads to choose it) and the plain function it calls
(`tools.py`, `op_tools.py`) through `calls.call`. `register_tools` declares them all on a
server, bound to its one `RooflineService`.
"""

from typing import Annotated, Literal, Optional

from tb_roofline.serve.mcp import op_tools
from tb_roofline.serve.mcp import tools as mcp_tools
from tb_roofline.serve.mcp.calls import call
from tb_roofline.serve.mcp.shaping import MAX_LIMIT
from tb_roofline.serve.mcp.tool_types import lower


def register_tools(tool, service, T):  # noqa: N803
    """Declare every tool with `tool()` (the server's decorator), each calling `service`."""
    _run_tools(tool, service, T)
    _record_tools(tool, service, T)
    _comm_tool(tool, service, T)
    _top_ops_tool(tool, service, T)
    _op_and_guidance_tools(tool, service, T)
    _compare_tool(tool, service, T)


def _run_tools(tool, service, T):  # noqa: N803
    """Runs, hosts and the device."""

    @tool()
    def list_runs(
        ctx: T.Context,
        offset: T.Off = 0,
        limit: Annotated[Optional[int], T.Field(ge=0, le=MAX_LIMIT)] = 50,
    ) -> T.Answer:
        """Profiling runs in the logdir, newest first, with their hosts and format."""
        return call(service, mcp_tools.list_runs, ctx, offset=offset, limit=limit)

    @tool()
    def get_summary(
        ctx: T.Context, run: T.Run, host: T.Host = "", significant_digits: T.Dig = None
    ) -> T.Answer:
        """Start here: a run in one call. Device roofs, the Total record, step time by class,
        the top findings and top ops by time saved, diagnostics counted by severity."""
        return call(
            service,
            mcp_tools.get_summary,
            ctx,
            run=run,
            host=host,
            significant_digits=significant_digits,
        )

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


def _record_tools(tool, service, T):  # noqa: N803
    """Program records and diagnostics."""

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
            T.BeforeValidator(lower),
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


def _comm_tool(tool, service, T):  # noqa: N803
    """The communication roofline."""

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


def _top_ops_tool(tool, service, T):  # noqa: N803
    """The top ops, filtered and ordered."""

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
            T.BeforeValidator(lower),
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
        detail: T.Detail = "compact",
    ) -> T.Answer:
        """The top ops by self time or by potential time saved, filtered by category,
        bound_by, name, precision and caveat, paged (next_offset). Each op carries its
        fingerprints (what it computes, as compare's pairs name it)."""
        return call(
            service,
            op_tools.top_ops,
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
            detail=detail,
        )


def _op_and_guidance_tools(tool, service, T):  # noqa: N803
    """One op in full, and the guidance."""

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
        detail: T.Detail = "compact",
    ) -> T.Answer:
        """One op in full: every column of its records, the guidance findings naming it with
        their evidence, the shapes it ran with and the kernels it launched (PyTorch)."""
        return call(
            service,
            op_tools.get_op,
            ctx,
            run=run,
            operation=operation,
            host=host,
            program_id=program_id,
            precision=precision,
            view=view,
            infeed_outfeed=infeed_outfeed,
            significant_digits=significant_digits,
            detail=detail,
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
        detail: T.Detail = "compact",
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
            detail=detail,
        )


def _compare_tool(tool, service, T):  # noqa: N803
    """Two runs, hosts or steps."""

    @tool()
    def compare(
        ctx: T.Context,
        base: Annotated[str, T.Field(description="the base run")],
        run: T.Run,
        base_host: T.Host = "",
        host: T.Host = "",
        base_step: T.Step = None,
        step: T.Step = None,
        level: Annotated[Literal["op", "program"], T.BeforeValidator(lower)] = "op",
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
            op_tools.compare,
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
