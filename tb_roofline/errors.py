"""Errors users can see. Readers raise the plain ones; the service maps them to public errors.

Public errors derive from `tensorboard.errors.PublicError` (like TensorBoard's own plugins) and
carry an HTTP status and a short machine-readable code; the plugin turns them into JSON.
"""

from __future__ import annotations

from tensorboard import errors as tb_errors


class ProfileFormatError(ValueError):
    """The file is not a readable profile (corrupt, truncated, empty, wrong format)."""

    # Whether the file's layout itself says so (damaged, or cut short), rather than what a
    # reader found in its contents: readers/xspace/tpu/file.py sets it.
    from_layout: bool = False


class ProfileIncompleteError(ProfileFormatError):
    """The file changed while we read it, or is too young to judge: it is still being written."""


class ProfileStoreTimeoutError(ProfileFormatError):
    """The store holding the file did not answer in time (after its retries): nothing is known
    about the file itself, so the service tries it again after a while, not at once."""


class ProfileTooLargeError(ProfileFormatError):
    """The file exceeds the configured size limit."""


class ProfileOutOfMemoryError(ProfileTooLargeError):
    """Reading the file ran out of memory: maybe the other requests' fault, so the service
    tries it again after a while (not at once: it would hold the server at its limit)."""


class NotFoundError(tb_errors.NotFoundError):
    code = "not_found"


class InvalidArgumentError(tb_errors.InvalidArgumentError):
    code = "invalid_argument"


class BadProfileError(tb_errors.PublicError):
    http_code = 422
    code = "bad_profile"


class BadDeviceFileError(tb_errors.PublicError):
    """A device file (roofline_device.json, TB_ROOFLINE_DEVICE_FILE) that cannot be used."""

    http_code = 422
    code = "bad_device_file"


class BadWorkloadFileError(tb_errors.PublicError):
    """A workload file (roofline_workload.json, --workload-file) that cannot be used."""

    http_code = 422
    code = "bad_workload_file"


class BadEngineMetricsFileError(tb_errors.PublicError):
    """An engine metrics file (engine_metrics.prom, --engine-metrics) that cannot be used."""

    http_code = 422
    code = "bad_engine_metrics_file"


class BadModelConfigFileError(tb_errors.PublicError):
    """A model config (model_config.json, --model-config) that cannot be used."""

    http_code = 422
    code = "bad_model_config_file"


class ProfileIncompletePublicError(tb_errors.PublicError):
    http_code = 503
    code = "profile_incomplete"


class TooLargeError(tb_errors.PublicError):
    http_code = 413
    code = "too_large"


class StorageError(tb_errors.PublicError):
    """The logdir's storage cannot be listed (a remote store unreachable, a package missing)."""

    http_code = 502
    code = "storage_error"


# How long a remote file's failure (a timeout, an unreadable object) is remembered before
# the file is read again (serve/service/hosts.py), as the message says.
REMOTE_ERROR_RETRY_S = 60.0


class ListingInProgressError(tb_errors.PublicError):
    """The logdir's first listing (a remote store) has not finished: no run is known yet."""

    http_code = 503
    code = "listing_in_progress"


class StorageTimeoutPublicError(tb_errors.PublicError):
    """The remote store did not answer a read in time (a gateway timeout, not a bad file)."""

    http_code = 504
    code = "storage_timeout"


class RowsUnavailableError(tb_errors.PublicError):
    """Op rows kept where a host was read (a Dask worker: table/held_rows.py) could not be
    brought here: the cluster or the worker is gone. The hosts are read again on the next
    request."""

    http_code = 503
    code = "rows_unavailable"


def to_public(exc: ProfileFormatError, what: str) -> tb_errors.PublicError:
    """Name the file (`what`) in the message users see."""
    if isinstance(exc, ProfileStoreTimeoutError):
        return StorageTimeoutPublicError(
            f"{what}: {exc} (retried after {REMOTE_ERROR_RETRY_S:g} s)"
        )
    if isinstance(exc, ProfileIncompleteError):
        return ProfileIncompletePublicError(f"{what}: {exc} (still being written? retry shortly)")
    if isinstance(exc, ProfileTooLargeError):
        return TooLargeError(f"{what}: {exc}")
    return BadProfileError(f"{what}: {exc}")


def error_code(exc: tb_errors.PublicError) -> str:
    return getattr(exc, "code", None) or {400: "invalid_argument", 404: "not_found"}.get(
        exc.http_code, "error"
    )
