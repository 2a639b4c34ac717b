"""Checks every reader makes before reading a profile file: it exists, is not over the size
limit, is not empty; and whether it is young enough that a parse failure means "still being
written" rather than "corrupt"."""

from __future__ import annotations

import os
import time

from tb_roofline import settings, storage
from tb_roofline.errors import (
    ProfileFormatError,
    ProfileIncompleteError,
    ProfileStoreTimeoutError,
    ProfileTooLargeError,
)

# A file modified this recently that fails to parse is probably still being written (503, retry)
# rather than corrupt (422). Writers pause (buffered writes, slow or network disks, a busy
# host), so this is generous; TB_ROOFLINE_YOUNG_FILE_S changes it (read by tb_roofline/settings.py,
# the one rule for every TB_ROOFLINE_* variable). A file whose size or mtime changes while it is
# read is always "still being written", whatever its age.
YOUNG_FILE_S = settings.YOUNG_FILE_S.default
YOUNG_FILE_ENV = settings.YOUNG_FILE_S.name


def young_file_s() -> float:
    return settings.number(settings.YOUNG_FILE_S)


def check_profile_file(path: str, max_bytes: int | None = None) -> tuple[os.stat_result, bool]:
    """(stat of the file, whether it is young); raises the reader errors users see. `path`
    may be a URL (`tb_roofline.storage`)."""
    base = os.path.basename(path)
    try:
        st = storage.stat(path)
    except storage.StorageTimeoutError as exc:  # the store, not the file: a 504, retried later
        raise ProfileStoreTimeoutError(f"cannot read {base}: {exc}") from None
    except (OSError, ValueError) as exc:
        raise ProfileFormatError(
            f"cannot read {base}: {getattr(exc, 'strerror', None) or 'invalid path'}"
        ) from None
    if max_bytes is not None and st.st_size > max_bytes:
        raise ProfileTooLargeError(
            f"{base} is {st.st_size / 2**20:.0f} MiB, over the limit of "
            f"{max_bytes / 2**20:.0f} MiB (set TB_ROOFLINE_MAX_FILE_MB to raise it)"
        )
    young = time.time() - st.st_mtime < young_file_s()
    if st.st_size == 0:
        if young:
            raise ProfileIncompleteError(f"{base} is empty")
        raise ProfileFormatError(f"{base} is empty (0 bytes)")
    return st, young
