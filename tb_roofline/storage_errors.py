"""The errors of remote storage (storage.py) and the store's name they carry: their own module,
so that storage_deadline.py raises them without importing storage.py (no import cycle)."""

from __future__ import annotations

import errno
import os


class StorageError(OSError):
    """Remote storage is not usable (missing package, bad URL, unreachable service)."""

    code = errno.EIO

    def __init__(self, message, *more):
        if isinstance(message, int) and more:  # unpickled (OSError pickles (errno, text))
            message = more[0]
        super().__init__(self.code, message)

    def __str__(self):
        return self.strerror


class StorageTimeoutError(StorageError):
    """The store did not answer in time (connect or read timeout, after the retries)."""

    code = errno.ETIMEDOUT


class StorageDeadlineError(StorageTimeoutError):
    """The store kept answering, too slowly: a read or listing ran past its deadline."""


def store_name(url: str) -> str:
    """The store a URL is read from, for messages: the endpoint and the bucket."""
    protocol, _, rest = str(url).partition("://")
    bucket = rest.split("/", 1)[0]
    endpoint = ""
    if protocol in ("s3", "s3a"):
        endpoint = (
            os.environ.get("S3_ENDPOINT") or os.environ.get("AWS_ENDPOINT_URL") or ""
        ).strip()
    return f"{protocol}://{bucket}" + (f" at {endpoint}" if endpoint else "")
