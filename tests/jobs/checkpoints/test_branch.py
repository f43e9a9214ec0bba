"""WSD cooldown branches: a branch forked from a constant-LR run's kept checkpoint is, bitwise on
CPU, the independent WSD run to its budget; and it refuses a parent it cannot continue."""

from __future__ import annotations

from pathlib import Path

import pytest

from foundation.config import ConfigError
from jobs.checkpoints.checkpoint import list_checkpoints
from jobs.config import ScheduleConfig
from jobs.engines.optim import lr_at
from jobs.testing import tiny_run_config

WARMUP = 2
COOLDOWN = 0.25
BUDGETS = [8, 12]  # branch budgets in steps; the stable run forks at each one's decay start
HORIZON = max(BUDGETS)  # every run of the family draws its sample order for this many steps


def _wsd(steps: int) -> dict:
    return {"kind": "wsd", "warmup_steps": WARMUP, "decay_fraction": COOLDOWN}


def _branch_step(steps: int) -> int:
    return ScheduleConfig(**_wsd(steps)).decay_start(steps)


def _cfg(tmp: Path, data_dir: Path, name: str, **overrides):
    train = {"dataset_steps": HORIZON, "checkpoint_interval": 3, **overrides.pop("train", {})}
    return tiny_run_config(
        tmp / name,
        data_dir,
        name=name,
        output_dir=str(tmp / name / "run"),
        train=train,
        **overrides,
    )


def test_the_stable_schedule_is_the_wsd_schedule_up_to_each_branch_point():
    stable = ScheduleConfig(kind="constant", warmup_steps=WARMUP)
    for steps in BUDGETS:
        wsd = ScheduleConfig(**_wsd(steps))
        k = wsd.decay_start(steps)
        assert k == steps - round(COOLDOWN * steps)
        same = [lr_at(s, HORIZON, 1e-3, stable) == lr_at(s, steps, 1e-3, wsd) for s in range(k)]
        assert all(same)
        assert lr_at(k, steps, 1e-3, wsd) < 1e-3  # the decay starts at the branch point


def test_branch_equals_the_independent_wsd_run_bitwise(tmp_path, data_dir, capsys):
    from jobs.loop.trainer import train

    points = [_branch_step(n) for n in BUDGETS]
    stable = _cfg(
        tmp_path,
        data_dir,
        "stable",
        train={"steps": max(points), "keep_steps": points, "keep_checkpoints": 1},
        schedule={"kind": "constant", "warmup_steps": WARMUP},
    )
    assert train(stable).status == "completed"
    kept = sorted(s for s, _ in list_checkpoints(Path(stable.output_dir) / "checkpoints"))
    assert set(points) <= set(kept)  # rotation (keep 1) never removes a branch point

    refs = {}
    for steps, point in zip(BUDGETS, points, strict=True):
        independent = _cfg(
            tmp_path, data_dir, f"indep{steps}", train={"steps": steps}, schedule=_wsd(steps)
        )
        branch = _cfg(
            tmp_path,
            data_dir,
            f"branch{steps}",
            train={"steps": steps},
            schedule=_wsd(steps),
            init_from={"output_dir": stable.output_dir, "step": point},
        )
        ref, got = train(independent), train(branch)
        refs[steps] = ref
        assert got.status == ref.status == "completed"
        assert got.train_losses == ref.train_losses  # bitwise, all `steps` of them
        assert got.final_val_loss == ref.final_val_loss
        assert got.tokens == ref.tokens == steps * independent.tokens_per_step
        # it continued the parent: it trained only its own cooldown steps
        assert got.train_losses[:point] == train(stable).train_losses[:point]

    # a rerun of a branch with its own checkpoints resumes them, not the parent's
    again = _cfg(
        tmp_path,
        data_dir,
        f"branch{BUDGETS[0]}",
        train={"steps": BUDGETS[0]},
        schedule=_wsd(BUDGETS[0]),
        init_from={"output_dir": stable.output_dir, "step": points[0]},
    )
    (Path(again.output_dir) / "result.json").unlink()
    capsys.readouterr()
    assert train(again).train_losses == refs[BUDGETS[0]].train_losses
    printed = capsys.readouterr().out
    assert f"resumed at step {BUDGETS[0]}" in printed and "forked from" not in printed


def test_a_missing_parent_checkpoint_is_a_clear_error(tmp_path, data_dir):
    from jobs.loop.trainer import train

    branch = _cfg(
        tmp_path,
        data_dir,
        "orphan",
        train={"steps": 8},
        schedule=_wsd(8),
        init_from={"output_dir": str(tmp_path / "nowhere"), "step": 6},
    )
    with pytest.raises(FileNotFoundError, match="no checkpoint at step 6.*has not finished"):
        train(branch)


def test_a_parent_with_another_recipe_is_refused(tmp_path, data_dir):
    from foundation.config import dump_file
    from jobs.loop.trainer import train

    parent = _cfg(
        tmp_path,
        data_dir,
        "parent",
        train={"steps": 6, "keep_steps": [6]},
        schedule={"kind": "constant", "warmup_steps": WARMUP},
        optimizer={"lr": 1e-3},
    )
    assert train(parent).status == "completed"
    dump_file(parent, Path(parent.output_dir) / "run_config.yaml")
    branch = _cfg(
        tmp_path,
        data_dir,
        "child",
        train={"steps": 8},
        schedule=_wsd(8),
        init_from={"output_dir": parent.output_dir, "step": 6},
    )
    with pytest.raises(ValueError, match="different optimizer"):
        train(branch)


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"init_from": {"output_dir": "p", "step": 7}}, "init_from.step: 7 must be"),
        ({"init_from": {"output_dir": "p", "step": 1}}, "init_from.step: 1 must be"),
        (
            {"init_from": {"output_dir": "p", "step": 6}, "schedule": {"kind": "cosine"}},
            "needs schedule.kind 'wsd'",
        ),
        ({"train": {"keep_steps": [9]}}, "train.keep_steps"),
        ({"train": {"dataset_steps": 3}}, "train.dataset_steps=3"),
    ],
)
def test_bad_branch_configs_name_the_field(tmp_path, data_dir, changes, message):
    base = {"train": {"steps": 8}, "schedule": _wsd(8)}
    for key, value in changes.items():
        base[key] = {**base.get(key, {}), **value} if isinstance(value, dict) else value
    with pytest.raises(ConfigError, match=message):
        tiny_run_config(tmp_path, data_dir, **base)
