"""The device groups of a collective, in every form XLA writes them: size and count.

XLA names the groups of a collective in one of these forms (xla/hlo/ir/replica_group.cc;
HloInstructionProto field numbers in protos/hlo.proto):

| form | proto | text |
|---|---|---|
| explicit lists | `replica_groups` (49) or `collective_device_list.replica_groups` (87) | `replica_groups={{0,1},{2,3}}` |
| iota | `iota_collective_device_list` (92) or `collective_device_list.iota_replica_group_list` | `replica_groups=[2,4]<=[4,2]T(1,0)` |
| mesh axes | `mesh_axes_replica_group_list` (93) | `replica_groups=mesh['a'=4,'b'=2] {'b'}` |
| pairs | `source_target_pairs` (52) | `source_target_pairs={{0,1},{1,2}}` |

The iota form states `[groups, devices per group]` before `<=`. The mesh form groups the
devices that differ only along the named axes: per group the product of those axes' sizes (a
sub-axis `'a':(pre)size` counts its `size`), groups = all devices of the mesh / that. A
collective-permute moves along its source -> target pairs; its "groups" are the pairs.
No form named (`replica_groups={}`): every device takes part, which the caller must supply.
"""  # noqa: E501 (a table)

from __future__ import annotations

import dataclasses
import math
import re


@dataclasses.dataclass(frozen=True)
class Groups:
    size: int  # devices per group (n); 2 for a pair
    count: int  # groups (pairs of a collective-permute)
    form: str  # "list", "iota", "mesh" or "pairs"
    axes: tuple = ()  # the mesh axes grouped over (mesh form only)


def from_proto(p) -> Groups | None:
    """The groups an HloInstructionProto names; None when it names none."""
    if len(p.source_target_pairs):
        return Groups(2, len(p.source_target_pairs), "pairs")
    for lists in (p.replica_groups, p.collective_device_list.replica_groups):
        if len(lists) and len(lists[0].replica_ids):
            return Groups(len(lists[0].replica_ids), len(lists), "list")
    for iota in (p.iota_collective_device_list, p.collective_device_list.iota_replica_group_list):
        if iota.num_devices_per_group > 0:
            return Groups(int(iota.num_devices_per_group), int(iota.num_replica_groups), "iota")
    mesh = p.mesh_axes_replica_group_list
    if len(mesh.mesh.axes) and len(mesh.axes):
        sizes = [int(a.size) for a in mesh.mesh.axes]
        names = [a.name for a in mesh.mesh.axes]
        grouped = [
            (
                names[a.mesh_axis_index],
                int(a.sub_axis_info.size)
                if a.HasField("sub_axis_info")
                else sizes[a.mesh_axis_index],
            )
            for a in mesh.axes
        ]
        return _mesh(sizes, grouped)
    return None


def _mesh(sizes: list, grouped: list) -> Groups | None:
    devices = math.prod(sizes)
    n = math.prod(size for _, size in grouped)
    if n < 1 or devices % n:
        return None
    return Groups(n, devices // n, "mesh", tuple(name for name, _ in grouped))


_LISTS = re.compile(r"(replica_groups|source_target_pairs)=\{((?:\{[0-9, ]*\},?\s*)*)\}")
_IOTA = re.compile(r"replica_groups=\[(\d+),(\d+)\]<=")
_MESH = re.compile(r"replica_groups=mesh\[([^\]]*)\][^{]*\{([^}]*)\}")
_MESH_AXIS = re.compile(r"'([^']*)'\s*=\s*(\d+)")
_GROUP_AXIS = re.compile(r"'([^']*)'(?:\s*:\s*\((\d+)\)(\d+))?")


def from_text(text: str) -> Groups | None:
    """The groups an instruction's HLO text names; None when it names none."""
    m = _LISTS.search(text)
    if m is not None:
        lists = re.findall(r"\{([0-9, ]*)\}", m.group(2))
        if lists and lists[0].strip():
            size = len([x for x in lists[0].split(",") if x.strip()])
            if m.group(1) == "source_target_pairs":
                return Groups(2, len(lists), "pairs")
            return Groups(size, len(lists), "list")
    m = _IOTA.search(text)
    if m is not None:
        return Groups(int(m.group(2)), int(m.group(1)), "iota")
    m = _MESH.search(text)
    if m is not None:
        axes = {name: int(size) for name, size in _MESH_AXIS.findall(m.group(1))}
        grouped = [
            (name, int(sub) if sub else axes.get(name, 0))
            for name, _, sub in _GROUP_AXIS.findall(m.group(2))
        ]
        if axes and grouped and all(size for _, size in grouped):
            return _mesh(list(axes.values()), grouped)
    return None
