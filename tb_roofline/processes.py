"""Worker processes, how they start and how they end with their parent: shared by the pool
that reads files on all cores (execute/pool.py) and the Kineto reader's batches read on all
cores (readers/kineto/batch_workers.py). Forked (cheap: they inherit the imported modules)
when no thread but ours runs; beside other threads (TensorBoard serves from threads) a fork
could copy a lock another thread holds, so workers then come from a fork server started
once."""

from __future__ import annotations

import os
import signal
import sys
import threading
import time

from tb_roofline import settings


def workers() -> int:
    """Worker processes to use: TB_ROOFLINE_WORKERS, else the cores this process may run on."""
    wanted = int(settings.number(settings.WORKERS))  # 0: not set (or not a count: warned)
    if wanted >= 1:
        return wanted
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


PR_SET_PDEATHSIG = 1  # linux/prctl.h


def _die_with_parent(parent: int) -> None:
    """Linux: the kernel kills this worker (SIGKILL) the moment its parent dies, even when
    the worker is deep in a C call that holds the GIL for minutes (a thread cannot run then).
    The parent is the fork server, or the process itself where the pool forks (then only
    from a thread that lives as long as the process: `context`). Elsewhere, a no-op."""
    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError, TypeError):
        return
    if os.getppid() != parent:  # died before the call: no signal will come
        os._exit(0)


def _let_fork_server_go() -> None:
    """A fork server's worker holds the server's "alive" pipe (multiprocessing passes it to
    every child, so the server lives while any of them does); the server waits for all its
    holders to close it. Closed here, the server ends with the process that started it, and
    its workers with the server (the parent-death signal): else each kept the other alive,
    minutes after TensorBoard was killed."""
    try:
        from multiprocessing import forkserver
    except ImportError:
        return
    server = getattr(forkserver, "_forkserver", None)
    fd = getattr(server, "_forkserver_alive_fd", None)
    if server is not None and isinstance(fd, int) and os.getppid() != 1:
        try:
            os.close(fd)
        except OSError:
            pass
        server._forkserver_alive_fd = None


def watch_parent(signal_on_death: bool = False):
    """In each worker: exit once the process that started it is gone (TensorBoard killed,
    the fork server gone with it), so no worker outlives the server: the kernel's
    parent-death signal where the thread that started the worker lives as long as its
    process (`signal_on_death`: the signal follows the thread, not the process), and a thread
    watching for a new parent."""
    parent = os.getppid()
    if signal_on_death:
        _die_with_parent(parent)
        _let_fork_server_go()

    def watch():
        while os.getppid() == parent:
            time.sleep(0.5)
        os._exit(0)

    threading.Thread(target=watch, name="tb-roofline-parent-watch", daemon=True).start()


def context(preload: list[str]):
    import multiprocessing  # (here: a read that needs no pool does not pay for it)

    methods = multiprocessing.get_all_start_methods()
    others = [
        t
        for t in threading.enumerate()
        if t is not threading.current_thread() and not t.name.startswith("tb-roofline")
    ]
    if "fork" in methods and not others:
        return multiprocessing.get_context("fork")
    if "forkserver" in methods:
        ctx = multiprocessing.get_context("forkserver")
        ctx.set_forkserver_preload(preload)
        return ctx
    return multiprocessing.get_context("spawn")
