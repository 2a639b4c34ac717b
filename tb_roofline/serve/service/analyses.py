"""Analyses of (run, hosts) for the service: made from the read profiles (`hosts.py`) with a
device file's peaks where a profile lacks them (`model/records/device_overrides.py`), and kept by
the identities of every file behind them.

Analyses sit in a byte-bounded memory cache; those too large for it are held for the last
runs in use (`HELD_ANALYSES`, each while asked for within `OVERSIZE_HOLD_S`, together within
the conversion budget), so a page load, a compare's two sides and two runs taken in turns
convert once each; one over the budget alone says so in its diagnostics (`analysis_not_kept`).
"""

from __future__ import annotations

import dataclasses
import os
import time
from typing import TYPE_CHECKING

from tb_roofline import errors, settings, storage
from tb_roofline.diagnostics import Diagnostic
from tb_roofline.serve.caches.memory import ByteLRU, HeldAnalyses, memory_budget_bytes, sized
from tb_roofline.serve.service.discovery import ALL_HOSTS, Run
from tb_roofline.serve.service.hosts import HostReader, KeyLocks

if TYPE_CHECKING:
    from tb_roofline.table.op_table import ProfileData

OVERSIZE_HOLD_S = 60.0  # how long an analysis too large for its cache stays unused
HELD_ANALYSES = 2  # too large for their cache: the last runs asked for (a compare's two sides)


@dataclasses.dataclass
class Inputs:
    run: Run
    files: list
    extra: list  # diagnostics about files left out (deleted since the last scan)
    signatures: tuple  # (path, size, version) of each file and device file


class Analyses:
    """The analyses of one logdir: (run, hosts) -> (signatures, Analysis, whether every host
    was read), made under a lock per key (answer locks first, then analyses, then hosts)."""

    def __init__(
        self,
        logdir: str,
        index,
        device_file: str | None,
        hosts_reader: HostReader,
        locks: KeyLocks,
    ):
        self.logdir, self.index, self.device_file = logdir, index, device_file
        self.hosts_reader, self.locks = hosts_reader, locks
        # Bounded by bytes: a long-running TensorBoard must not grow without bound, and
        # twenty small runs must not push each other out.
        self.cache = ByteLRU(memory_budget_bytes("analyses"))
        # Analyses too large for their cache, kept for the last two runs in use.
        self.held = HeldAnalyses(keep=HELD_ANALYSES, hold_s=OVERSIZE_HOLD_S)
        self._fetches = 0  # rows kept on a cluster fetched so far (`_remeasure_fetched`)
        # (run, hosts) -> {host: why} of the last analysis handed out that left hosts out:
        # what a command's exit status and `/progress` name (one entry per selection asked).
        self.partial: dict = {}

    def inputs(self, run: Run, files: list) -> Inputs:
        """What an analysis of these files of `run` is made from, with each file's identity."""
        extra = []
        if len(files) > 1:  # a host file deleted since the last scan: the others still count
            present = [f for f in files if f.stat is not None or os.path.exists(f.path)]
            extra = [
                Diagnostic(
                    "warning",
                    "host_missing",
                    f"host {f.host!r} skipped: its file is gone",
                    skipped_host=f.host,
                    hosts_total=len(files),
                )
                for f in files
                if f not in present
            ]
            files = present or files
        sigs = tuple(self.hosts_reader.signature(run, f) for f in files)
        sigs += self._device_file_signatures(files)
        return Inputs(run, files, extra, sigs)

    def entry(self, inputs: Inputs):
        """(Analysis, whether every host was read: only then may answers go to disk)."""
        run, files, sigs = inputs.run, inputs.files, inputs.signatures
        key = (run.run, tuple(f.host for f in files))
        self._remeasure_fetched()
        made = self._cached(key, sigs)
        if made is None:
            # Memory before the lock (answer lock, budget, analysis lock, host locks: one order).
            with (
                self.hosts_reader.budget.admit(self.hosts_reader.pending_bytes(run, files)),
                self.locks.hold(("analysis",) + key),
            ):
                try:
                    made = self._cached(key, sigs) or self._analyse(inputs, key)
                except errors.RowsUnavailableError:  # a worker holding rows is gone: its
                    made = self._analyse(inputs, key)  # hosts (marked lost) are read again
        self._note_partial(key, made[0])
        return made

    def _remeasure_fetched(self):
        """Charge the caches again once rows kept on a Dask cluster were fetched into their
        entries (a drill-down into a run whose rows the workers keep: table/held_rows.py), so
        what those rows take counts against the caches' bytes as a local conversion's does."""
        from tb_roofline.table.held_rows import fetch_count

        now = fetch_count()
        if now == self._fetches:
            return
        self._fetches = now
        self.cache.recharge(self.cache.keys(), lambda v: sized(v[1]))
        self.hosts_reader.cache.recharge(
            self.hosts_reader.cache.keys(),
            lambda entry: sized(entry.data) if entry.data is not None else (0, {}),
        )

    def _note_partial(self, key, analysis):
        """Remember the hosts this analysis leaves out or reads in part (or that it has
        none), by their diagnostics."""
        skipped = {
            d.skipped_host or d.partial_host: d.message
            for d in analysis.diagnostics
            if (d.skipped_host or d.partial_host) is not None
        }
        if not skipped:
            self.partial.pop(key, None)
        else:
            self.partial[key] = skipped

    def hosts_not_read(self, run_name: str | None = None) -> dict:
        """{run: {host: why}} of the analyses handed out (of `run_name` only, if given) that
        left hosts out (a file damaged, too large, gone or unreadable) or read them in part (a
        file cut short: its complete planes only)."""
        out: dict = {}
        for (run, _), skipped in list(self.partial.items()):
            if run_name is None or run == run_name:
                out.setdefault(run, {}).update(skipped)
        return out

    def _analyse(self, inputs: Inputs, key):
        """Read the files (cached), apply device files, run the model, keep the analysis."""
        profiles, extra = self._profiles(inputs)
        result = self._model(profiles, inputs.files)
        result.diagnostics = extra + result.diagnostics
        # Every host read whole: only then may answers go to disk (one served from there
        # would not tell a command or `/progress` the hosts it leaves out).
        complete = not extra and not any(d.partial_host for d in result.diagnostics)
        self._keep(key, inputs.signatures, result, complete)
        return result, complete

    def _profiles(self, inputs: Inputs) -> tuple[list, list]:
        """(the hosts' profiles, device files applied; the diagnostics with a line for each
        host of a pod that could not be read). One file that cannot be read raises."""
        run, files = inputs.run, inputs.files
        profiles, extra = [], list(inputs.extra)
        hosts_total = len(files) + sum(1 for d in extra if d.skipped_host is not None)
        entries = self.hosts_reader.read(run, files)
        for f, entry in zip(files, entries):
            try:
                profiles.append(_host_named(self._with_device_file(f, entry.result()), f.host))
            except (
                errors.BadProfileError,
                errors.ProfileIncompletePublicError,
                errors.TooLargeError,
                errors.StorageTimeoutPublicError,
            ) as exc:
                if len(files) == 1:
                    raise
                extra.append(
                    Diagnostic(
                        "error",
                        exc.code,
                        f"host {f.host!r} skipped: {exc}",
                        skipped_host=f.host,
                        hosts_total=hosts_total,
                    )
                )
        if not profiles:
            raise errors.BadProfileError(
                f"run {run.run!r}: no host could be read: " + "; ".join(d.message for d in extra)
            )
        return profiles, extra

    def _model(self, profiles: list, files: list):
        """The model's analysis of the hosts; a pod's cached hosts measured again after it."""
        from tb_roofline.model.records import roofline

        try:
            return roofline.analyze(
                profiles, host_label=files[0].host if len(files) == 1 else ALL_HOSTS
            )
        finally:  # their rows are views of the run's table now (if it failed, maybe): anew
            if len(files) > 1:
                try:
                    self.hosts_reader.remeasure(files)
                except Exception:  # noqa: BLE001 (never in place of the analysis's own error)
                    import logging

                    logging.getLogger(__name__).exception(
                        "tb-roofline: re-measuring the cached hosts failed"
                    )

    def _keep(self, key, sigs, result, complete: bool) -> None:
        """The analysis into the cache (replacing an older version's; sized once, here), or,
        too large for it, held for the runs in use, so a page load, a compare or two runs
        taken in turns convert once; too large for both, a warning on the result."""
        size, roots = sized(result)
        if self.cache.put(key, (sigs, result, complete), size, roots):
            return
        full = size + sum(r.nbytes for r in roots.values())
        limit = self.hosts_reader.budget.total
        if not self.held.put(key, (sigs, result, complete), full, limit, time.monotonic()):
            result.diagnostics = result.diagnostics + [
                Diagnostic(
                    "warning",
                    "analysis_not_kept",
                    f"this run's analysis takes about {full / 2**20:,.0f} MB, more than the "
                    f"memory for analyses ({settings.MEMORY_CACHE_MB.name}) and the memory "
                    f"budget ({settings.MEMORY_BUDGET_MB.name}): it is not kept, so each "
                    "request analyses it again; raise one of them to keep it",
                )
            ]

    def _cached(self, key, sigs):
        cached = self.cache.get(key)
        if cached is None:
            cached = self.held.get(key, time.monotonic())
        if cached is not None and cached[0] == sigs and not _rows_lost(cached[1]):
            return cached[1], cached[2]
        return None

    def _device_file_signatures(self, files) -> tuple:
        """A new or edited device file must show at once: it is part of the cache key."""
        from tb_roofline.devices import device_file

        out = []
        for f in files:
            try:
                path = self.find_device_file(f.path)
            except device_file.DeviceFileError:
                path = None
            if not path:
                continue
            known = self.index.device_files.get(path) if self.index else None
            try:
                st = known if known is not None else storage.stat(path)
            except OSError:
                continue
            out.append((path,) + storage.version(st))
        return tuple(out)

    def find_device_file(self, profile_path: str):
        from tb_roofline.devices import device_file

        if self.device_file:
            return self.device_file
        if storage.is_remote(profile_path):  # the listing knows the device files: no request
            known = self.index.device_files if self.index else {}
            return device_file.find_device_file(
                profile_path, self.logdir, isfile=known.__contains__
            )
        return device_file.find_device_file(profile_path, self.logdir)

    def _with_device_file(self, hostfile, data: ProfileData) -> ProfileData:
        """Profiles without peaks (CPU, unknown GPUs) take them from a device file: the CLI's
        --device-file, else roofline_device.json next to the profile or above it up to the
        logdir, else TB_ROOFLINE_DEVICE_FILE (model/records/device_overrides.py places the rows)."""
        from tb_roofline.devices import device_file
        from tb_roofline.model.records import device_overrides

        if not device_overrides.needs_device_file(data, forced=bool(self.device_file)):
            return data
        path = None
        try:
            path = self.find_device_file(hostfile.path)
            device = device_file.load_device_file(path) if path else None
        except device_file.DeviceFileError as exc:
            message = str(exc)  # name the file, but not where it lives on the server
            for full in filter(None, (path, self.device_file, settings.text(settings.DEVICE_FILE))):
                message = message.replace(full, os.path.basename(full))
            raise errors.BadDeviceFileError(f"device file: {message}") from None
        if device is None:
            return device_overrides.without_peaks(data)
        return device_overrides.with_device(data, device, os.path.basename(path))


def _rows_lost(analysis) -> bool:
    """Whether rows the analysis fetches for its drill-downs were kept on a Dask worker that
    is gone (then the run is read and analysed again)."""
    from tb_roofline.table.held_rows import lost

    scope = analysis.scope
    return scope is not None and any(lost(t) for t in scope.tables.values())


def _host_named(data: ProfileData, host: str) -> ProfileData:
    """The profile with its `truncated` diagnostics naming the host they leave in part."""
    if not any(d.code == "truncated" and d.partial_host is None for d in data.diagnostics):
        return data
    return dataclasses.replace(
        data,
        diagnostics=[
            dataclasses.replace(d, partial_host=host) if d.code == "truncated" else d
            for d in data.diagnostics
        ],
    )
