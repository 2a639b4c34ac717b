"""The contract between the readers and the model, which both import and nothing else defines:

- `op_table.py`: the op table (numpy columns: one key per distinct op, rows per (op, core,
  step)), `ProfileData` (a table with its device, steps, spans and diagnostics) and the shared
  vocabulary (caveats, memory columns, `NO_STEP`);
- `spans.py`: where steps and cores ran (`StepSpan`, `StepSpans`, `CoreSpan`);
- `timeline.py`: the timeline facts readers summarise while they read (idle and exposed time,
  back-to-back pairs, shapes, idle causes) and the model's guidance uses;
  `timeline_builder.py`: how readers make them from each core's op events;
- `collective_info.py`: what one execution of a collective moves (the `collective` key).

Readers fill these; the model reads them. Neither side knows the other's modules.
"""
