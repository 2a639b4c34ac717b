"""Checks every reader makes before reading a profile file: it exists, is not over the size
limit, is not empty; and, when it fails to parse, whether it is still being written (it grows)
rather than damaged (`StillWritten`)."""

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

# A file that fails to parse is still being written (503, retry) only if it changes: its size
# or modification time moved while it was read, or moves while it is watched for GROW_WAIT_S.
# Only a file modified within TB_ROOFLINE_YOUNG_FILE_S is watched (read by
# tb_roofline/settings.py, the one rule for every TB_ROOFLINE_* variable); age alone decides
# nothing: a host file a crashed writer cut short a second ago is damaged (422), as one cut a
# day ago is, and a pod's answer then names it as a host not read.
YOUNG_FILE_S = settings.YOUNG_FILE_S.default
YOUNG_FILE_ENV = settings.YOUNG_FILE_S.name
GROW_WAIT_S = 1.0
GROW_POLL_S = 0.05


def young_file_s() -> float:
    return settings.number(settings.YOUNG_FILE_S)


class StillWritten:
    """Whether a file that failed to parse is still being written: true when it changed
    since `st` was taken, or (a young local file) changes within GROW_WAIT_S of the question.
    Asked (`bool()`) only when a parse fails; the first answer is kept. Plain data: it
    travels to a worker process with the plan it belongs to."""

    def __init__(self, path: str, st):
        self.path, self.version = path, storage.version(st)
        self.young = time.time() - st.st_mtime < young_file_s()
        self.answer: bool | None = None

    def __bool__(self) -> bool:
        if self.answer is None:
            self.answer = self._changes()
        return self.answer

    def _changes(self) -> bool:
        waited = 0.0
        while True:
            try:
                if storage.version(storage.stat(self.path)) != self.version:
                    return True
            except OSError:
                return True  # gone or replaced while read: not a damaged file's answer
            # An object store's files appear whole (no one sees one half written): no watch.
            if not self.young or storage.is_remote(self.path) or waited >= GROW_WAIT_S:
                return False
            time.sleep(GROW_POLL_S)
            waited += GROW_POLL_S


def check_profile_file(
    path: str, max_bytes: int | None = None
) -> tuple[os.stat_result, StillWritten]:
    """(stat of the file, whether it is still being written: asked when a parse fails);
    raises the reader errors users see. `path` may be a URL (`tb_roofline.storage`)."""
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
    young = StillWritten(path, st)
    if st.st_size == 0:
        if young:
            raise ProfileIncompleteError(f"{base} is empty")
        raise ProfileFormatError(f"{base} is empty (0 bytes)")
    return st, young
