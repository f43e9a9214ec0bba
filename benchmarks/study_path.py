"""The resolve loop as a study runs it, for `bench_resolve.py --study-path K`.

`Study.load(file).resolve(budget)` on a real study: the local executor and its submitit jobs, a
SQLite MLflow store, the round driver, `resolve.json`, the study's own analysis at every look
(`analysis.stats.analyze.analyse`, the LR chosen again in every bootstrap draw) and its plan's
CPU-hours. Only training is left out: each cell's job is an `InstantJob`, which records the
cell's MLflow run as the training job records it (`jobs.telemetry.record.start` / `finish`, the
job's own tracker and result file) with a final loss the truth gives.

The study is the demo's recipe at its four sizes (12K to 100K: `--resolve` refuses fewer, whose
verdict is `inconclusive` whatever is bought), both arms at LRs 1.2e-2, 2.4e-2 and 4.8e-2 on
seeds 0-2 and the study's own LR search (an arm whose best LR is at an edge gets one LR more):
the start design of `analysis.synthetic.closed_loop`, with the truth's sizes 12.5M-100M mapped
onto the study's (N, the LR relative to the grid's centre, 20 tokens a parameter). Beside it
the bench runs the loop it replays hundreds of times (the fast judge,
`analysis.stats.resolve.evidence.read_table`) on the same cells, the same truth and the study's
own costs, and says where the two paths differ.
"""

from __future__ import annotations

import math
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
# the study's sizes and the truth's (analysis.synthetic.closed_loop.SIZES)
SIZE_MAP = {"12K": 12.5e6, "25K": 25e6, "55K": 50e6, "100K": 100e6}
CENTRE_LR = 2.4e-2  # the middle of the study's LR grid: the truth's optimum (law) lies there
GRID = (1.2e-2, 2.4e-2, 4.8e-2)

STUDY = """\
name: {name}
output_dir: {folder}/runs
mlflow:
  experiment: {name}
  tracking_uri: sqlite:///{folder}/runs/mlflow.db
data:
  prepare:
    source: stdlib
    output_dir: {repo}/data/stdlib-demo-bytes
    tokenizer: bpe
    vocab_size: 257
    max_bytes: 8000000
    validation_fraction: 0.05
  seed: 1234
  num_val_windows: 512
sizes: [12K, 25K, 55K, 100K]
variants: [linear, nonlinear]
seeds: [0, 1, 2]
model:
  seq_length: 64
  position_embedding: rope
ladder:
  shapes:
    12K: {{num_layers: 1, hidden_size: 32, num_attention_heads: 2}}
    25K: {{num_layers: 2, hidden_size: 32, num_attention_heads: 2}}
    55K: {{num_layers: 2, hidden_size: 48, num_attention_heads: 3}}
    100K: {{num_layers: 2, hidden_size: 64, num_attention_heads: 4}}
tokens:
  tokens_per_param: null
  per_size: {{12K: 614400, 25K: 614400, 55K: 614400, 100K: 614400}}
batch:
  rule: fixed
  tokens: 1024
  micro_batch_size: 16
lr:
  law: none
  search: {{scan_seeds: 3, max_rounds: 1}}
  grid:
    "*": {{12K: {grid}, 25K: {grid}, 55K: {grid}, 100K: {grid}}}
schedule:
  kind: cosine
  warmup_steps: 150
  min_lr_ratio: 0.1
optimizer:
  weight_decay: 0.1
  grad_clip: 1.0
train:
  eval_interval: 300
  log_interval: 20
verdict:
  margin_pct: {margin}
precision: fp32
executor: local
local:
  max_parallel: 2
cost:
  flops_per_gpu_s: 2.0e+10
  startup_s: 1.0
  step_s: 0.010
"""


@dataclass(frozen=True)
class StudyTruth:
    """A truth of the closed loop's sizes read at the study's cells: size label → the truth's N,
    the LR relative to the grid's centre → relative to the law's optimum, 20 tokens a parameter."""

    truth: Any  # (N, variant, seed, lr, tokens) -> loss, at the truth's sizes

    def of_cell(self, size: str, variant: str, seed: int, lr: float) -> float:
        from analysis.synthetic.closed_loop import TOKENS_PER_PARAM
        from analysis.synthetic.scenarios import lr_opt

        n = SIZE_MAP[size]
        return self.truth(n, variant, int(seed), lr / CENTRE_LR * lr_opt(n), TOKENS_PER_PARAM * n)


class InstantJob:
    """One cell's job with training left out (picklable for submitit): the cell's run recorded
    as `jobs.loop.trainer` records it, with the truth's loss; a finished cell's result is
    returned as the real job returns it."""

    def __init__(self, config: Any, truth: StudyTruth) -> None:
        self.config, self.truth = config, truth

    def __call__(self) -> Any:
        from foundation import contract as C
        from jobs.telemetry import record
        from jobs.telemetry.tracking import Tracker
        from models.accounting import flops_per_token

        config = self.config
        done = record.finished_result(config)
        if done is not None:
            return done
        tags = config.tracking.tags
        loss = self.truth.of_cell(
            tags[C.TAG_SIZE], config.model.query_variant, config.seed, config.optimizer.lr
        )
        steps = config.train.steps
        tokens = steps * config.tokens_per_step
        tracker = Tracker(config.output_dir, config.tracking, run_name=config.name)
        record.start(tracker, config, 1, False)
        history = record.LossHistory(step=steps, tokens_seen=tokens, losses=[loss])
        result = record.RunResult(C.COMPLETED, loss, steps, tokens, tracker.run_id, [loss])
        record.finish(tracker, config, result, history, flops_per_token(config.model))
        tracker.close()
        result.run_id = tracker.run_id
        record.write_result(config, result)
        return result


def write_study(folder: Path, name: str, margin_pct: float) -> Path:
    grid = "[" + ", ".join(f"{x:g}" for x in GRID) + "]"
    path = folder / f"{name}.yaml"
    text = STUDY.format(name=name, folder=folder, repo=REPO, grid=grid, margin=margin_pct)
    path.write_text(text)
    return path


def _pure_loop(study: Any, truth: StudyTruth, plan: Any, margin_pct: float) -> Any:
    """The bench's loop (fast judge) on the study's own start cells (each arm's own N), truth
    and costs; its instant rows are `closed_loop.rows_of`'s."""
    from functools import partial

    from analysis.stats.resolve.loop import resolve_loop
    from analysis.synthetic.closed_loop import fast_judge, rows_of
    from scaling.costs.plan import plan_cost
    from scaling.state.files.resolve_state import read_resolve

    bought = {c["cell_id"] for look in (read_resolve(study.folder) or {}).get("looks", [])
              for c in look.get("cells", [])}  # fmt: skip
    rows = [r for r in study.plan().rows if r.cell_id not in bought]
    size_of = {float(r.num_nonembedding_params): r.size for r in rows}  # either arm's N

    def loss(n_params: float, variant: str, seed: int, lr: float, _tokens: float) -> float:
        return truth.of_cell(size_of[float(n_params)], variant, seed, lr)

    start = [
        {"variant": r.variant, "size": r.size, "n_params": float(r.num_nonembedding_params),
         "tokens": float(r.tokens), "lr": float(r.cell.lr), "seed": int(r.seed)}
        for r in rows
    ]  # fmt: skip
    buy = partial(rows_of, loss)
    return resolve_loop(buy(start), fast_judge(margin_pct), plan_cost(study.resolved), buy, plan)


def study_path(truth: Any, budget: float, margin_pct: float, max_looks: int, name: str) -> dict:
    """One study resolved through `Study.resolve` with instant cells, and the fast judge's pure
    loop on the same truth: each path's looks (what was bought, the words) and the wall time."""
    import time

    import scaling.backends.executors as executors
    from analysis.stats.resolve.loop import Plan
    from scaling.study import Study

    here = StudyTruth(truth)
    folder = Path(tempfile.mkdtemp(prefix=f"{name}-"))
    spec = write_study(folder, name, margin_pct)
    real = executors._job
    executors._job = lambda cell: InstantJob(cell.run, here)  # training left out, nothing else
    t0 = time.perf_counter()
    try:
        study = Study.load(spec, writes=True)
        outcome = study.resolve(budget, max_looks=max_looks)
    finally:
        executors._job = real
    wall = time.perf_counter() - t0
    p = outcome.path
    plan = Plan(budget=budget, max_looks=max_looks, alpha=study.resolved.spec.verdict.alpha,
                max_seeds=None, start_seeds=3, kinds=("seeds", "lr_grid"))  # fmt: skip
    pure = _pure_loop(Study.load(spec, check_environment=False), here, plan, margin_pct).as_dict()
    return {"study": _summary(p), "pure": _summary(pure), "wall_s": wall, "folder": str(folder)}


def _summary(path: dict) -> dict:
    bought = [(row.get("bought") or {}).get("kind") for row in path["looks"][1:]]
    return {
        "words": dict(path["words"]),
        "bought": bought,
        "stopped": path["stopped"],
        "spent": float(path["spent"]),
        "levels": [round(float(row["level"]), 5) for row in path["looks"]],
        "half_widths": [
            {
                v: (None if x is None or not math.isfinite(x) else round(x, 3))
                for v, x in (row.get("half_width_pct") or {}).items()
            }
            for row in path["looks"]
        ],  # fmt: skip
    }
