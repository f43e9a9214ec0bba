"""The study spec: one YAML file describes a whole grid, validated once with errors naming fields.

A study is sizes × variants (arms) × seeds × learning rates. This module holds the spec's
dataclasses; `scaling.spec.checks` checks what needs nothing but the spec, `scaling.spec.grid`
expands it into resolved run configs (which runs every model/run-config check), and
`scaling.driver.environment` checks what lies outside the file (MLflow server, the executor's
cluster and devices). `load_study_spec` does all three once and returns a
`scaling.spec.resolved.ResolvedStudy`, so a spec that loads can be submitted.

Relative paths in the spec (dataset, output dir, a SQLite store, `python_path`) are resolved
against the folder of the study file when the spec is loaded (`foundation.studypaths`), never
the working directory, and stored absolute, because jobs run elsewhere (a Slurm node, a
subprocess).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from analysis.judgement import table_judgement
from analysis.stats.gains.levels import ALPHA
from analysis.tables.spec import DEFAULT_BASELINE, DEFAULT_MARGIN_PCT
from data_prep.config import DataPrepConfig
from foundation import contract
from foundation.config import from_dict
from foundation.contract import study_folder
from jobs.config import EvaluationConfig
from jobs.engine_specs import EngineName
from scaling.backends.base import BackendName
from scaling.spec.ladder import ANY, ARMS, Shape, resolve_arm, shape_for_size
from scaling.spec.resolve_spec import ResolveSpec

__all__ = [
    "MlflowSpec",
    "DataSpec",
    "ShapeSpec",
    "LadderSpec",
    "TokensSpec",
    "LRSearchSpec",
    "LRSpec",
    "BatchSpec",
    "ParallelSpec",
    "SlurmSpec",
    "LocalSpec",
    "CostSpec",
    "VerdictSpec",
    "StudySpec",
    "ANY",
]


@dataclass
class MlflowSpec:
    """Where the study's runs go: one parent run per study, one child per cell.

    `credentials_file`: a 0600 file holding the tracking server's login (`scaling.spec.credentials`;
    else MLFLOW_TRACKING_USERNAME / MLFLOW_TRACKING_PASSWORD from the environment).
    """

    experiment: str
    tracking_uri: str
    credentials_file: str | None = None


@dataclass
class DataSpec:
    """A prepared dataset (`path`), or the parameters to prepare one (`prepare`).

    `prepare` is a `data_prep.DataPrepConfig` mapping; its `output_dir` is the dataset path.
    Training-sample order is `seed + cell seed`: arms that share a seed see identical batches
    (paired comparison), different seeds see different orders.
    """

    path: str | None = None
    prepare: dict[str, Any] | None = None
    seed: int = 1234
    num_val_windows: int = 64
    val_seed: int = 0
    num_select_windows: int = 0  # LR-selection windows, disjoint from the reported


@dataclass
class ShapeSpec:
    """An explicit shape for one size, overriding the ladder rule."""

    num_layers: int
    hidden_size: int
    num_attention_heads: int


@dataclass
class LadderSpec:
    """The size → shape rule's two constants (see `scaling.spec.ladder`) and explicit shapes."""

    aspect_ratio: float = 64.0  # hidden_size / num_layers (GPT-3 small: 768 / 12)
    head_dim: int = 64
    shapes: dict[str, ShapeSpec] = field(default_factory=dict)


@dataclass
class TokensSpec:
    """Training tokens per size: `tokens_per_param` × nominal N, unless given in `per_size`.

    `branches` (`scaling.spec.branches`): several budgets per size from one WSD run, as
    fractions (<= 1) of the size's budget or explicit token counts (> 1, every size); each
    branch decays over the last `cooldown` of its own steps with `cooldown_shape`.
    """

    tokens_per_param: float | None = 20.0  # Chinchilla's compute-optimal ratio
    per_size: dict[str, float] = field(default_factory=dict)
    branches: list[float] | None = None
    cooldown: float = 0.2  # 10-20% cooldowns match a tuned cosine (Hägele et al. 2024)
    cooldown_shape: Literal["linear", "cosine", "sqrt"] = "linear"


@dataclass
class LRSearchSpec:
    """Adaptive LR refinement (`scaling.lr_search.extend_grid`): extend an arm's grid while its
    best is at
    an edge.

    Round 0 is the starting grid run by the first `scan_seeds` seeds. After a round ends, every
    (variant, size, tokens) whose best LR sits at an edge of what was tried gets one LR a step
    beyond it, up to `max_rounds` rounds; then the other seeds follow at each arm's winner and
    `follow_neighbours` tried LRs either side (a fair comparison needs every arm at its own best).
    """

    step_factor: float | None = None  # next LR = edge LR x or / this; None: the grid's own step
    max_rounds: int = 3  # rounds after the starting grid
    scan_seeds: int | None = 1  # the first K seeds scan; None: every seed scans (no followers)
    follow_neighbours: int = 1  # followers: the winner and this many tried LRs each side (>= 0)
    # "law": sizes run in waves, smallest first; past the first `law_sizes`, each arm scans only
    # the LRs its own fitted LR-vs-N law cannot exclude (analysis.stats.lr.lr_law); "none": full
    # grid
    transfer: Literal["none", "law"] = "none"
    law_sizes: int = 3  # sizes scanned in full (the first wave) before the law is used (>= 2)
    # extend each arm's scan upward, one LR step a round, until a cell of the arm diverges
    # (or max_rounds): the largest stable LR per arm and size (analysis.stats.lr.stability)
    find_edge: bool = False


@dataclass
class LRSpec:
    """Peak learning rates: a grid per (variant, size) so every arm is compared at its best LR.

    For each (variant, size): `grid[variant][size]`, else `grid["*"][size]`, else (law `porian`)
    `porian_lr(N) × m` for each m in `multipliers`. With `search` that is the starting grid.
    """

    law: Literal["porian", "none"] = "porian"
    multipliers: list[float] = field(default_factory=lambda: [1.0])
    grid: dict[str, dict[str, list[float]]] = field(default_factory=dict)
    search: LRSearchSpec | None = (
        None  # adaptive LR search (`scaling.lr_search.extend_grid`); None: the grid only
    )


@dataclass
class BatchSpec:
    """Tokens per optimiser step: Porian's law of N, or `tokens` (fixed), or `per_size`."""

    rule: Literal["porian", "fixed"] = "porian"
    tokens: int | None = None
    per_size: dict[str, int] = field(default_factory=dict)
    micro_batch_size: int = 1


@dataclass
class ParallelSpec:
    """Parallelism of one cell; `gpus_per_job` (processes, on CPU) must equal TP × PP × DP."""

    tensor_parallel: int = 1
    pipeline_parallel: int = 1
    data_parallel: int = 1
    gpus_per_job: int | None = None

    @property
    def world_size(self) -> int:
        return self.tensor_parallel * self.pipeline_parallel * self.data_parallel


@dataclass
class SlurmSpec:
    """Resources of every Slurm job; one job per cell, cells grouped into job arrays."""

    partition: str | None = None
    account: str | None = None
    qos: str | None = None
    time_limit_min: int = 60
    gpus_per_node: int = 0  # 0: CPU-only nodes (one task per process, no GPU request)
    # CPU nodes: ranks per node (None: a job's ranks share one node); 1 spreads DP over nodes
    tasks_per_node: int | None = None
    cpus_per_task: int = 1
    mem_gb: float | None = None
    constraint: str | None = None
    array_parallelism: int = 64  # at most this many cells of one array run at once
    # at most this many of the user's jobs queued at once (lowers the cluster's MaxSubmitJobs,
    # GrpSubmit and MaxJobCount; None: theirs alone); cells over it wait in `scaling submit`
    max_submitted: int | None = None
    # time-limit requeues of one cell before it fails (each resumes from its checkpoint)
    max_timeouts: int = 20
    additional: dict[str, Any] = field(default_factory=dict)  # extra sbatch options
    setup: list[str] = field(default_factory=list)  # shell lines run before the job


@dataclass
class LocalSpec:
    """The local executor: cells run as subprocesses of `scaling submit`, a few at a time."""

    max_parallel: int = 1
    timeout_min: int = 24 * 60


@dataclass
class CostSpec:
    """Sustained training FLOP/s per GPU used by `plan` for time and GPU-hours, and each
    cell's start-up time for its wall-clock estimate.

    4e14: an H100's 989 TFLOP/s dense bf16 at 40% MFU, typical for megatron at these sizes.
    """

    flops_per_gpu_s: float = 4e14
    # wall seconds of a cell beside its FLOPs: process start, model and data set-up,
    # checkpoints, tracking (`scaling.costs.wall`; a GPU job's start-up is typically a minute)
    startup_s: float = 60.0
    # wall seconds of each training step beside its FLOPs: the optimizer step, the data loader,
    # Python and logging; what dominates tiny models on CPU (a few ms a step on GPUs)
    step_s: float = 0.0


@dataclass
class SeedRounds:
    """`seeds: {start: 3, max: 10, step: 2}`: seeds added in rounds where they resolve the
    verdict, judged by a group-sequential design that keeps the false-claim rate at 5%
    (`analysis.stats.looks.sequential`, docs/statistics.md). The first round runs seeds 0..start-1;
    each look then stops the study or adds `step` seeds where they narrow the deciding interval
    most per FLOP (`scaling.looks.sequential_seeds`, state in `<study folder>/looks.json`)."""

    start: int = 3
    max: int = 10
    step: int = 2


@dataclass
class VerdictSpec:
    """How the analysis words its verdict (`analysis.stats.rules.verdict.RULE`).

    `margin_pct`: the gain (% of the baseline's loss) below which a difference does not matter:
    `none` needs the whole top-size interval within +-margin, else an interval containing 0 is
    `undetected`. 0.5%: under half the gains this question is about (1.25-2.4% of the loss in the
    paper at 124M), and what 6% more compute buys there on Epoch AI's Chinchilla fit; gains
    below it would not change a recipe. `scaling analyze --margin` overrides it.

    `baseline`: the arm the others are judged by, at every look and in the report; one of the
    study's `variants` (`A,B`: per size the stronger of arms A and B). A study of one arm has
    nothing to judge, and is not checked. `scaling run --baseline`
    overrides it for the whole run, and is refused once a look was judged against another.

    `alpha`: the family-wise level of every claim (`analysis.stats.gains.levels`); a sequential
    study spends it over its looks.
    """

    margin_pct: float = DEFAULT_MARGIN_PCT
    baseline: str = DEFAULT_BASELINE
    alpha: float = ALPHA

    def problems(self, variants: list[str]) -> list[str]:
        """What is wrong with this section for a study of `variants` (its entries; a variant of
        the user's own is named by its `name`), each with the fix."""
        arms = [_arm_name(entry) for entry in variants]
        out = []
        # the arms as the study's `Judgement` will read them: its builder is the one parser
        names = table_judgement(self.baseline).baselines if self.baseline else ("",)
        unknown = [b for b in names if b not in arms]
        if unknown and len(set(arms)) > 1:  # one arm trains and is tracked, and judges nothing
            out.append(
                f"study.verdict.baseline: {self.baseline!r} is not one of the study's arms "
                f"{arms}; set `verdict: {{baseline: <arm>}}` to the arm the others are judged "
                f"by, e.g. {arms[0] if arms else 'linear'!r}, or add {unknown[0]!r} to `variants`"
            )
        if not (isinstance(self.alpha, int | float) and 0 < self.alpha < 0.5):
            out.append(
                f"study.verdict.alpha: {self.alpha!r}; give the family-wise level in (0, 0.5), "
                f"e.g. {ALPHA}"
            )
        return out


def _arm_name(entry: str) -> str:
    """The arm name an entry of `variants` runs as (the entry itself where it cannot be
    resolved: the grid's checks report that)."""
    if entry in ARMS or ":" not in entry:
        return entry
    try:
        return resolve_arm(entry)[0]
    except (ValueError, ImportError):
        return entry


@dataclass
class StudySpec:
    """A scaling study: the grid, the recipe and where it runs."""

    name: str
    mlflow: MlflowSpec
    data: DataSpec
    sizes: list[str]
    variants: list[str]
    seeds: list[int] | SeedRounds  # rounds: `seeds` becomes the first round's, see seed_rounds
    output_dir: str | None = None  # default runs/<name>: submitit logs and one dir per cell
    # folders (relative to the study file) holding the user's own modules, e.g. a variant's;
    # added to the import path of every command and job
    python_path: str | list[str] = field(default_factory=list)
    model: dict[str, Any] = field(default_factory=dict)  # shared ModelConfig fields
    ladder: LadderSpec = field(default_factory=LadderSpec)
    tokens: TokensSpec = field(default_factory=TokensSpec)
    lr: LRSpec = field(default_factory=LRSpec)
    batch: BatchSpec = field(default_factory=BatchSpec)
    schedule: dict[str, Any] = field(default_factory=dict)  # jobs ScheduleConfig fields
    optimizer: dict[str, Any] = field(default_factory=dict)  # jobs OptimizerConfig, minus lr
    train: dict[str, Any] = field(default_factory=dict)  # jobs TrainConfig, minus steps/batch
    parallel: dict[str, ParallelSpec] = field(default_factory=dict)  # size or "*" → parallelism
    engine: EngineName = "megatron"  # a registered engine (`jobs.engine_specs`)
    deepspeed: dict[str, Any] = field(default_factory=dict)
    precision: Literal["auto", "fp32", "bf16"] = "auto"
    executor: BackendName = "local"  # a registered backend (`scaling.backends.base`)
    # times a failed cell is resubmitted; then `submit` leaves it failed (and an LR-search round
    # is judged with it) until `scaling submit --retry-failed`
    retries: int = 2
    local: LocalSpec = field(default_factory=LocalSpec)
    slurm: SlurmSpec = field(default_factory=SlurmSpec)
    cost: CostSpec = field(default_factory=CostSpec)
    verdict: VerdictSpec = field(default_factory=VerdictSpec)
    resolve: ResolveSpec | None = None  # what `scaling run --resolve` may buy (resolve_spec.py)
    seed_rounds: SeedRounds | None = None  # from `seeds: {start, max, step}`
    # downstream tasks each cell's job runs after its last step (jobs.evaluation; None: none)
    evaluation: EvaluationConfig | None = None

    def __post_init__(self) -> None:
        if isinstance(self.seeds, SeedRounds):  # the first round's seeds; the design is kept
            self.seed_rounds, self.seeds = self.seeds, list(range(max(self.seeds.start, 0)))

    # --- derived --------------------------------------------------------------------------
    @property
    def folder(self) -> Path:
        """The study folder: submitit logs, job records and one output dir per cell."""
        return study_folder(self.name, self.output_dir)

    @property
    def dataset_path(self) -> Path:
        return Path(self.data.path if self.data.path else self.data.prepare["output_dir"])

    def shape(self, size: str) -> Shape:
        """The explicit shape of `size` if given, else the ladder rule's."""
        explicit = self.ladder.shapes.get(size)
        if explicit is not None:
            return Shape(explicit.num_layers, explicit.hidden_size, explicit.num_attention_heads)
        return shape_for_size(size, self.ladder.aspect_ratio, self.ladder.head_dim)

    def prepare_config(self) -> DataPrepConfig | None:
        """`data.prepare` as the DataPrepConfig it was checked as (None: data.path only)."""

        if self.data.prepare is None:
            return None
        return from_dict(DataPrepConfig, self.data.prepare, "study.data.prepare")

    @property
    def scan_seeds(self) -> list[int]:
        """The seeds of the starting grid: the first `lr.search.scan_seeds`, or every seed."""
        search = self.lr.search
        if search is None or search.scan_seeds is None:
            return list(self.seeds)
        return list(self.seeds[: search.scan_seeds])

    @property
    def first_wave(self) -> list[str]:
        """The sizes of the starting grid: every size, or with `lr.search.transfer: law` the
        smallest `law_sizes` (the law needs them; later sizes follow in waves)."""
        ordered = sorted(self.sizes, key=contract.size_key)
        search = self.lr.search
        if search is None or search.transfer != "law":
            return ordered
        return ordered[: search.law_sizes]

    def parallel_for(self, size: str) -> ParallelSpec:
        return self.parallel.get(size) or self.parallel.get(ANY) or ParallelSpec()
