"""One MCP tool call: the plain function run with the server's `RooflineService`, its answer
with the versions as a tool result, the service's public errors as results with `isError`
(the HTTP API's message, status and code, and the valid values of the argument at fault), and
progress notifications ("k of N hosts read") to a client that gave a progressToken. A failure,
even a bug or running out of memory, answers that one call; the server keeps serving.
"""

import contextvars
import json
import logging

from tensorboard import errors as tb_errors

from tb_roofline import errors, storage
from tb_roofline.serve.mcp import envelope
from tb_roofline.serve.mcp import tools as mcp_tools

logger = logging.getLogger(__name__)

_PROGRESS: contextvars.ContextVar = contextvars.ContextVar("tb_roofline_mcp_progress", default=None)


def reading(host: str, done: int, total: int, hosts_done=None, hosts_total=None):
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
    return _result(envelope.error_answer(exc, status, errors.error_code(exc), valid), True)


def argument_error(tool: str, exc, parameters: dict | None):
    """A tool result with isError for arguments the input schema refused (`exc`: pydantic's
    ValidationError, raised by the SDK before the tool runs), in the structure of every other
    error: one message naming each field at fault and why, `field`, and `valid_values` (the
    allowed values of a choice, the tool's arguments for one it does not take)."""
    properties = sorted((parameters or {}).get("properties", {}))
    parts, field, valid = [], None, None
    for err in exc.errors():
        name = ".".join(str(p) for p in err.get("loc", ())) or "arguments"
        if err.get("type") == "extra_forbidden":
            why, choices = f"{tool} takes no argument {name!r}", properties
        elif err.get("type") == "missing":
            why, choices = f"{name} is required", None
        else:
            why, choices = f"{name}: {err.get('msg', 'invalid value')}", _choices(err)
        parts.append(why)
        if field is None:
            field, valid = name, choices
    message = "invalid arguments: " + "; ".join(parts)
    extra = {"field": field, **({"valid_values": valid} if valid else {})}
    return _result(envelope.error_answer(message, 400, "invalid_argument", extra), True)


def _choices(err: dict) -> list | None:
    """The allowed values pydantic names for a refused choice (a Literal), else None."""
    expected = (err.get("ctx") or {}).get("expected")
    if not isinstance(expected, str) or "'" not in expected:
        return None
    return [v for i, v in enumerate(expected.split("'")) if i % 2 == 1]


def call(service, fn, ctx=None, **kwargs):
    """Run one tool: its answer with the versions, or a tool result with isError carrying
    the HTTP API's message (a bug or a lack of memory answered as the plugin answers it:
    one failed call, the server lives on)."""
    token = _PROGRESS.set(_notifier(ctx))
    try:
        with storage.request_deadline():  # a slow store cannot hold a tool call for ever
            return _result({**fn(service, **kwargs), **envelope.versions()})
    except tb_errors.PublicError as exc:
        return _error(service, exc, kwargs)
    except MemoryError:
        pass  # answered below, outside this block: the failed call's memory is free
    except Exception as exc:  # a bug: say what, keep serving
        logger.exception("tb-roofline mcp: %s failed", fn.__name__)
        exc = envelope.InternalError(f"internal error: {type(exc).__name__}: {exc}")
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
