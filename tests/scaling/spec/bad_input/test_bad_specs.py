"""Every invalid study spec fails at load time with an error naming the field, writing nothing."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from foundation.config import ConfigError
from scaling.driver.environment import load_study_spec
from tests.distributed import free_port
from tests.scaling.conftest import small_spec


def _set(path: str, value):
    """An edit of the valid spec: set the dotted `path` to `value` (None deletes it)."""

    def edit(spec: dict, tmp: Path) -> None:
        *parents, last = path.split(".")
        node = spec
        for key in parents:
            node = node.setdefault(key, {})
        if value is None:
            node.pop(last, None)
        else:
            node[last] = value(tmp) if callable(value) else value

    return edit


# (case, edit, fragment the error must contain)
BAD_SPECS = [
    ("unknown variant", _set("variants", ["linear", "quadratic"]), "study.variants[1]"),
    ("size not a ladder name", _set("sizes", ["30K", "huge"]), "study.sizes[1]"),
    (
        "TP does not divide heads",
        _set("parallel", {"30K": {"tensor_parallel": 3}}),
        "study.parallel.30K.tensor_parallel",
    ),
    (
        "PP does not divide layers",
        _set("parallel", {"*": {"pipeline_parallel": 4}}),
        "study.parallel.*.pipeline_parallel",
    ),
    ("empty seed list", _set("seeds", []), "study.seeds"),
    ("no time-limit requeue", _set("slurm.max_timeouts", 0), "study.slurm.max_timeouts"),
    ("no jobs queued at all", _set("slurm.max_submitted", 0), "study.slurm.max_submitted: 0"),
    ("negative retries", _set("retries", -1), "study.retries: -1 must be >= 0"),
    ("zero verdict margin", _set("verdict", {"margin_pct": 0}), "study.verdict.margin_pct: 0"),
    ("zero resolve budget", _set("resolve", {"budget": 0}), "study.resolve: budget 0: give"),
    ("no resolve budget", _set("resolve", {"max_looks": 2}), "study.resolve.budget"),
    ("resolve of no kind", _set("resolve", {"budget": 1, "options": ["more"]}), "['more']"),
    ("no resolve looks", _set("resolve", {"budget": 1, "max_looks": 0}), "max_looks 0: give"),
    ("negative seed", _set("seeds", [0, -1]), "study.seeds[1]"),
    ("empty LR grid", _set("lr", {"grid": {"linear": {"30K": []}}}), "lr.grid.linear.30K"),
    ("zero learning rate", _set("lr", {"grid": {"*": {"30K": [0.0]}}}), "study.lr.grid.*.30K[0]"),
    ("empty LR multipliers", _set("lr", {"multipliers": []}), "study.lr.multipliers"),
    (
        "a million neighbours followed",  # every follower seed a million cells: plan's OOM
        _set("lr", {"search": {"follow_neighbours": 1_000_000}}),
        "study.lr.search.follow_neighbours: 1000000 must be in 0..8",
    ),
    (
        "LR grid for a variant not in the study",
        _set("lr", {"grid": {"identity": {"30K": [1e-3]}}}),
        "study.lr.grid.identity",
    ),
    (
        "law none without a grid",
        _set("lr", {"law": "none", "grid": {"*": {"30K": [1e-3]}}}),
        "(linear, 60K)",
    ),
    ("negative tokens", _set("tokens.per_size.30K", -5), "study.tokens.per_size.30K"),
    (
        "zero tokens per parameter",
        _set("tokens", {"tokens_per_param": 0}),
        "study.tokens.tokens_per_param",
    ),
    ("duplicate cells (seed twice)", _set("seeds", [0, 0]), "study.seeds[1]"),
    (
        "duplicate cells (LRs equal to 3 digits)",
        _set("lr", {"grid": {"*": {"30K": [1e-3, 1.0001e-3], "60K": [1e-3]}}}),
        "duplicate cell",
    ),
    (
        "missing dataset",
        _set("data.path", lambda tmp: str(tmp / "no-such-data")),
        "study.data.path",
    ),
    ("no data at all", _set("data", {"seed": 1}), "study.data"),
    (
        "unreachable MLflow URI",
        _set("mlflow.tracking_uri", lambda tmp: f"http://127.0.0.1:{free_port()}"),
        "study.mlflow.tracking_uri",
    ),
    (
        "tracking URI that is no URI",
        _set("mlflow.tracking_uri", "localhost:5000"),
        "study.mlflow.tracking_uri",
    ),
    ("missing experiment", _set("mlflow.experiment", None), "study.mlflow.experiment"),
    (
        "GPUs per job != TP x PP x DP",
        _set("parallel", {"60K": {"data_parallel": 2, "gpus_per_job": 4}}),
        "study.parallel.60K.gpus_per_job",
    ),
    (
        "parallel key that is not a size",
        _set("parallel", {"7M": {"data_parallel": 2}}),
        "study.parallel.7M",
    ),
    ("name with a space", _set("name", "my study"), "study.name"),
    ("unknown top-level field", _set("sizez", ["30K"]), "sizez"),
    ("shape field in model", _set("model.num_layers", 4), "study.model.num_layers"),
    ("lr under optimizer", _set("optimizer", {"lr": 1e-3}), "study.optimizer.lr"),
    ("steps under train", _set("train", {"steps": 100}), "study.train.steps"),
    ("fixed batch without tokens", _set("batch", {"rule": "fixed"}), "study.batch.tokens"),
    (
        "deepspeed with pipeline parallelism",
        _set("parallel", {"60K": {"pipeline_parallel": 2}}),
        "engine 'deepspeed'",
    ),
    ("unknown schedule kind", _set("schedule", {"kind": "linear"}), "study.schedule.kind"),
    (
        "explicit shape not divisible into heads",
        _set("ladder.shapes.30K", {"num_layers": 1, "hidden_size": 50, "num_attention_heads": 4}),
        "study.ladder.shapes.30K.hidden_size: 50 is not divisible by num_attention_heads 4",
    ),
    (
        "explicit shape for a size not in the study",
        _set("ladder.shapes.7M", {"num_layers": 1, "hidden_size": 48, "num_attention_heads": 2}),
        "study.ladder.shapes.7M: not one of study.sizes (30K, 60K)",
    ),
    (
        "typo inside a pass-through section",
        _set("schedule.warmup_step", 2),
        "study.schedule: unknown field(s) warmup_step",
    ),
    ("zero local parallelism", _set("local", {"max_parallel": 0}), "study.local"),
    ("negative weight decay", _set("optimizer", {"weight_decay": -0.1}), "study.optimizer"),
    ("unknown precision", _set("precision", "fp16"), "study.precision"),
    ("empty variants", _set("variants", []), "study.variants"),
    (
        "negative select windows",
        _set("data.num_select_windows", -1),
        "study.data.num_select_windows: -1 must be >= 0",
    ),
    (
        "select windows that do not fit beside the loss windows",
        _set("data.num_select_windows", 10**6),
        "study.data.num_select_windows: 4 loss + 1000000 select windows (disjoint)",
    ),
    (
        "fewer select windows than DP ranks",
        _set("data.num_select_windows", 1),
        "data.num_select_windows=1 is smaller than parallel.data_parallel=2",
    ),
]


@pytest.mark.parametrize("case,edit,fragment", BAD_SPECS, ids=[c[0] for c in BAD_SPECS])
def test_bad_spec_is_rejected_before_anything_is_written(tmp_path, data_dir, case, edit, fragment):
    out = tmp_path / "study"
    spec = small_spec(data_dir, out, f"sqlite:///{tmp_path / 'mlflow.db'}")
    if case == "deepspeed with pipeline parallelism":
        spec["engine"] = "deepspeed"
    edit(spec, tmp_path)
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(spec))
    with pytest.raises(ConfigError) as err:
        load_study_spec(path)
    assert fragment in str(err.value), str(err.value)
    assert str(path) in str(err.value)  # the file is named too
    assert not out.exists()  # nothing written
    assert not (tmp_path / "mlflow.db").exists()


def test_slurm_executor_without_slurm_is_rejected(tmp_path, data_dir, monkeypatch):
    monkeypatch.setenv("SLURM_CONF", str(tmp_path / "no-such-slurm.conf"))
    spec = small_spec(data_dir, tmp_path / "study", f"sqlite:///{tmp_path / 'mlflow.db'}")
    spec["executor"] = "slurm"
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(spec))
    with pytest.raises(ConfigError, match=r"study.executor: 'slurm', but no Slurm controller"):
        load_study_spec(path)


def test_enough_distinct_bad_specs():
    assert len({case for case, _, _ in BAD_SPECS}) >= 20


def test_the_valid_spec_loads(tmp_path, data_dir):
    spec = small_spec(data_dir, tmp_path / "study", f"sqlite:///{tmp_path / 'mlflow.db'}")
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(spec))
    study = load_study_spec(path)
    assert study.name == "tiny-study" and study.folder == tmp_path / "study"
    assert not (tmp_path / "study").exists()


def test_select_windows_reach_every_cell(tmp_path, data_dir):
    spec = small_spec(data_dir, tmp_path / "study", f"sqlite:///{tmp_path / 'mlflow.db'}")
    spec["data"]["num_select_windows"] = 6
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(spec))
    study = load_study_spec(path)
    assert {c.run.data.num_select_windows for c in study.cells} == {6}
    assert {c.run.data.num_val_windows for c in study.cells} == {4}


def test_a_spec_with_four_mistakes_reports_all_four_at_once(tmp_path, data_dir):
    spec = small_spec(data_dir, tmp_path / "study", f"sqlite:///{tmp_path / 'mlflow.db'}")
    spec["seeds"] = [0, -1]
    spec["name"] = "my study"
    spec["batch"] = {"rule": "fixed"}
    spec["data"]["prepare"] = {"output_dir": str(data_dir), "vocab_size": 10}
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(spec))
    with pytest.raises(ConfigError) as err:
        load_study_spec(path)
    text = str(err.value)
    for fragment in (
        "study.seeds[1]",
        "study.name",
        "study.batch.tokens",
        "study.data.prepare.vocab_size",
    ):
        assert fragment in text, text
    assert all(line.startswith(str(path)) for line in err.value.problems)


def test_a_variant_that_cannot_be_imported_names_the_field_and_the_fix(tmp_path, data_dir):
    spec = small_spec(data_dir, tmp_path / "study", f"sqlite:///{tmp_path / 'mlflow.db'}")
    spec["variants"] = ["linear", "no_such_module:make"]
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(spec))
    with pytest.raises(
        ConfigError,
        match=r"study.variants\[1\]: query variant 'no_such_module:make': cannot import module "
        r"'no_such_module' \(ModuleNotFoundError: No module named 'no_such_module'\); "
        r".*python_path",
    ):
        load_study_spec(path)


def test_nested_typos_are_reported_with_the_top_level_ones(tmp_path, data_dir):
    """One run of `load_study_spec` names every unknown key, however deep: a top-level typo does not
    hide a typo inside `schedule`, `optimizer` or `train` until it is fixed."""
    spec = small_spec(data_dir, tmp_path / "study", f"sqlite:///{tmp_path / 'mlflow.db'}")
    spec["sizez"] = ["30K"]
    spec["schedule"]["warmup_step"] = 2
    spec["optimizer"] = {"beta_2": 0.9}
    spec["train"]["checkpoint_every"] = 4
    spec["ladder"]["shapes"]["30K"]["head_dim"] = 24
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(spec))
    with pytest.raises(ConfigError) as err:
        load_study_spec(path)
    text = str(err.value)
    for fragment in (
        "study: unknown field(s) sizez",
        "study.schedule: unknown field(s) warmup_step; allowed: decay_fraction",
        "study.optimizer: unknown field(s) beta_2",
        "study.train: unknown field(s) checkpoint_every",
        "study.ladder.shapes.30K: unknown field(s) head_dim",
    ):
        assert fragment in text, text
    assert len(err.value.problems) == 5, text
    assert not (tmp_path / "study").exists()
