"""Connecting to a Dask scheduler (`execute/cluster.py` keeps the clients and runs the units).

- The address: `tcp://HOST:PORT` (a bare `HOST:PORT` means tcp), or `tls://HOST:PORT` with the
  TLS files of Dask's own configuration (`distributed.comm.tls.ca-file`,
  `.tls.client.cert`, `.tls.client.key`, e.g. `DASK_DISTRIBUTED__COMM__TLS__CA_FILE`): the
  security object `distributed.security.Security()` reads them. Anything else (`http://h:p`,
  a missing port, a scheme Dask has not) is a clear error at once, naming what is wrong.
- Reachability first: a refused TCP connection (tcp:// and tls://) fails at once, where Dask
  itself would retry until its timeout.
- The connection within TB_ROOFLINE_CLUSTER_CONNECT_S: a peer that accepts and never answers
  is given up after that, on a thread we stop waiting for.
- distributed's and tornado's loggers at CRITICAL once a client connects: a lost cluster is one
  `ClusterError` of ours, not dozens of reconnection tracebacks on stderr.
"""

from __future__ import annotations

import logging
import threading

DASK_SCHEMES = ("tcp", "tls", "ucx", "inproc", "ws", "wss")
_TLS_KEYS = (
    "distributed.comm.tls.ca-file",
    "distributed.comm.tls.client.cert",
    "distributed.comm.tls.client.key",
)


class ClusterError(RuntimeError):
    """The cluster cannot convert (scheduler unreachable, no usable worker, stalled)."""


def full_address(addr: str) -> str:
    """`addr` with its scheme (tcp:// when it has none); a ClusterError saying what is wrong
    with an address Dask cannot use."""
    scheme, sep, rest = addr.partition("://")
    if not sep:
        scheme, rest = "tcp", addr
    if scheme not in DASK_SCHEMES:
        raise ClusterError(
            f"Dask scheduler address {addr!r}: {scheme}:// is not a Dask "
            "protocol; give tcp://HOST:8786 (or tls://HOST:8786 with Dask's "
            "TLS configuration)"
        )
    if scheme in ("tcp", "tls"):
        host, _, port = rest.rpartition(":")
        if not host or not port.isdigit() or "/" in rest:
            raise ClusterError(f"Dask scheduler address {addr!r} is not {scheme}://HOST:PORT")
    return f"{scheme}://{rest}"


def host_port(addr_full: str) -> tuple[str, int] | None:
    scheme, _, rest = addr_full.partition("://")
    if scheme not in ("tcp", "tls"):
        return None  # ucx://, inproc://, ws://: Dask's own connection says what is wrong
    host, _, port = rest.rpartition(":")
    return host.strip("[]"), int(port)


def reachable(addr_full: str, timeout: float):
    """Fail at once on a refused connection (Dask itself retries until its timeout)."""
    hp = host_port(addr_full)
    if hp is None:
        return
    import socket

    try:
        socket.create_connection(hp, timeout=timeout).close()
    except OSError as exc:
        raise ClusterError(
            f"Dask scheduler {addr_full} is unreachable: {exc.strerror or type(exc).__name__}"
        ) from None


def security(addr_full: str):
    """Dask's security object for a tls:// address (None otherwise): the TLS files Dask's
    configuration names; a ClusterError naming the settings when they are missing."""
    if not addr_full.startswith("tls://"):
        return None
    from distributed.security import Security

    sec = Security()
    # Dask sets the TLS fields by name at run time; its role view is the typed way to read them.
    tls = sec.get_tls_config_for_role("client")
    if not tls["ca_file"] or not tls["cert"]:
        raise ClusterError(
            f"the Dask scheduler {addr_full} speaks TLS: set Dask's TLS configuration for this "
            f"client ({', '.join(_TLS_KEYS)}; e.g. the environment variables "
            "DASK_DISTRIBUTED__COMM__TLS__CA_FILE, DASK_DISTRIBUTED__COMM__TLS__CLIENT__CERT, "
            "DASK_DISTRIBUTED__COMM__TLS__CLIENT__KEY)"
        )
    return sec


def quiet():
    """distributed's loggers and tornado's at CRITICAL: the roots and every one below them
    that distributed's logging configuration gave a level of its own (`tornado.application`
    logs the callbacks that fail as the process exits)."""
    names = [
        n
        for n in list(logging.root.manager.loggerDict)
        if n.partition(".")[0] in ("distributed", "tornado")
    ]
    for name in ["distributed", "tornado"] + names:
        logging.getLogger(name).setLevel(logging.CRITICAL)


def connect(addr: str, timeout: float):
    """A new `distributed.Client` for `addr` within `timeout`, or a ClusterError."""
    try:
        from distributed import Client
    except ImportError:
        raise ClusterError(
            f"converting on the Dask cluster {addr} needs the Python package "
            "distributed: pip install 'tb-roofline[dask]'"
        ) from None
    addr_full = full_address(addr)
    sec = security(addr_full)
    reachable(addr_full, timeout)
    quiet()
    return _connect(Client, addr_full, addr, timeout, sec)


def _connect(Client, addr_full: str, addr: str, timeout: float, sec):
    """Client(addr) within `timeout`: Dask's own timeout covers the TCP connection, not a
    peer that accepts and then never answers the handshake, so it runs on a thread we stop
    waiting for (a client it makes after that is closed at once)."""
    box: dict = {}
    given_up = threading.Event()

    def run():
        try:
            client = Client(addr_full, timeout=timeout, set_as_default=False, security=sec)
        except Exception as exc:  # noqa: BLE001 (OSError, TimeoutError, a version mismatch)
            box["error"] = exc
            return
        box["client"] = client
        if given_up.is_set():
            client.close()

    thread = threading.Thread(target=run, name="tb-roofline-dask-connect", daemon=True)
    thread.start()
    thread.join(timeout + 1)
    if thread.is_alive():
        given_up.set()
        raise ClusterError(
            f"the Dask scheduler {addr} did not answer within {timeout:g} s "
            "(is a Dask scheduler listening there?)"
        )
    if "error" in box:
        exc = box["error"]
        raise ClusterError(
            f"cannot connect to the Dask scheduler {addr}: {type(exc).__name__}: {str(exc)[:300]}"
        )
    return box["client"]
