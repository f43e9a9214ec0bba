"""Training samples and validation windows: shapes, seed-only order, identical across processes."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from data_prep import DataConfig, load_manifest, training_dataset, validation_windows
from tests.distributed import run_ranks

SEQ = 64


def _samples(data: DataConfig, num_samples: int, count: int) -> list[list[int]]:
    dataset = training_dataset(data, SEQ, num_samples)
    return [dataset[i].tolist() for i in range(count)]


def test_samples_are_windows_of_the_train_stream(tiny):
    manifest = load_manifest(tiny)
    dataset = training_dataset(DataConfig(path=str(tiny), seed=7), SEQ, 50)
    assert len(dataset) == 50
    item = dataset[3]
    assert item.shape == (SEQ + 1,) and item.dtype == torch.int64
    assert 0 <= int(item.min()) and int(item.max()) < manifest.vocab_size
    # every sample is a contiguous slice of the train split's token stream
    train = torch.from_numpy(np.fromfile(tiny / "train.bin", manifest["dtype"]).astype(np.int64))
    windows = train.unfold(0, SEQ + 1, 1)  # [T - SEQ, SEQ + 1]
    assert bool((windows == item).all(dim=1).any())
    with pytest.raises(IndexError):
        dataset[50]


def test_order_depends_on_the_data_seed_only(tiny):
    a = _samples(DataConfig(path=str(tiny), seed=1, val_seed=5, num_val_windows=3), 40, 8)
    b = _samples(DataConfig(path=str(tiny), seed=1, val_seed=9, num_val_windows=9), 40, 8)
    c = _samples(DataConfig(path=str(tiny), seed=2), 40, 8)
    assert a == b
    assert a != c
    # within one epoch a shorter run sees a prefix of a longer one (token budgets are nested)
    assert _samples(DataConfig(path=str(tiny), seed=1), 400, 8) == a


def test_more_samples_than_one_epoch_repeats_with_fresh_shuffle(tiny):
    tokens = load_manifest(tiny)["splits"]["train"]["tokens"]
    num_samples = 2 * tokens // SEQ + 10  # two epochs and a bit
    dataset = training_dataset(DataConfig(path=str(tiny), seed=3), SEQ, num_samples)
    assert len(dataset) == num_samples
    assert dataset[num_samples - 1].shape == (SEQ + 1,)


def test_validation_windows(tiny):
    data = DataConfig(path=str(tiny), num_val_windows=12, val_seed=4)
    windows = validation_windows(data, SEQ)
    assert windows.shape == (12, SEQ + 1) and windows.dtype == torch.int64
    assert torch.equal(windows, validation_windows(data, SEQ))
    other = validation_windows(DataConfig(path=str(tiny), num_val_windows=12, val_seed=5), SEQ)
    assert not torch.equal(windows, other)
    assert len({tuple(w.tolist()) for w in windows}) == 12  # drawn without replacement


def test_too_many_validation_windows_is_a_clear_error(tiny):
    with pytest.raises(ValueError, match="data.num_val_windows: 100000 windows"):
        validation_windows(DataConfig(path=str(tiny), num_val_windows=100_000), SEQ)


def test_bad_sizes_are_clear_errors(tiny):
    with pytest.raises(ValueError, match="seq_length=0"):
        training_dataset(DataConfig(path=str(tiny)), 0, 10)
    with pytest.raises(ValueError, match="fewer than one sample"):
        training_dataset(DataConfig(path=str(tiny)), 10**8, 1)
    with pytest.raises(ValueError, match="no such prepared dataset"):
        training_dataset(DataConfig(path=str(tiny / "nope")), SEQ, 1)


def _read_on_rank(rank: int, world_size: int, path: str, distributed: bool) -> tuple:
    if distributed:
        torch.distributed.init_process_group("gloo", rank=rank, world_size=world_size)
    try:
        data = DataConfig(path=path, seed=11, num_val_windows=6, val_seed=2)
        samples = _samples(data, 300, 6)
        return samples, validation_windows(data, SEQ).tolist()
    finally:
        if distributed:
            torch.distributed.destroy_process_group()


@pytest.mark.parametrize("distributed", [False, True], ids=["processes", "gloo"])
def test_identical_in_every_process(tiny, distributed):
    """Plain processes and a 2-rank gloo job agree with each other and with this process."""
    here = _read_on_rank(0, 1, str(tiny), False)
    results = run_ranks(_read_on_rank, 2, str(tiny), distributed, timeout=300)
    assert results[0] == results[1] == here


def test_select_windows_are_disjoint_fixed_and_leave_the_loss_windows_alone(tiny):
    """Issue 11: a second fixed set for choosing LRs, disjoint from the reported one."""
    data = DataConfig(path=str(tiny), num_val_windows=12, val_seed=4, num_select_windows=10)
    loss = validation_windows(data, SEQ, "loss")
    select = validation_windows(data, SEQ, "select")
    assert loss.shape == (12, SEQ + 1) and select.shape == (10, SEQ + 1)
    # the same every call and for every cell: only the dataset, seq_length and val_seed matter
    again = DataConfig(
        path=str(tiny), seed=99, num_val_windows=12, val_seed=4, num_select_windows=10
    )
    assert torch.equal(select, validation_windows(again, SEQ, "select"))
    assert torch.equal(loss, validation_windows(again, SEQ, "loss"))
    # disjoint: no window of one set is a window of the other (positions in the stream)
    manifest = load_manifest(tiny)
    stream = np.fromfile(tiny / "valid.bin", manifest["dtype"]).astype(np.int64)
    width = SEQ + 1
    cut = torch.from_numpy(stream[: stream.size // width * width].reshape(-1, width))
    where = lambda ws: {int((cut == w).all(dim=1).nonzero()[0]) for w in ws}  # noqa: E731
    assert len(where(loss)) == 12 and len(where(select)) == 10
    assert not where(loss) & where(select)
    # adding a select set changes no reported loss: the loss windows are drawn as before
    plain = DataConfig(path=str(tiny), num_val_windows=12, val_seed=4)
    assert torch.equal(loss, validation_windows(plain, SEQ))
    assert validation_windows(plain, SEQ, "select").shape == (0, SEQ + 1)
    other = DataConfig(path=str(tiny), num_val_windows=12, val_seed=5, num_select_windows=10)
    assert not torch.equal(select, validation_windows(other, SEQ, "select"))


def test_select_windows_that_do_not_fit_name_the_field_and_the_fix(tiny):
    tokens = load_manifest(tiny)["splits"]["valid"]["tokens"]
    available = tokens // (SEQ + 1)
    data = DataConfig(path=str(tiny), num_val_windows=available - 2, num_select_windows=3)
    with pytest.raises(ValueError, match=r"data.num_select_windows: .* do not fit .*\(at most"):
        validation_windows(data, SEQ, "select")
    with pytest.raises(ValueError, match="lower num_val_windows or num_select_windows"):
        validation_windows(data, SEQ, "loss")  # the loss set alone would fit: the pair does not
    with pytest.raises(ValueError, match="which: 'train'"):
        validation_windows(DataConfig(path=str(tiny)), SEQ, "train")
    with pytest.raises(ValueError, match="num_select_windows: -1 must be >= 0"):
        DataConfig(path=str(tiny), num_select_windows=-1).validate()
