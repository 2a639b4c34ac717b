"""Device files: peaks the profile does not carry (CPUs, unknown GPUs), measured or configured.

A device file is JSON (UTF-8), by convention named `roofline_device.json`:

    {
      "tb_roofline_device_file": 1,            # optional format marker; if present, must be 1
      "type": "Intel Xeon Gold 6338 (2 sockets)",  # shown as the device name
      "kind": "cpu",                           # cpu | gpu | tpu | unknown (required)
      "num_cores": 1,                          # how many such devices a host has (default 1)
      "source": "measured",                    # default source of every peak: measured | user |
                                               # datasheet (default "user")
      "default_precision": "fp32",             # optional; else the first compute entry
      "compute": {                             # GFLOP/s per precision (dense)
        "fp32": 2150.0,
        "fp64": {"gflops": 1080.0, "source": "measured"}
      },
      "memories": {                            # GB/s (1e9 B/s) per memory
        "hbm": {"name": "DRAM", "gbs": 180.0}, # `hbm` is the main-memory roof, whatever its
        "l3": 900.0                            # kind; other ids are extra roofs
      },
      "notes": "free text",                    # optional
      "measurement": {...}                     # optional, free-form (written by calibrate)
    }

Precisions: fp64, fp64_tc, fp32, fp32_tc, tf32, bf16, fp16, fp8, int8 (and `default` for one
figure that covers all). Peaks are per device (per CPU: the whole machine as one device).

Where a run's device file is found (`find_device_file`): the nearest `roofline_device.json`
from the profile's directory up to the logdir (a file beside a profile is the most specific),
else the path in the environment variable `TB_ROOFLINE_DEVICE_FILE`.
"""

from __future__ import annotations

import json
import os
import posixpath
import re
import tempfile

from tb_roofline import settings, storage
from tb_roofline.devices.bounded_json import parse_json_file
from tb_roofline.devices.interconnect import TOPOLOGY_KINDS, LinkTopology
from tb_roofline.devices.precision import CEILING_PRECISIONS
from tb_roofline.devices.spec import ComputePeak, DeviceInfo, MemoryPeak

FILE_NAME = "roofline_device.json"
ENV_VAR = settings.DEVICE_FILE
FORMAT_KEY = "tb_roofline_device_file"
FORMAT_VERSION = 1
KINDS = ("cpu", "gpu", "tpu", "unknown")
SOURCES = ("measured", "user", "datasheet")
TOP_KEYS = (
    FORMAT_KEY,
    "type",
    "kind",
    "num_cores",
    "source",
    "default_precision",
    "compute",
    "memories",
    "notes",
    "measurement",
)
COMPUTE_PRECISIONS = CEILING_PRECISIONS + ("default",)
_MEMORY_ID = re.compile(r"^[a-z][a-z0-9_]{0,31}$")
MAX_FILE_BYTES = 1 << 20
PEAKS_UNKNOWN_MESSAGE = (
    "peaks unknown: this profile does not carry the device's peaks. Run `tb-roofline calibrate` "
    f"on the machine (it writes {FILE_NAME}) and put the file next to the profile or in a "
    f"parent folder up to the logdir, or point {ENV_VAR} at a device file"
)


class DeviceFileError(ValueError):
    """A device file that cannot be used; the message names the file and the offending field,
    never the file's values or unknown key names (the path may be a symlink to any JSON)."""


KNOWN_MEMORY_IDS = frozenset(
    {
        "hbm",
        "dram",
        "l1",
        "l2",
        "l3",
        "shared",
        "host",
        "interconnect",
        "cmem_read",
        "cmem_write",
        "vmem_read",
        "vmem_write",
        "vmem",
        "cmem",
        "sram",
        "mcdram",
    }
)
# Keys a message may name (any other key of the file is named by its position).
KNOWN_KEYS = (
    frozenset(TOP_KEYS + COMPUTE_PRECISIONS + ("gflops", "gbs", "name", "source"))
    | KNOWN_MEMORY_IDS
)


def _kind_of(value) -> str:
    """What a JSON value is, without its text."""
    return {
        bool: "true/false",
        str: "a string",
        list: "a list",
        dict: "an object",
        type(None): "null",
    }.get(type(value), "a number")


def _unknown(keys) -> str:
    return f"{len(keys)} unknown key(s)"


MAX_PEAK = 1e12  # GFLOP/s or GB/s of one device: a zettaFLOP/s, far above any chip
MAX_CORES = 1 << 20


def _positive(value, where: str, unit: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise DeviceFileError(f"{where}: must be a number of {unit}, not {_kind_of(value)}")
    if not 0 < value <= MAX_PEAK:  # compared as numbers: a huge integer is never a float
        raise DeviceFileError(
            f"{where}: must be a positive finite number of {unit}, at most {MAX_PEAK:.0e}"
        )
    return float(value)


def _source(value, where: str) -> str:
    if value not in SOURCES:
        raise DeviceFileError(f"{where}: source must be one of {', '.join(SOURCES)}")
    return value


def device_from_dict(data, origin: str = "device file") -> DeviceInfo:
    """Validate a parsed device file and build its DeviceInfo; DeviceFileError on any problem."""
    kind, dtype, num_cores, default_source = _header(data, origin)
    compute = _compute_entries(data, origin, default_source)
    memories = _memory_entries(data, origin, default_source, kind)
    if not compute and not memories:
        raise DeviceFileError(f"{origin}: no peaks: give at least one compute or memory peak")
    if memories and not any(m.id == "hbm" for m in memories):
        raise DeviceFileError(
            f"{origin}: memories need an 'hbm' entry (the main-memory roof: DRAM on a CPU)"
        )
    default = data.get("default_precision")
    if default is not None:
        if not any(c.precision == default for c in compute):
            raise DeviceFileError(f"{origin}: default_precision is not one of the compute entries")
        compute.sort(key=lambda c: c.precision != default)  # stable: the default first
    return DeviceInfo(
        type=dtype.strip(), kind=kind, num_cores=num_cores, compute=compute, memories=memories
    )


def _header(data, origin: str):
    """(kind, type, num_cores, default source) of a device file, its top level checked."""
    if not isinstance(data, dict):
        raise DeviceFileError(f"{origin}: the top level must be a JSON object")
    unknown = sorted(set(data) - set(TOP_KEYS))
    if unknown:
        raise DeviceFileError(f"{origin}: {_unknown(unknown)}; allowed: {', '.join(TOP_KEYS)}")
    if FORMAT_KEY in data and data[FORMAT_KEY] != FORMAT_VERSION:
        raise DeviceFileError(
            f"{origin}: {FORMAT_KEY} is not {FORMAT_VERSION}; this version "
            f"of tb-roofline reads format {FORMAT_VERSION}"
        )
    kind = data.get("kind")
    if kind not in KINDS:
        raise DeviceFileError(f"{origin}: kind must be one of {', '.join(KINDS)}")
    dtype = data.get("type", kind.upper() if kind != "unknown" else "Device")
    if not isinstance(dtype, str) or not dtype.strip():
        raise DeviceFileError(f"{origin}: type must be a non-empty string")
    num_cores = data.get("num_cores", 1)
    if (
        isinstance(num_cores, bool)
        or not isinstance(num_cores, int)
        or not 1 <= num_cores <= MAX_CORES
    ):
        raise DeviceFileError(f"{origin}: num_cores must be an integer from 1 to {MAX_CORES}")
    default_source = _source(data.get("source", "user"), f"{origin}: source")
    for key in ("notes",):
        if key in data and not isinstance(data[key], str):
            raise DeviceFileError(f"{origin}: {key} must be a string")
    if "measurement" in data and not isinstance(data["measurement"], dict):
        raise DeviceFileError(f"{origin}: measurement must be an object")
    return kind, dtype, num_cores, default_source


def _compute_entries(data: dict, origin: str, default_source: str) -> list[ComputePeak]:
    compute_in = data.get("compute", {})
    if not isinstance(compute_in, dict):
        raise DeviceFileError(f"{origin}: compute must be an object of precision -> GFLOP/s")
    compute = []
    for i, (prec, entry) in enumerate(compute_in.items()):
        if prec not in COMPUTE_PRECISIONS:  # not named: the file's own text is never quoted
            raise DeviceFileError(
                f"{origin}: compute entry {i + 1}: unknown precision; use "
                f"one of {', '.join(COMPUTE_PRECISIONS)}"
            )
        where = f"{origin}: compute.{prec}"
        src = default_source
        if isinstance(entry, dict):
            extra = sorted(set(entry) - {"gflops", "source"})
            if extra:
                raise DeviceFileError(f"{where}: {_unknown(extra)}; allowed: gflops, source")
            if "gflops" not in entry:
                raise DeviceFileError(f"{where}: missing gflops")
            src = _source(entry.get("source", default_source), where)
            entry = entry["gflops"]
        compute.append(ComputePeak(prec, _positive(entry, where, "GFLOP/s"), src))
    return compute


def _memory_entries(data: dict, origin: str, default_source: str, kind: str) -> list[MemoryPeak]:
    memories_in = data.get("memories", {})
    if not isinstance(memories_in, dict):
        raise DeviceFileError(f"{origin}: memories must be an object of memory id -> GB/s")
    memories = []
    for i, (mid, entry) in enumerate(memories_in.items()):
        if not _MEMORY_ID.match(str(mid)):
            raise DeviceFileError(
                f"{origin}: memories entry {i + 1}: a memory id is lower-case letters, digits and _"
            )
        # A memory id is named when it is one tb-roofline knows, else by its position.
        where = f"{origin}: memories." + (mid if mid in KNOWN_MEMORY_IDS else f"entry {i + 1}")
        default_name = ("DRAM" if kind == "cpu" else "HBM") if mid == "hbm" else mid.upper()
        name, src, topo = default_name, default_source, None
        if isinstance(entry, dict):
            allowed = {"gbs", "name", "source"} | (
                {"topology", "links"} if mid in _LINKS else set()
            )
            extra = sorted(set(entry) - allowed)
            if extra:
                raise DeviceFileError(
                    f"{where}: {_unknown(extra)}; allowed: {', '.join(sorted(allowed))}"
                )
            topo = _topology(entry, where)
            if "gbs" not in entry:
                raise DeviceFileError(f"{where}: missing gbs")
            name = entry.get("name", default_name)
            if not isinstance(name, str) or not name.strip():
                raise DeviceFileError(f"{where}: name must be a non-empty string")
            src = _source(entry.get("source", default_source), where)
            entry = entry["gbs"]
        memories.append(MemoryPeak(mid, name, _positive(entry, where, "GB/s"), src, topology=topo))
    return memories


_LINKS = ("interconnect",)


def _topology(entry: dict, where: str) -> LinkTopology | None:
    """A link's topology (`"topology": "torus", "links": 4`: devices/interconnect.py), None
    when the entry gives none (the link's figure then holds for every group)."""
    if "topology" not in entry and "links" not in entry:
        return None
    kind, links = entry.get("topology"), entry.get("links")
    if kind not in TOPOLOGY_KINDS:
        raise DeviceFileError(f"{where}: topology must be one of {', '.join(TOPOLOGY_KINDS)}")
    if type(links) is not int or links < 1:
        raise DeviceFileError(f"{where}: links must be a positive whole number of links")
    return LinkTopology(kind, links)


def load_device_file(path: str) -> DeviceInfo:
    """Read and validate a device file (a local path or a URL). DeviceFileError names the
    file and the problem."""
    name = os.path.basename(path)
    try:
        size = storage.stat(path).st_size
        if size > MAX_FILE_BYTES:
            raise DeviceFileError(f"{path}: {size} bytes is too large for a device file")
        with storage.open_binary(path) as f:
            text = f.read(MAX_FILE_BYTES + 1).decode("utf-8")
    except OSError as exc:
        raise DeviceFileError(f"{path}: cannot read device file: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise DeviceFileError(f"{path}: not UTF-8 text") from None
    data = parse_json_file(text, path, DeviceFileError, KNOWN_KEYS)
    return device_from_dict(data, origin=name if os.path.dirname(path) == "" else path)


def device_to_dict(device: DeviceInfo, notes: str = "", measurement: dict | None = None) -> dict:
    """The device-file form of a DeviceInfo (what `load_device_file` reads back)."""
    sources = {c.source for c in device.compute} | {m.source for m in device.memories}
    top_source = sources.pop() if len(sources) == 1 else "user"
    out = {
        FORMAT_KEY: FORMAT_VERSION,
        "type": device.type,
        "kind": device.kind,
        "num_cores": max(1, device.num_cores),
        "source": top_source,
    }
    if device.compute:
        out["default_precision"] = device.compute[0].precision
    out["compute"] = {
        c.precision: (
            c.gflops if c.source == top_source else {"gflops": c.gflops, "source": c.source}
        )
        for c in device.compute
    }
    out["memories"] = {
        m.id: {"name": m.name, "gbs": m.gbs}
        | ({} if m.source == top_source else {"source": m.source})
        for m in device.memories
    }
    if notes:
        out["notes"] = notes
    if measurement:
        out["measurement"] = measurement
    device_from_dict(out, "generated device file")  # never write what we could not read
    return out


def write_device_file(
    path: str, device: DeviceInfo, notes: str = "", measurement: dict | None = None
) -> str:
    """Write atomically (a temporary file renamed over the target); returns the path. The file
    is readable as any new file is (0666 less the umask, usually 0644): another user's
    TensorBoard reads it, while the temporary file's own mode would be 0600."""
    data = device_to_dict(device, notes, measurement)
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".roofline_device.", suffix=".tmp", dir=folder)
    try:
        if hasattr(os, "fchmod"):
            os.fchmod(fd, 0o666 & ~_umask())
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(data, f, indent=2)
            f.write("\n")
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return path


def _umask() -> int:
    """This process's umask, read without changing it where Linux tells it."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _is_within(path: str, root: str) -> bool:
    try:
        return os.path.commonpath([path, root]) == root
    except ValueError:  # different drives
        return False


def find_device_file(
    profile_path: str, logdir: str | None, environ=None, isfile=None
) -> str | None:
    """The device file that applies to a profile, or None.

    Looks for `roofline_device.json` in the profile's directory (or the directory itself when
    `profile_path` is one), then each parent up to and including `logdir`; never above the
    logdir (a profile outside the logdir gets only its own directory searched). Then the path
    in TB_ROOFLINE_DEVICE_FILE; a set variable that names no file is an error, not a silent
    fallback. For a remote profile (a URL) `isfile(url)` says which files exist (the service
    passes the last listing's device files, so the lookup costs no request).
    """
    environ = os.environ if environ is None else environ
    if storage.is_remote(profile_path):
        found = _find_remote(profile_path, logdir, isfile or _remote_isfile)
    else:
        found = nearest_file(profile_path, logdir, FILE_NAME)
    if found:
        return found
    env_path = settings.text(ENV_VAR, environ)
    if env_path:
        exists = (
            _remote_isfile(env_path) if storage.is_remote(env_path) else os.path.isfile(env_path)
        )
        if not exists:
            raise DeviceFileError(f"{ENV_VAR}={env_path!r} does not name a readable file")
        return env_path
    return None


def nearest_file(profile_path: str, logdir: str | None, file_name: str) -> str | None:
    """The nearest local file named `file_name` from the profile's folder (the folder itself
    when `profile_path` is one) up to and including the logdir, never above it: how the
    device, workload and engine-metrics files that apply to a profile are found."""
    start = os.path.realpath(profile_path)
    if not os.path.isdir(start):
        start = os.path.dirname(start)
    root = os.path.realpath(logdir) if logdir else None
    folder = start
    while True:
        candidate = os.path.join(folder, file_name)
        if os.path.isfile(candidate):
            return candidate
        if root is None or folder == root or not _is_within(folder, root):
            return None
        parent = os.path.dirname(folder)
        if parent == folder:
            return None
        folder = parent


def _find_remote(profile_url: str, logdir: str | None, isfile) -> str | None:
    """The same walk up on URLs (`s3://bucket/a/b/x.xplane.pb`: b/, a/, then the logdir)."""
    scheme, rest = storage.split_url(profile_url)
    root = (
        storage.split_url(logdir.rstrip("/"))[1] if logdir and logdir.startswith(scheme) else None
    )
    folder = posixpath.dirname(rest.rstrip("/"))
    while folder:
        candidate = scheme + folder + "/" + FILE_NAME
        if isfile(candidate):
            return candidate
        if root is None or folder == root or not folder.startswith(root + "/"):
            return None
        folder = posixpath.dirname(folder)
    return None


def _remote_isfile(url: str) -> bool:
    try:
        storage.stat(url)
        return True
    except OSError:
        return False


def unknown_device(kind: str = "cpu", type_name: str = "CPU", num_cores: int = 1) -> DeviceInfo:
    """A device without peaks: the 'peaks unknown, calibrate or configure' state."""
    return DeviceInfo(type=type_name, kind=kind, num_cores=num_cores)
