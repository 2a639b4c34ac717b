"""A conversion cut into units of work that any executor runs (execute/pool.py on the local
cores, execute/cluster.py on a Dask cluster), and each file's result made from its units'
outcomes. The readers decide here, once, how each file is read; the executors see only
`Unit`s (a picklable function and its arguments), never a format.

Each local XSpace file's layout is worked out once (`readers/xspace/read.py` `plane_plan`).
A file with TensorCore planes is read plane by plane: one unit per plane, or one unit for all
of a file's planes when there are enough files to keep every worker busy (its op metadata is
then decoded once). Anything else (a Kineto trace, an XLA GPU/CPU XSpace, which takes its plan
along, a remote file) is one unit that reads it whole.

Each file's tables leave with their rows summed per key (`summed`, table/key_sums.py), made
where the rows are: what a worker sends back is then all the analysis's key sums need.
"""

from __future__ import annotations

import dataclasses
from typing import Callable

from tb_roofline import storage
from tb_roofline.errors import ProfileFormatError
from tb_roofline.readers.xspace import read as xspace
from tb_roofline.readers.xspace.tpu import file as tpu_file
from tb_roofline.readers.xspace.tpu.plane import clear_info_cache
from tb_roofline.table.key_sums import with_row_sums
from tb_roofline.table.op_table import ProfileData


@dataclasses.dataclass(frozen=True)
class Unit:
    """One unit of work: `fn(*args)` in any process. `job` is the index of the file it reads,
    `path` that file (named in progress and in a worker's access fault), `work` its bytes
    (0 when unknown), which decide whether a pool is worth starting."""

    job: int
    fn: Callable
    args: tuple
    path: str
    work: int


@dataclasses.dataclass
class Conversion:
    """The units of a set of files, and how each file's result is made from them."""

    jobs: list
    units: list
    early: dict  # job index -> the error found while planning (no unit runs for it)
    plans: dict  # job index -> its `tpu_file.FilePlan` (planes read apart)
    whole_files: bool = False  # each planned file in one unit, merged where the unit runs

    def finish(self, job: int, outcomes: list):
        """A file's ProfileData (or the exception to report) from its units' outcomes."""
        return _finish(self.plans.get(job), outcomes)

    @property
    def one_unit_each(self) -> bool:
        """Whether every file is read by one unit (its result is the file's whole profile)."""
        return len(self.units) == len({u.job for u in self.units})

    def merged_here(self, job: int) -> bool:
        """Whether `finish` merged the file from its planes' parts in this process."""
        return job in self.plans and not self.whole_files

    def release(self) -> None:
        """What this process decoded while planning and running units here: not kept
        between conversions."""
        clear_info_cache()


def plan(jobs: list, workers: int) -> Conversion:
    """jobs: (path, format, host, max_bytes[, windows]) each (`windows`: a serving model's
    sliding-window layers, readers/model_config.py); `workers` the executor's parallelism."""
    early: dict = {}
    plans: dict = {}
    units: list = []
    remote = any(storage.is_remote(job[0]) for job in jobs)
    for i, (path, fmt, host, max_bytes, *extra) in enumerate(jobs):
        try:
            file_plan = xspace.plane_plan(path, fmt, host, max_bytes)
        except ProfileFormatError as exc:
            early[i] = exc
            continue
        if file_plan is None or not file_plan.cores:
            work = file_plan.size if file_plan else 0 if remote else _size(path)
            args = (path, fmt, host, max_bytes, file_plan, extra[0] if extra else None)
            units.append(Unit(i, read_whole, args, str(path), work))
        else:
            plans[i] = file_plan
    whole_files = len(plans) >= workers
    for i, file_plan in plans.items():
        units.extend(_plane_units(i, file_plan, whole_files))
    units.sort(key=lambda u: u.job)
    return Conversion(list(jobs), units, early, plans, whole_files)


def _plane_units(job: int, file_plan, whole_file: bool) -> list:
    path, size = file_plan.path, file_plan.size
    if whole_file:
        span = file_plan.cores[-1][2] - file_plan.cores[0][1]
        return [Unit(job, convert_file, (path, file_plan), str(path), span)]
    return [
        Unit(job, tpu_file.convert_plane_at, (path, start, end, core, size), str(path), end - start)
        for core, start, end in file_plan.cores
    ]


def read_whole(path, fmt, host, max_bytes, file_plan=None, windows=None):
    from tb_roofline.readers import read_profile_file

    return summed(
        read_profile_file(path, fmt, host, max_bytes=max_bytes, plan=file_plan, windows=windows)
    )


def convert_file(path, file_plan) -> ProfileData:
    """A whole file in one unit: its planes converted and merged where the unit runs (a
    worker), so what comes back is the host's table as the model holds it, not its planes'
    parts for the calling process to copy into one."""
    planes = [
        tpu_file.convert_plane_at(path, start, end, core, file_plan.size)
        for core, start, end in file_plan.cores
    ]
    return summed(tpu_file.merge_planes(file_plan, planes))


def summed(p: ProfileData) -> ProfileData:
    """The profile with each of its tables' rows summed per key (`with_row_sums`)."""
    for table in (p.ops, p.kernels, p.hw_ops):
        with_row_sums(table)
    return p


def _size(path) -> int:
    try:
        return storage.stat(path).st_size
    except OSError:
        return 0


def _finish(file_plan, outs: list):
    if file_plan is None:
        return outs[0]
    if len(outs) == 1 and isinstance(outs[0], ProfileData):  # the whole file in one unit
        try:
            tpu_file.check_unchanged(file_plan)
        except Exception as exc:  # noqa: BLE001 (the file's error, reported with its answer)
            return exc
        return outs[0]
    errors = [o for o in outs if isinstance(o, Exception)]
    if errors:
        if any(isinstance(e, ProfileFormatError) for e in errors):
            return next(e for e in errors if isinstance(e, ProfileFormatError))
        return errors[0]
    try:
        tpu_file.check_unchanged(file_plan)
        return summed(tpu_file.merge_planes(file_plan, outs))
    except Exception as exc:  # noqa: BLE001 (the file's error, reported with its answer)
        return exc
