"""XSpace files (`*.xplane.pb`): reading the bytes safely, parsing them with our own protobuf
classes, and looking up stat names on a plane. Shared by the TPU reader and the XLA GPU/CPU reader.
"""

from __future__ import annotations

import os

from google.protobuf.message import DecodeError

from tb_roofline import storage
from tb_roofline.errors import ProfileFormatError, ProfileIncompleteError
from tb_roofline.protos import xplane_pb2
from tb_roofline.readers.files import StillWritten, check_profile_file

# What a damaged nested record raises while it is decoded or read.
DAMAGE = (DecodeError, RuntimeError, ValueError, OverflowError)


def read_profile_bytes(path: str, max_bytes: int | None = None) -> tuple[bytes, StillWritten]:
    """(file contents, whether it is still being written: asked when a parse fails), telling
    "still being written" and "too large" apart from the rest."""
    before, young = check_profile_file(path, max_bytes)
    with storage.open_binary(path, size=before.st_size) as f:
        data = f.read()
    after = storage.stat(path)
    if storage.version(after) != storage.version(before) or len(data) != after.st_size:
        raise ProfileIncompleteError(f"{os.path.basename(path)} changed while it was read")
    return data, young


def parse_xspace(data: bytes, name: str, young: StillWritten | bool = False) -> xplane_pb2.XSpace:
    space = xplane_pb2.XSpace()
    try:
        space.ParseFromString(data)
    except (DecodeError, RuntimeError, ValueError) as exc:
        if young:
            raise ProfileIncompleteError(f"{name} does not parse yet") from None
        raise ProfileFormatError(
            f"{name} is not a valid XSpace (truncated or corrupt): {exc}"
        ) from None
    if not space.planes:
        raise ProfileFormatError(f"{name} holds an empty XSpace (no planes)")
    return space


def load_xspace(path: str, max_bytes: int | None = None) -> xplane_pb2.XSpace:
    """Parse the whole file with the full schema."""
    data, young = read_profile_bytes(path, max_bytes)
    return parse_xspace(data, os.path.basename(path), young)


class PlaneStats:
    """Stat-name lookups for one plane (metadata ids are per plane)."""

    def __init__(self, plane: xplane_pb2.XPlane, name: str | None = None):
        self.plane = plane
        self.name = plane.name if name is None else name  # (a metadata view has none)
        self.names = {k: v.name for k, v in plane.stat_metadata.items()}
        self.ids = {v: k for k, v in self.names.items()}

    def value(self, stat):
        kind = stat.WhichOneof("value")
        if kind is None:
            return None
        if kind == "ref_value":
            md = self.plane.stat_metadata.get(stat.ref_value)
            return md.name if md is not None else ""
        return getattr(stat, kind)

    def wanted(self, names) -> dict:
        """{stat id: name} for the given names that this plane defines (cached)."""
        key = tuple(names)
        cache = self.__dict__.setdefault("_wanted", {})
        if key not in cache:
            cache[key] = {self.ids[n]: n for n in names if n in self.ids}
        return cache[key]

    def values_of(self, stats, wanted: dict) -> dict:
        """{name: value} of the stats `wanted` ({stat id: name}) names, the last of a name
        winning (`value`, inlined: an op's metadata holds a dozen stats)."""
        out: dict = {}
        names = self.names
        for stat in stats:
            name = wanted.get(stat.metadata_id)
            if name is not None:
                kind = stat.WhichOneof("value")
                if kind is None:
                    out[name] = None
                elif kind == "ref_value":
                    out[name] = names.get(stat.ref_value, "")
                else:
                    out[name] = getattr(stat, kind)
        return out

    def as_dict(self, stats) -> dict:
        return {self.names.get(s.metadata_id, ""): self.value(s) for s in stats}
