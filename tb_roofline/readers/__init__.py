"""Readers turn one profile file into `ProfileData` (an op table plus spans and peaks).

They know nothing of HTTP or of the roofline model; they raise `ProfileFormatError`s.
"""
from __future__ import annotations

from tb_roofline.errors import ProfileFormatError
from tb_roofline.model.op_table import ProfileData


def read_profile_file(path: str, fmt: str, host: str, max_bytes: int | None = None,
                      progress=None) -> ProfileData:
    """`progress(done, total)`, when given, is called as the reader advances."""
    if fmt == "xplane":
        from tb_roofline.readers.xspace import read_xspace_file
        return read_xspace_file(path, host, max_bytes=max_bytes, progress=progress)
    if fmt == "kineto":
        from tb_roofline.readers.kineto import read_kineto_file
        return read_kineto_file(path, host, max_bytes=max_bytes, progress=progress)
    raise ProfileFormatError(f"{fmt} profiles are not supported")
