"""The HTTP routes: thin handlers over `RooflineService`, one table mounted by the TensorBoard
plugin (`serve/web/plugin.py`) and by `tb-roofline serve` (`serve/web/standalone.py`).

Like TensorBoard's scalars plugin, each handler parses parameters, calls a plain function and
serialises its answer. Errors become JSON with a fitting status, so one bad run never breaks
the page or the other runs.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import logging
import mimetypes
import os
import urllib.parse

from tensorboard import errors as tb_errors
from werkzeug import wrappers

from tb_roofline import errors, storage
from tb_roofline.serve.service.core import RooflineService

# tb_roofline/static: the package's, three levels above this file (serve/web/routes.py).
STATIC_DIR = os.path.join(
    os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "static"
)
logger = logging.getLogger(__name__)


NOSNIFF = ("X-Content-Type-Options", "nosniff")


def _json_response(payload, status=200, headers=None):
    body = payload if isinstance(payload, (bytes, str)) else json.dumps(payload, allow_nan=False)
    return wrappers.Response(
        body,
        status=status,
        content_type="application/json",
        headers=[NOSNIFF] + list(headers or []),
    )


class _NotModified(wrappers.Response):
    """A 304 that keeps its Content-Type: TensorBoard's security middleware wants one on every
    response (a warning per request today, an error in TensorBoard 3), and werkzeug drops it
    from 304s as an entity header (RFC 9110 allows it: it describes the cached copy)."""

    def __init__(self, content_type: str, headers):
        super().__init__(status=304, headers=headers)
        self._cached_type = content_type

    def get_wsgi_headers(self, environ):
        headers = super().get_wsgi_headers(environ)
        headers["Content-Type"] = self._cached_type
        return headers


def error_answer(exc: tb_errors.PublicError) -> tuple[int, dict]:
    """(status, JSON body as plain Python) of a request that raised `exc`."""
    body = {"error": {"status": exc.http_code, "code": errors.error_code(exc), "message": str(exc)}}
    return exc.http_code, body


def _error_response(exc: tb_errors.PublicError):
    status, body = error_answer(exc)
    return _json_response(body, status=status)


def internal_error(exc: Exception) -> tb_errors.PublicError:
    """A bug, as the 500 that names it."""
    err = tb_errors.PublicError(f"internal error: {type(exc).__name__}: {exc}")
    err.http_code = 500
    err.code = "internal"
    return err


def _handler(fn):
    """Wrap a route: public errors become JSON errors, bugs a JSON 500 naming the exception."""

    # werkzeug's stub names a function of the request alone; at run time it passes the
    # arguments before the request through, so a method (self, request) is what it documents.
    @wrappers.Request.application  # type: ignore[arg-type]
    def wrapped(self, request):
        try:
            with storage.request_deadline():  # a slow store cannot hold the request forever
                return fn(self, request)
        except tb_errors.PublicError as exc:
            return _error_response(exc)
        except MemoryError:
            pass  # answered below, outside this block: the failed request's memory is free
        except Exception as exc:  # a bug: say what, keep serving
            logger.exception("tb-roofline: %s failed", request.path)
            return _error_response(internal_error(exc))
        logger.error("tb-roofline: %s ran out of memory", request.path)
        return _error_response(
            errors.TooLargeError(
                "not enough memory to answer this request: the profile is too large for this "
                "server (lower TB_ROOFLINE_MEMORY_BUDGET_MB, TB_ROOFLINE_MAX_FILE_MB or "
                "TB_ROOFLINE_MAX_EVENTS, or give the server more memory)"
            )
        )

    wrapped.__name__ = fn.__name__
    return wrapped


class RooflineRoutes:
    """The route table both servers mount: TensorBoard's plugin (under
    /data/plugin/roofline/) and `tb-roofline serve` (at its root). Each route is a WSGI app."""

    def __init__(self, service: RooflineService):
        self._service = service
        self._static_cache: dict = {}

    def table(self) -> dict:
        return {
            "/index.js": self._serve_index,
            "/static/*": self._serve_static,
            "/runs": self._runs,
            "/hosts": self._hosts,
            "/progress": self._progress,
            "/device": self._device,
            "/program": self._program,
            "/ops": self._ops,
            "/diagnostics": self._diagnostics,
            "/comm": self._comm,
            "/guidance": self._guidance,
            "/report": self._report,
            "/export": self._export,
            "/compare": self._compare,
        }

    # --- static files -------------------------------------------------------------------
    @_handler
    def _serve_index(self, request):
        return self._static_file(request, "index.js")

    @_handler
    def _serve_static(self, request):
        prefix = "/static/"
        rel = request.path[request.path.index(prefix) + len(prefix) :]
        return self._static_file(request, rel)

    def _static_file(self, request, rel: str):
        """Our frontend files: gzip when the browser takes it, revalidated by ETag (a reload
        costs a 304, not the 840 kB of the chart library)."""
        if "\x00" in rel:  # the OS refuses such a path: there is no such file
            raise errors.NotFoundError("no such static file")
        path = os.path.realpath(os.path.join(STATIC_DIR, rel))
        if not path.startswith(os.path.realpath(STATIC_DIR) + os.sep) or not os.path.isfile(path):
            raise errors.NotFoundError(f"no static file {rel!r}")
        st = os.stat(path)
        key = (path, st.st_size, st.st_mtime_ns)
        entry = self._static_cache.get(path)
        if entry is None or entry[0] != key:
            with open(path, "rb") as f:
                body = f.read()
            etag = hashlib.sha1(body).hexdigest()[:20]
            entry = (key, body, gzip.compress(body, 6, mtime=0), etag)
            self._static_cache[path] = entry
        _, body, zipped, etag = entry
        content_type = mimetypes.guess_type(path)[0] or "application/octet-stream"
        if path.endswith((".js", ".mjs")):
            content_type = "text/javascript"
        headers = [
            NOSNIFF,
            ("Cache-Control", "no-cache"),
            ("ETag", f'"{etag}"'),
            ("Vary", "Accept-Encoding"),
        ]
        if request.if_none_match.contains(etag):
            return _NotModified(content_type, headers)
        if "gzip" in request.headers.get("Accept-Encoding", "") and len(zipped) < len(body):
            return wrappers.Response(
                zipped, content_type=content_type, headers=headers + [("Content-Encoding", "gzip")]
            )
        return wrappers.Response(body, content_type=content_type, headers=headers)

    # --- data ---------------------------------------------------------------------------
    @_handler
    def _runs(self, request):
        return _json_response(self._service.list_runs())

    @_handler
    def _hosts(self, request):
        return _json_response(self._service.hosts(_arg(request, "run")))

    @_handler
    def _progress(self, request):
        return _json_response(
            self._service.reading(_arg(request, "run")), headers=[("Cache-Control", "no-store")]
        )

    @_handler
    def _device(self, request):
        return self._encoded(request, "device")

    @_handler
    def _program(self, request):
        return self._encoded(request, "program")

    @_handler
    def _ops(self, request):
        return self._encoded(request, "ops")

    @_handler
    def _diagnostics(self, request):
        return self._encoded(request, "diagnostics")

    @_handler
    def _comm(self, request):
        return self._encoded(request, "comm")

    def _encoded(self, request, kind: str):
        """An answer the service keeps encoded (and gzipped for clients that take it, as
        browsers do): a warm request costs a lookup, not JSON for every op."""
        run, host = _run_host(request)
        params = _kind_params(request, kind)
        body, zipped = self._service.encoded(kind, run, host, _accepts_gzip(request), **params)
        headers = [("Vary", "Accept-Encoding")] + ([("Content-Encoding", "gzip")] if zipped else [])
        return _json_response(body, headers=headers)

    @_handler
    def _guidance(self, request):
        run, host = _run_host(request)
        return _json_response(self._service.encoded_guidance(run, host, _infeed(request)))

    @_handler
    def _report(self, request):
        run, host = _run_host(request)
        top = _int_arg(request, "top")
        return _json_response(
            self._service.report(run, host, _infeed(request), 20 if top is None else top)
        )

    @_handler
    def _compare(self, request):
        run, host = _run_host(request)
        f = _filters(request)
        answer = self._service.compare(
            _arg(request, "base"),
            run,
            request.args.get("base_host", ""),
            host,
            request.args.get("base_step"),
            request.args.get("step"),
            request.args.get("level", "op"),
            _infeed(request),
            f["view"],
            f["categories"],
            f["bound_by"],
            f["name"],
            f["offset"],
            f["limit"],
            change=request.args.get("change", ""),
        )
        return _json_response(answer)

    @_handler
    def _export(self, request):
        run, host = _run_host(request)
        level = request.args.get("level", "op")
        fmt = request.args.get("format", "csv")
        # Streamed: every row, a chunk at a time (serve/service/export.py), never capped.
        body, content_type, filename = self._service.export_stream(
            run, host, _infeed(request), level=level, fmt=fmt, **_filters(request)
        )
        return wrappers.Response(
            body,
            content_type=content_type,
            headers=[NOSNIFF, ("Content-Disposition", _attachment(filename))],
        )


PLAIN_ROUTES = ("hosts", "device", "program", "ops", "diagnostics", "comm", "guidance")


def plain_answer(service: RooflineService, route: str, query: dict) -> tuple[int, object]:
    """(status, body as plain Python) of a GET of a data route in PLAIN_ROUTES with `query`:
    what its handler would send, the same parameters and errors, never encoded (the HTML
    report embeds it and encodes the whole once)."""
    from werkzeug.test import EnvironBuilder

    request = EnvironBuilder(path=f"/{route}", query_string=query).get_request()
    try:
        with storage.request_deadline():
            return 200, _plain(service, route, request)
    except tb_errors.PublicError as exc:
        return error_answer(exc)
    except Exception as exc:  # a bug: the answer names it, as the route's would
        logger.exception("tb-roofline: %s failed", route)
        return error_answer(internal_error(exc))


def _plain(service: RooflineService, route: str, request):
    if route not in PLAIN_ROUTES:
        raise ValueError(f"no plain answer for the route {route!r}")
    if route == "hosts":
        return service.hosts(_arg(request, "run"))
    run, host = _run_host(request)
    if route == "guidance":
        return service.guidance(run, host, _infeed(request))
    return service.answer(route, run, host, capped=True, **_kind_params(request, route))


def _kind_params(request, kind: str) -> dict:
    """The service's parameters of an answer of `kind` (`RooflineService.encoded`)."""
    if kind == "program":
        return {
            "include_infeed_outfeed": _infeed(request),
            "offset": _int_arg(request, "offset") or 0,
            "limit": _int_arg(request, "limit"),
        }
    if kind == "ops":
        return {
            "include_infeed_outfeed": _infeed(request),
            "rows": request.args.get("rows", ""),
            **_filters(request),
        }
    if kind == "comm":
        return {"include_infeed_outfeed": _infeed(request)}
    return {}


def _attachment(filename: str) -> str:
    """Content-Disposition for any file name: headers are Latin-1, so a name outside ASCII goes
    in RFC 5987's `filename*` (UTF-8), with an ASCII `filename` for older clients."""
    ascii_name = "".join(c if " " <= c < "\x7f" and c not in '"\\' else "_" for c in filename)
    if ascii_name == filename:
        return f'attachment; filename="{filename}"'
    return (
        f'attachment; filename="{ascii_name}"; '
        f"filename*=UTF-8''{urllib.parse.quote(filename, safe='')}"
    )


def _accepts_gzip(request) -> bool:
    return request.accept_encodings["gzip"] > 0


def _arg(request, name, required=True):
    value = request.args.get(name)
    if value is None and required:
        raise errors.InvalidArgumentError(f"missing parameter '{name}'")
    return value


def _run_host(request):
    return _arg(request, "run"), request.args.get("host", "")


def _infeed(request) -> bool:
    value = request.args.get("infeed_outfeed", "include")
    if value not in ("include", "exclude"):
        raise errors.InvalidArgumentError(
            f"infeed_outfeed must be 'include' or 'exclude', not {value!r}"
        )
    return value == "include"


def _multi(request, name) -> list[str]:
    values: list = []
    for v in request.args.getlist(name):
        values.extend(x for x in v.split(",") if x)
    return values


def _int_arg(request, name):
    value = request.args.get(name)
    if value in (None, ""):
        return None
    try:
        number = int(value)
    except ValueError:
        raise errors.InvalidArgumentError(f"'{name}' must be an integer, not {value!r}") from None
    if number < 0:
        raise errors.InvalidArgumentError(f"'{name}' must not be negative")
    return number


def _filters(request) -> dict:
    return {
        "categories": _multi(request, "category"),
        "bound_by": _multi(request, "bound_by"),
        "precisions": _multi(request, "precision"),
        "caveats": _multi(request, "caveat"),
        "name": request.args.get("name", ""),
        "offset": _int_arg(request, "offset") or 0,
        "limit": _int_arg(request, "limit"),
        "view": request.args.get("view", "op"),
    }
