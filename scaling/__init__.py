"""Scaling studies of attention-query variants: study specs, orchestration and the `scaling` CLI.

The orchestration API (each name lives in the module named beside it; import it from there, so
that importing `scaling` stays cheap):

- `load_study(path) -> ResolvedStudy` (scaling.loader): read and validate a spec, its cells and
  the environment (dataset, MLflow, Slurm); raises `ConfigError` naming the field and the fix.
- `plan_study(study) -> Plan` (scaling.plan): one `PlanRow` per cell plus totals (runs, FLOPs,
  GPU-hours).
- `expand_cells(study, vocab_size) -> list[Cell]` (scaling.grid): the resolved `RunConfig`s.
- `run_study(study, ...)` (scaling.run): what `scaling run` does, from data to the report.
- `submit_study(study) -> Submitted` (scaling.submission): submit new and failed cells.
- `study_status(study, refresh=False) -> list[StatusRow]` (scaling.state; finished runs cached in
  the study folder: `scaling.run_cache`).
- `wait_study(study, callback)`, `cancel_study(study)`, `study_parent_run_id(study)`
  (scaling.submission).
"""
