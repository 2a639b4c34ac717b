"""The disk cache's data-only encoding: JSON for the structure, numpy's `.npz` (read with
`allow_pickle=False`) for the arrays. Loading an entry runs no code from the entry.

What it holds: None, bool, int, float (NaN and inf included), str, bytes, list, tuple, dict
(any keys), set, numpy arrays (numeric ones in the .npz; object arrays element by element in
the JSON), numpy scalars, and instances of tb_roofline's own plain classes (dataclasses and
classes keeping their state in `__dict__`: ProfileData, OpTable, DeviceInfo, ...). An instance
is rebuilt as pickle would without running any of its methods — `object.__new__` and its
state — and only for a class of a tb_roofline module already imported, whose `__new__` is
object's; anything else in an entry makes it unreadable (a miss).
"""

from __future__ import annotations

import importlib
import io
import json
import re
import sys

import numpy as np

from tb_roofline.table.op_table import constant, is_constant

ARRAY_KINDS = frozenset("biufcUSmM")  # numpy dtypes that hold no Python objects
PACKAGE = "tb_roofline."
_MODULE = re.compile(r"^[a-z_][a-z0-9_]*(\.[a-z_][a-z0-9_]*)*$")


class CodecError(ValueError):
    """An entry holds something this encoding does not (a miss, never an error shown)."""


MAX_CONSTANT_LEN = 2**40  # a constant column's length (it holds one value, whatever it says)


def encode(value) -> bytes:
    """(JSON length, 8 bytes) + JSON + .npz of the arrays."""
    arrays: list = []
    tree = _enc(value, arrays)
    text = json.dumps(tree, separators=(",", ":")).encode()
    buf = io.BytesIO()
    np.savez(buf, **{f"a{i}": a for i, a in enumerate(arrays)})
    return len(text).to_bytes(8, "big") + text + buf.getvalue()


def decode(data: bytes):
    if len(data) < 8:
        raise CodecError("short entry")
    n = int.from_bytes(data[:8], "big")
    if n > len(data) - 8:
        raise CodecError("short entry")
    try:
        tree = json.loads(data[8 : 8 + n])
        with np.load(io.BytesIO(data[8 + n :]), allow_pickle=False) as npz:
            arrays = {k: npz[k] for k in npz.files}
        return _dec(tree, arrays)
    except CodecError:
        raise
    except (ValueError, KeyError, TypeError, AttributeError, OSError, RecursionError) as exc:
        raise CodecError(f"unreadable entry: {type(exc).__name__}") from None


def _enc(v, arrays):
    t = type(v)
    if v is None or t in (bool, int, str):
        return v
    if t is float:
        return v
    if t is list:
        return [_enc(x, arrays) for x in v]
    if t is tuple:
        return {"t": [_enc(x, arrays) for x in v]}
    if t is dict:
        return {"d": [[_enc(k, arrays), _enc(x, arrays)] for k, x in v.items()]}
    if t in (set, frozenset):
        return {"s": [_enc(x, arrays) for x in v], "f": t is frozenset}
    if t in (bytes, bytearray):
        arrays.append(np.frombuffer(bytes(v), np.uint8))
        return {"b": len(arrays) - 1}
    if t is np.ndarray:
        if v.dtype.kind in ARRAY_KINDS and is_constant(v):  # (table/op_table.py): its value
            arrays.append(v[:1].copy())
            return {"r": len(arrays) - 1, "len": len(v)}
        if v.dtype.kind in ARRAY_KINDS:
            arrays.append(v)
            return {"a": len(arrays) - 1}
        if v.dtype != object:
            raise CodecError(f"array of {v.dtype}")
        items = v.ravel().tolist()
        if all(type(x) is str for x in items):
            return {"os": items, "sh": list(v.shape)}
        return {"o": [_enc(x, arrays) for x in items], "sh": list(v.shape)}
    if isinstance(v, np.generic):
        if v.dtype.kind not in ARRAY_KINDS:
            raise CodecError(f"scalar of {v.dtype}")
        arrays.append(np.asarray(v))
        return {"n": len(arrays) - 1}
    module = getattr(t, "__module__", "")
    if module.startswith(PACKAGE) and hasattr(v, "__dict__") and t.__new__ is object.__new__:
        return {"c": f"{module}:{t.__qualname__}", "st": _enc(dict(vars(v)), arrays)}
    raise CodecError(f"cannot store a {t.__module__}.{t.__qualname__}")


def _dec(node, arrays):
    if node is None or isinstance(node, (bool, int, float, str)):
        return node
    if isinstance(node, list):
        return [_dec(x, arrays) for x in node]
    if not isinstance(node, dict) or len(node) > 2:
        raise CodecError("bad node")
    if "t" in node:
        return tuple(_dec(x, arrays) for x in node["t"])
    if "d" in node:
        return {_dec(k, arrays): _dec(x, arrays) for k, x in node["d"]}
    if "s" in node:
        items = [_dec(x, arrays) for x in node["s"]]
        return frozenset(items) if node.get("f") else set(items)
    if "b" in node:
        return _array(arrays, node["b"], "u").tobytes()
    if "a" in node:
        return _array(arrays, node["a"])
    if "n" in node:
        return _array(arrays, node["n"])[()]
    if "r" in node:
        one, n = _array(arrays, node["r"]), node.get("len")
        if one.shape != (1,) or type(n) is not int or not 1 < n <= MAX_CONSTANT_LEN:
            raise CodecError("bad constant")
        return constant(one[0], n)
    if "os" in node or "o" in node:
        items = node["os"] if "os" in node else [_dec(x, arrays) for x in node["o"]]
        out = np.empty(len(items), dtype=object)
        out[:] = items if "os" in node else _object_items(items)
        return out.reshape([int(s) for s in node["sh"]])
    if "c" in node:
        cls = _class(node["c"])
        state = _dec(node["st"], arrays)
        if not isinstance(state, dict) or not all(isinstance(k, str) for k in state):
            raise CodecError("bad state")
        obj: object = object.__new__(cls)
        obj.__dict__.update(state)
        return obj
    raise CodecError("bad node")


def _object_items(items: list) -> np.ndarray:
    """Items for an object array (a tuple item must stay one element, not a row)."""
    holder = np.empty(len(items), dtype=object)
    for i, x in enumerate(items):
        holder[i] = x
    return holder


def _array(arrays, index, kind=None) -> np.ndarray:
    a = arrays.get(f"a{int(index)}")
    if a is None or a.dtype.kind not in ARRAY_KINDS or (kind and a.dtype.kind != kind):
        raise CodecError("bad array")
    return a


def _class(name: str) -> type:
    """A class of a tb_roofline module (only the package's own modules are imported; nothing
    of the class is called)."""
    module_name, _, qualname = str(name).partition(":")
    module = None
    if module_name.startswith(PACKAGE) and _MODULE.match(module_name):
        module = sys.modules.get(module_name)
        if module is None:
            try:
                module = importlib.import_module(module_name)
            except ImportError:
                module = None
    obj = module
    for part in qualname.split("."):
        obj = getattr(obj, part, None) if obj is not None and not part.startswith("__") else None
    if (
        not isinstance(obj, type)
        or obj.__module__ != module_name
        or obj.__new__ is not object.__new__
        or not hasattr(obj, "__dict__")
    ):
        raise CodecError("unknown class")
    return obj
