"""The `collective` key column of the op table: what one execution of a collective moves.

Readers write it, the model (model/records/comm.py) reads it; "" for every other op. One line of
`key=value` words after the kind, e.g.
`all-reduce S=2097156 n=8 groups=1 form=mesh algo=RING_LL`:

- kind: all-reduce, all-gather, reduce-scatter, all-to-all, collective-permute, broadcast,
  reduce, send, recv;
- S: the message size in bytes, as nccl-tests defines it (costs/collective_bytes.py);
- n: devices per group (ranks); `assumed=1` when the profile names no groups and n is the
  profile's device count;
- groups, form: how many groups (permute pairs) and how the HLO names them (list, iota, mesh,
  pairs); absent when not known;
- algo: the NCCL/RCCL algorithm and protocol the kernel names state (costs/hlo/nccl_algorithm.py);
  absent when they state none.
"""

from __future__ import annotations

_INTS = ("n", "groups", "assumed")


def describe(
    kind: str,
    message_bytes: float,
    n: int,
    groups: int = 0,
    form: str = "",
    algorithm: str = "",
    assumed: bool = False,
) -> str:
    words = [kind, f"S={float(message_bytes):.17g}", f"n={int(n)}"]
    if groups:
        words.append(f"groups={int(groups)}")
    if form:
        words.append(f"form={form}")
    if algorithm:
        words.append(f"algo={algorithm}")
    if assumed:
        words.append("assumed=1")
    return " ".join(words)


def parse(text: str) -> dict | None:
    """{kind, S, n, groups, form, algo, assumed} of a `describe` line; None for ""."""
    words = str(text or "").split()
    if not words:
        return None
    out: dict = {
        "kind": words[0],
        "S": None,
        "n": 0,
        "groups": 0,
        "form": "",
        "algo": "",
        "assumed": 0,
    }
    for w in words[1:]:
        k, _, v = w.partition("=")
        if k == "S":
            out["S"] = float(v)
        elif k in _INTS:
            out[k] = int(v)
        elif k in out:
            out[k] = v
    return out
