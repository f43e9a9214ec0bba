"""The bottom layer: what every package shares and nothing else provides.

`foundation` imports none of the project's packages (no torch, no megatron at import time), so
`models`, `data_prep`, `jobs`, `analysis` and `scaling` may all import it without a cycle:

- `foundation.config`: config dataclasses in and out (pydantic v2), errors that name every bad
  field by its dotted path at once;
- `foundation.contract`: the MLflow run contract (tag/param/metric names, the cell states, the
  one place that creates an experiment, paged run search, size labels);
- `foundation.atomic`: atomic file writes;
- `foundation.provenance`: code version, package versions, host and device of a run;
- `foundation.secrets`: the tracking server's login, and masking it in everything recorded;
- `foundation.process`: how a process behaves: rank-0 prints (`log`), third-party warnings hidden
  (`quiet`), megatron-core's fused kernels compiled on first use (`megatron_jit`), child
  processes stopped and killed (`proc`).
"""
