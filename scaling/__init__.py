"""Scaling studies of attention-query variants: study specs, orchestration and the `scaling` CLI.

The rooms (arrows point one way: state.files ← backends.queued, backends.base ← spec ←
inference_cost ← state ← warmstart ← backends ← costs ← study_judgement ← lr_search ← looks ←
driver ← study ← cli):

- `scaling.state.files`: the study folder's files, one module per file (its name, format, reader and
  writer): `lr_search.json`, `looks.json`, `jobs.json`, `cancelled.json`, `driver.pid`. A file
  whose format is its logic's stays beside it: `mlflow_runs.json` (`scaling.state.run_cache`),
  `tracking_store.json` (`scaling.state.store_check`), `pilot.json` (`scaling.costs.pilot`),
  `inference-request.json` (`scaling.inference_cost.inference_study`), `.submit.lock`
  (`scaling.driver.submission`).
- `scaling.spec`: the study spec and its expansion into cells; `ResolvedStudy`, the one study type
  past the loader.
- `scaling.inference_cost`: what a trained model costs to serve (prefill, KV-cache decode), measured
  for a study's checkpoints after its runs, and by the pilot.
- `scaling.state`: the MLflow-backed state: parent and child runs, each cell's state, the run
  cache, the REST reader, stale code.
- `scaling.warmstart`: local cells forked from one process that imported torch, megatron-core and
  mlflow once (`server`), and the task command that asks it to (`client`).
- `scaling.backends`: where cells run, one room per backend (`local`, `slurm`: each its executor
  class, its jobs' state and cancel, and its machinery); below the spec, `base` (what every
  backend implements, the registry of backends by name, `live_jobs` and `cancel_jobs`) and
  `queued` (a cell waiting in a submit process).
- `scaling.study_judgement`: the study's one judgement (`analysis.judgement.Judgement`), for
  `run`, each look, `status` and `analyze`.
- `scaling.lr_search`: the LR search: grids extended until each arm's optimum is inside
  (`extend_grid`), new sizes on each arm's LR law (`law_transfer`).
- `scaling.looks`: sequential seeds: each look judged, written, its seeds added.
- `scaling.driver`: the round driver `StudyRun` and its watcher `RoundWatcher`, one submission,
  the progress and ETA, re-uploads after a lost store, `scaling run`'s course (`run`).
- `scaling.costs`: what a study costs before it runs: plan, wall-clock, disk, pilot.
- `scaling.study`: `Study`, the study's one object: made once from the study file
  (`Study.load(path)`), with its verbs `plan`, `pilot`, `run`, `submit`, `wait`, `watch`,
  `status`, `cancel`, `analyze`, `report`, each returning data.
- `scaling.cli`: the `scaling` command and its views (tables, live bar, MLflow link): each
  command parses its flags, calls one verb of `Study` and prints.

The orchestration API: `from scaling import Study` (loaded on first use, so that importing
`scaling`, and `scaling --help`, stay cheap: no torch), then `Study.load(path).status()`. Below
it, each name lives in the module named beside it; import it from there:

- `load_study_spec(path) -> ResolvedStudy` (scaling.driver.environment): read and validate a
  spec, its cells (`scaling.spec.loader.read_study`) and the environment (dataset, MLflow, the
  executor's cluster and devices); raises `ConfigError` naming the field and the fix.
- `plan_study(study) -> Plan` (scaling.costs.plan): one `PlanRow` per cell plus totals (runs,
  FLOPs, GPU-hours).
- `expand_cells(study, vocab_size) -> list[Cell]` (scaling.spec.grid): the resolved `RunConfig`s.
- `StudyRun(study)` (scaling.driver.round_driver): a study's rounds: `submit`, `wait`, `drive`,
  `next_cells`, `finish`, `cancel`; `Study.submit`, `wait`, `watch` and `cancel` are thin calls
  on it.
- `run_study(study, ...)` (scaling.driver.run): what `scaling run` does, from data to the report.
- `study_status(study, refresh=False) -> list[StatusRow]` (scaling.state.status; finished runs
  cached in the study folder: `scaling.state.run_cache`).
- `study_parent_run_id(study)` (scaling.driver.submission).
"""


def __getattr__(name: str):
    """`scaling.Study`, imported on first use: `import scaling` (and `scaling --help`) stay
    cheap, with no MLflow or torch."""
    if name == "Study":
        from scaling.study import Study  # lazy: the whole study machinery, on first use

        return Study
    raise AttributeError(f"module 'scaling' has no attribute {name!r}")
