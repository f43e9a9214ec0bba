"""The harness wrapper scores what a full forward pass scores; a cell evaluates exactly once."""

from __future__ import annotations

import json
import math

import pytest
import torch
import torch.nn.functional as F
from lm_eval.api.instance import Instance
from mlflow.tracking import MlflowClient

from foundation import contract as C
from jobs.evaluation.harness import MegatronLM, check_layout, load_tokenizer
from jobs.testing import tiny_run_config
from models import runtime
from models.build import build_gpt


@pytest.fixture(scope="module")
def scorer(tmp_path_factory, data_dir):
    config = tiny_run_config(tmp_path_factory.mktemp("eval"), data_dir=data_dir)
    model = build_gpt(config.model, config.parallel, seed=3)  # sets up a 1-process group
    yield MegatronLM(model, *load_tokenizer(data_dir), config.model.seq_length)
    runtime.destroy()  # so the tests after these find no process group (test_config's do not)


def _request(kind: str, args: tuple) -> Instance:
    return Instance(request_type=kind, doc={}, arguments=args, idx=0)


def _full_forward_loglik(lm: MegatronLM, tokens: list[int], num_scored: int) -> float:
    """Sum of log p(token) over the last `num_scored` tokens, from one unpadded forward."""
    ids = torch.tensor([tokens[:-1]])  # [1, s]
    positions = torch.arange(ids.shape[1])[None]
    with torch.no_grad():
        logprobs = F.log_softmax(lm.model(ids, positions, None).float(), dim=-1)[0]  # [s, v]
    target = torch.tensor(tokens[1:])
    picked = logprobs.gather(1, target[:, None])[:, 0]
    return float(picked[-num_scored:].sum())


def test_loglikelihood_equals_a_full_forward_and_padding_never_leaks(scorer):
    pairs = [("import os\nimport", " sys"), ("def __init__(self", ", *args):"), ("x = ", "1")]
    batched = scorer.loglikelihood([_request("loglikelihood", p) for p in pairs])
    for (context, continuation), (ll, _) in zip(pairs, batched, strict=True):
        head, cont = scorer._encode_pair(context, continuation)
        assert head + cont == scorer._encode(context + continuation)  # no token split at the seam
        expected = _full_forward_loglik(scorer, head + cont, len(cont))
        assert ll == pytest.approx(expected, abs=1e-4)  # rows of other lengths padded beside it
        alone = scorer.loglikelihood([_request("loglikelihood", (context, continuation))])[0][0]
        assert ll == pytest.approx(alone, abs=1e-4)


def test_rolling_loglikelihood_scores_every_token_once(scorer):
    short = "for i in range(10):\n    print(i)\n"
    tokens = [scorer.eod, *scorer._encode(short)]
    assert len(tokens) <= scorer.seq_length + 1
    (ll,) = scorer.loglikelihood_rolling([_request("loglikelihood_rolling", (short,))])
    assert ll == pytest.approx(_full_forward_loglik(scorer, tokens, len(tokens) - 1), abs=1e-4)
    long = short * 12  # several context windows of 32 tokens
    (ll_long,) = scorer.loglikelihood_rolling([_request("loglikelihood_rolling", (long,))])
    assert math.isfinite(ll_long) and ll_long < ll


def test_generation_and_model_parallel_layouts_are_refused(scorer):
    with pytest.raises(NotImplementedError, match="generate_until"):
        scorer.generate_until([_request("generate_until", ("x", {}))])
    with pytest.raises(ValueError, match="tensor_parallel=2.*tensor_parallel: 1"):
        check_layout(2, 1)
    check_layout(1, 1)


def test_a_cell_scores_and_logs_its_tasks_once_even_when_rerun_after_scoring(
    tmp_path, data_dir, mlflow_server, monkeypatch
):
    import jobs.evaluation.run as evaluation
    from jobs.loop.trainer import train

    calls = []
    real_evaluate = evaluation.evaluate

    def counted(*args, **kwargs):  # the real harness run, counted
        calls.append(args[3])
        return real_evaluate(*args, **kwargs)

    monkeypatch.setattr(evaluation, "evaluate", counted)
    config = tiny_run_config(
        tmp_path,
        data_dir=data_dir,
        evaluation={"tasks": ["scaling_local"], "limit": 12},
        tracking={"enabled": True, "tracking_uri": mlflow_server, "experiment": "jobs-eval"},
    )
    first = train(config)
    assert calls == [["scaling_local"]]
    client = MlflowClient(mlflow_server)
    metrics = client.get_run(first.run_id).data.metrics
    acc, bpb = C.eval_metric("scaling_local", "acc"), C.eval_metric("scaling_local", "bpb")
    assert 0.0 <= metrics[acc] <= 1.0 and 0.0 < metrics[bpb] < 20.0
    saved = tmp_path / "run" / "evaluation.json"
    assert json.loads(saved.read_text()) == {acc: metrics[acc], bpb: metrics[bpb]}

    # requeued after it scored but before its result was written: it resumes at its last step,
    # scores nothing again and MLflow keeps one value per metric
    (tmp_path / "run" / "result.json").unlink()
    again = train(config)
    assert again.run_id == first.run_id and again.status == C.COMPLETED
    assert calls == [["scaling_local"]]
    history = client.get_metric_history(first.run_id, bpb)
    assert [(m.value, m.step) for m in history] == [(metrics[bpb], config.train.steps)]


def test_data_parallel_ranks_wait_for_rank_0_to_score(tmp_path, data_dir):
    """DP=2 on two gloo processes: rank 0 scores, rank 1 waits at the barrier, both finish."""
    from jobs.testing import tiny_run_dict
    from tests.distributed import run_ranks
    from tests.jobs.helpers import train_ranks

    cfg = tiny_run_dict(
        tmp_path,
        data_dir,
        train={"steps": 4},
        parallel={"data_parallel": 2},
        evaluation={"tasks": ["scaling_local"], "limit": 8},
    )
    results = run_ranks(train_ranks, 2, [cfg])
    assert [r["status"] for (r,) in results] == [C.COMPLETED] * 2
    scores = json.loads((tmp_path / "run" / "evaluation.json").read_text())
    assert sorted(scores) == [C.eval_metric("scaling_local", m) for m in ("acc", "bpb")]
