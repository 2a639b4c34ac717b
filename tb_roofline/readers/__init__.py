"""Readers turn one profile file into `ProfileData` (an op table plus spans and peaks).

They know nothing of HTTP or of the roofline model; they raise `ProfileFormatError`s.
"""

from __future__ import annotations

import gc
import os
from typing import TYPE_CHECKING

from tb_roofline import storage
from tb_roofline.errors import ProfileFormatError, ProfileOutOfMemoryError, ProfileStoreTimeoutError

if TYPE_CHECKING:  # numpy is imported by the reader that runs, not by this package
    from tb_roofline.table.op_table import ProfileData


def read_profile_file(
    path: str,
    fmt: str,
    host: str,
    max_bytes: int | None = None,
    progress=None,
    plan=None,
    windows=None,
) -> ProfileData:
    """`progress(done, total)`, when given, is called as the reader advances; `plan` is an
    XSpace file's layout when the caller has worked it out (readers/units.py); `windows` a
    serving model's sliding-window layers (readers/model_config.py, Kineto traces only).

    Running out of memory is a `ProfileOutOfMemoryError` (a 413: the server keeps serving the
    rest; the service remembers failures per file version, so a file that takes a lot of
    memory to refuse is not read again by every request)."""
    out_of_memory = False
    try:
        return _read(path, fmt, host, max_bytes, progress, plan, windows)
    except storage.StorageTimeoutError as exc:  # the store stalled mid-read: a 504, not a 422
        raise ProfileStoreTimeoutError(f"{os.path.basename(path)}: {exc}") from None
    except MemoryError:
        out_of_memory = True
    if out_of_memory:  # outside the except block: the read's frames and arrays are gone now
        gc.collect()
    raise ProfileOutOfMemoryError(
        f"{os.path.basename(path)}: not enough memory to read it (the server ran out of "
        "memory; lower the limits TB_ROOFLINE_MAX_FILE_MB or TB_ROOFLINE_MAX_EVENTS, or give "
        "TensorBoard more memory)"
    )


def _read(path, fmt, host, max_bytes, progress, plan=None, windows=None) -> ProfileData:
    if fmt == "xplane":
        from tb_roofline.readers.xspace.read import read_xspace_file

        return read_xspace_file(path, host, max_bytes=max_bytes, progress=progress, plan=plan)
    if fmt == "kineto":
        from tb_roofline.readers.kineto import read_kineto_file

        return read_kineto_file(path, host, max_bytes=max_bytes, progress=progress, windows=windows)
    raise ProfileFormatError(f"{fmt} profiles are not supported")
