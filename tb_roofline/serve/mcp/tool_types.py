"""The argument types the MCP tools share (descriptions, ranges, choices matched in any case)
and the answer's: what each tool's input and output schemas publish. The SDK's and
pydantic's modules are imported when a server is built (`arg_types`), not before.
"""

from typing import Annotated, Any, Literal, Optional

from tb_roofline.serve.mcp.shaping import CAVEATS, MAX_LIMIT, VIEWS

IoArg = Literal["include", "exclude"]
DetailArg = Literal["compact", "full"]
# The choices are the model's tuples, read when the module loads (the schema the SDK builds
# lists them); a static checker cannot evaluate them.
ViewArg = Literal[VIEWS]  # type: ignore[valid-type]
CaveatArg = Literal[CAVEATS]  # type: ignore[valid-type]
Answer = dict[str, Any]  # a JSON object: the structured content of a tool's result


def lower(value):
    """Choices are matched without regard to case ("HBM", "hbm")."""
    if isinstance(value, str):
        return value.strip().lower()
    if isinstance(value, list):
        return [lower(v) for v in value]
    return value


def _answer_model():
    """The output schema of every tool: an object with the versions (docs/mcp.md lists each
    tool's other fields)."""
    from pydantic import BaseModel, ConfigDict, Field

    class ToolAnswer(BaseModel):
        model_config = ConfigDict(extra="allow")
        server_version: str = Field(description="tb-roofline's version")
        schema_version: str = Field(description="answers' shape (docs/mcp.md, changelog)")

    return ToolAnswer


def arg_types():
    """The argument types the tools share (descriptions, ranges, choices in any case) and
    the answer's: what the input and output schemas publish."""
    from types import SimpleNamespace

    from mcp.server.mcpserver import Context
    from pydantic import BeforeValidator, Field

    return SimpleNamespace(
        **_common_types(Field, BeforeValidator),
        **_filter_types(Field, BeforeValidator),
        Answer=_answer_model(),
        Context=Context,
        Field=Field,
        BeforeValidator=BeforeValidator,
    )


def _common_types(Field, BeforeValidator) -> dict:  # noqa: N803
    """Run, host, infeed/outfeed, paging, columns and digits."""

    Run = Annotated[str, Field(description="run name exactly as list_runs gives it")]
    Host = Annotated[str, Field(description="one host of the run; '' or '*' = all hosts")]
    Io = Annotated[
        IoArg, BeforeValidator(lower), Field(description="whether infeed/outfeed ops count")
    ]
    Off = Annotated[int, Field(ge=0, description="rows to skip (paging)")]
    Lim = Annotated[
        Optional[int],
        Field(
            ge=0,
            le=MAX_LIMIT,
            description="rows to return (default 10; 0: counts only)",
        ),
    ]
    Cols = Annotated[
        Optional[list[str]],
        Field(description="fields to return; default: the main ones"),
    ]
    Dig = Annotated[
        Optional[int],
        Field(
            ge=0,
            le=17,
            description="significant digits (default 6; 0: full precision)",
        ),
    ]
    Detail = Annotated[
        DetailArg,
        BeforeValidator(lower),
        Field(description="compact (default): the first shapes and kernels, counted; full: all"),
    ]
    return dict(Run=Run, Host=Host, Io=Io, Off=Off, Lim=Lim, Cols=Cols, Dig=Dig, Detail=Detail)


def _filter_types(Field, BeforeValidator) -> dict:  # noqa: N803
    """The view and the filters: categories, bound-by, values, steps, caveats."""
    View = Annotated[
        ViewArg,
        BeforeValidator(lower),
        Field(description="op (default), kernel or kernel_hw (PyTorch GPU traces); any case"),
    ]
    Category = Annotated[
        Optional[list[str]],
        Field(description="keep these categories (facets.category lists the run's); any case"),
    ]
    BoundBy = Annotated[
        Optional[list[str]],
        Field(
            description="keep these: Compute, HBM, ... (facets.bound_by lists the run's); any case"
        ),
    ]
    Values = Annotated[Optional[list[str]], Field(description="keep rows with one of these")]
    Step = Annotated[Optional[str], Field(description="Total (default), Average or a step")]
    Caveats = Annotated[
        Optional[list[CaveatArg]],
        BeforeValidator(lower),
        Field(description="caveat codes to keep, any case; 'none' = rows without a caveat"),
    ]
    return dict(
        View=View, Category=Category, BoundBy=BoundBy, Values=Values, Step=Step, Caveats=Caveats
    )
