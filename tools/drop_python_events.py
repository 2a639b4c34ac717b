"""Copy a Kineto trace without the events the reader never uses: Python stack frames
(`python_function`), flow arrows (`ac2g`) and memory instants (`cpu_instant_event`).

Used for the graph capture traces in `testdata/kineto/` (`mi300x_vllm_graph_capture`,
`sglang_qwen3_8b_decode/capture`): every op, runtime call, kernel and annotation is kept as it
was, so the reader sees the same trace.

    python tools/drop_python_events.py IN.pt.trace.json.gz OUT.pt.trace.json.gz
"""

import gzip
import json
import sys

DROPPED = {"python_function", "ac2g", "cpu_instant_event"}


def main(src: str, dst: str) -> None:
    with gzip.open(src, "rt") as f:
        trace = json.load(f)
    events = trace["traceEvents"]
    trace["traceEvents"] = [e for e in events if e.get("cat") not in DROPPED]
    with gzip.open(dst, "wt") as f:
        json.dump(trace, f)
    print(f"{len(events)} events -> {len(trace['traceEvents'])}")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
