"""`tb-roofline serve LOGDIR`: the Roofline tab without TensorBoard.

A small werkzeug app mounts the route table of `serve/web/routes.py` (the plugin's, unchanged) at
its root and answers `/` with a page that loads the same `index.js` TensorBoard loads. The
frontend finds its API one level above its `static/` folder (static/api.js), so one frontend
serves both. Like `tb-roofline mcp --http`, it is bound to 127.0.0.1 by default and refuses
requests whose Host or Origin header names another site (DNS rebinding: a page elsewhere
must not read the profiles through the user's browser).
"""

from __future__ import annotations

import ipaddress
import json
import os
import sys

from werkzeug import wrappers

from tb_roofline.serve.web.routes import NOSNIFF, STATIC_DIR, RooflineRoutes

LOOPBACK = ("127.0.0.1", "localhost", "::1")
# The MCP SDK's defaults for a server on localhost (mcp/server/transport_security.py), plus
# the names without a port (what a browser sends for port 80).
LOOPBACK_HOSTS = ("127.0.0.1:*", "localhost:*", "[::1]:*", "127.0.0.1", "localhost", "[::1]")
LOOPBACK_ORIGINS = ("http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*")
PAGE_CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data: blob:; connect-src 'self'; object-src 'none'; "
    "base-uri 'self'; frame-ancestors 'self'"
)


def _matches(value: str, patterns) -> bool:
    """MCP's rule: an exact match, or `base:*` for `base:` followed by any port."""
    return any(value == p or (p.endswith(":*") and value.startswith(p[:-1])) for p in patterns)


def _is_wildcard(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_unspecified
    except ValueError:
        return False


def _bracketed(host: str) -> str:
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


class HeaderGuard:
    """The Host and Origin checks: on loopback exactly the MCP server's; bound to a named
    address, that address too; bound to all interfaces (0.0.0.0), any Host (the names the
    machine answers to are unknown), but still no cross-site Origin."""

    def __init__(self, bind_host: str):
        self.any_host = _is_wildcard(bind_host)
        hosts = list(LOOPBACK_HOSTS)
        if bind_host not in LOOPBACK and not self.any_host:
            hosts += [f"{_bracketed(bind_host)}:*", _bracketed(bind_host)]
        self.hosts = hosts
        self.origins = list(LOOPBACK_ORIGINS)

    def refusal(self, request) -> tuple[int, str] | None:
        host = request.headers.get("Host", "")
        if not host:
            return 421, "missing Host header"
        if not self.any_host and not _matches(host, self.hosts):
            return 421, f"Host {host!r} is not this server's (open it as http://127.0.0.1:PORT/)"
        origin = request.headers.get("Origin")
        if (
            origin
            and origin != "null"
            and not (
                _matches(origin, self.origins) or origin in (f"http://{host}", f"https://{host}")
            )
        ):
            return 403, f"Origin {origin!r} may not read this server"
        return None


class StandaloneApp:
    """The WSGI app: `/` the page, the plugin's routes at the root, JSON errors elsewhere."""

    def __init__(self, service, bind_host: str = "127.0.0.1"):
        self.service = service
        self.routes = RooflineRoutes(service).table()
        self.guard = HeaderGuard(bind_host)
        with open(os.path.join(STATIC_DIR, "standalone.html"), "rb") as f:
            self.page = f.read()

    def __call__(self, environ, start_response):
        request = wrappers.Request(environ)
        refused = self.guard.refusal(request)
        if refused is not None:
            return _error(*refused, "forbidden")(environ, start_response)
        if request.method not in ("GET", "HEAD"):
            return _error(
                405,
                f"{request.method} is not served here: the API is read-only",
                "method_not_allowed",
            )(environ, start_response)
        path = request.path
        if path in ("/", "/index.html"):
            return wrappers.Response(
                self.page,
                content_type="text/html; charset=utf-8",
                headers=[
                    NOSNIFF,
                    ("Cache-Control", "no-cache"),
                    ("Content-Security-Policy", PAGE_CSP),
                    ("X-Frame-Options", "SAMEORIGIN"),
                ],
            )(environ, start_response)
        handler = self.routes.get(path)
        if handler is None and path.startswith("/static/"):
            handler = self.routes["/static/*"]
        if handler is None:
            return _error(404, f"no route {path!r}", "not_found")(environ, start_response)
        return handler(environ, start_response)


def _error(status: int, message: str, code: str):
    body = json.dumps({"error": {"status": status, "code": code, "message": message}})
    return wrappers.Response(
        body, status=status, content_type="application/json", headers=[NOSNIFF]
    )


def serve(
    logdir: str,
    host: str = "127.0.0.1",
    port: int = 6007,
    device_file=None,
    workload_file=None,
    out=None,
    engine_metrics_file=None,
    model_config_file=None,
) -> int:
    """Serve until Ctrl-C (or SIGTERM). Port 0 takes a free port; the URL is printed."""
    from werkzeug.serving import make_server

    from tb_roofline.serve.service.core import RooflineService

    service = RooflineService(
        logdir,
        device_file=device_file,
        workload_file=workload_file,
        engine_metrics_file=engine_metrics_file,
        model_config_file=model_config_file,
    )
    app = StandaloneApp(service, host)
    try:
        server = make_server(host, port, app, threaded=True)
    except OSError as exc:  # an unknown address
        sys.stderr.write(
            f"tb-roofline serve: cannot listen on {host}:{port}: {exc.strerror or exc}\n"
        )
        return 2
    except SystemExit:  # werkzeug said why (a port in use) and gave up
        sys.stderr.write(f"tb-roofline serve: cannot listen on {host}:{port}\n")
        return 2
    shown = "127.0.0.1" if _is_wildcard(host) else _bracketed(host)
    if app.guard.any_host:
        sys.stderr.write(
            "tb-roofline serve: listening on all interfaces: anyone who can reach "
            "this machine can read the profiles\n"
        )
    sys.stderr.write(
        f"tb-roofline serve: {logdir} at http://{shown}:{server.server_port}/ (Ctrl-C to stop)\n"
    )
    sys.stderr.flush()
    _stop_on_sigterm()
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


def _stop_on_sigterm():
    """SIGTERM ends the server as Ctrl-C does (its sockets closed, exit code 0)."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        return

    def stop(signum, frame):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stop)


def add_serve_subparser(subparsers):
    p = subparsers.add_parser(
        "serve",
        help="the Roofline tab in a browser, without TensorBoard",
        description="Serve the Roofline page and its HTTP API (docs/http_api.md) for one logdir",
    )
    p.add_argument("logdir", help="TensorBoard logdir (or one run's directory), path or URL")
    p.add_argument(
        "--host",
        default="127.0.0.1",
        help="address to listen on (default 127.0.0.1: this machine only)",
    )
    p.add_argument("--port", type=int, default=6007, help="port (default 6007; 0 = any free)")
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
    from tb_roofline import storage

    problem = storage.directory_problem(args.logdir)
    if problem:
        sys.stderr.write(f"tb-roofline serve: {problem}\n")
        return 2
    if not 0 <= args.port < 65536:
        sys.stderr.write(f"tb-roofline serve: --port {args.port} is not a port\n")
        return 2
    return serve(
        args.logdir,
        args.host,
        args.port,
        args.device_file,
        args.workload_file,
        engine_metrics_file=args.engine_metrics,
        model_config_file=args.model_config,
    )
