"""A writer still at work on a file, for tests of "still being written": a thread that moves
the file's modification time forward every few hundredths of a second (what appending does),
without changing its bytes, so that the same bytes are judged growing or, once it stops,
damaged (`readers/files.py` `StillWritten`)."""

from __future__ import annotations

import contextlib
import os
import threading


@contextlib.contextmanager
def being_written(*paths, every_s: float = 0.02):
    stop = threading.Event()

    def write():
        while not stop.wait(every_s):
            for path in paths:
                os.utime(path)  # now: as a write would leave it

    thread = threading.Thread(target=write, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
