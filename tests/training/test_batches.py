"""The batch order (training/batches.py): a pure function of (seed, step); grouped by length, each
epoch still visits every row once, batches pad far less, and ranks split the same global batch."""

import random

import pytest
import torch
from datasets import Dataset

from minimind.training.batches import GROUP_BATCHES, BatchStream


def _rows(n: int, seed: int = 0) -> Dataset:
    rng = random.Random(seed)
    lengths = [rng.choice([rng.randint(5, 30), rng.randint(30, 250)]) for _ in range(n)]
    return Dataset.from_dict({"input_ids": [[3 + i % 7] * k for i, k in enumerate(lengths)],
                              "label": [i % 3 for i in range(n)]})


def _row_ids(stream: BatchStream, step: int) -> list[int]:
    base = step * stream.global_batch
    return stream._rows(base, stream.global_batch)


def _padded_share(stream: BatchStream, steps: int) -> float:
    real = padded = 0
    for step in range(steps):
        lengths = [len(stream.dataset[i]["input_ids"]) for i in _row_ids(stream, step)]
        real, padded = real + sum(lengths), padded + len(lengths) * max(lengths)
    return real / padded


@pytest.mark.parametrize("rows", [8 * GROUP_BATCHES * 2, 8 * GROUP_BATCHES * 2 + 5])
def test_grouped_batches_visit_every_row_once_an_epoch_and_pad_less(rows):
    data = _rows(rows)
    grouped = BatchStream(data, 4, 2, seed=3, pad_id=0, group_by_length=True)
    plain = BatchStream(data, 4, 2, seed=3, pad_id=0)
    for epoch in range(3):  # each epoch's order is a permutation of the rows, the later ones' too
        assert sorted(grouped._permutation(epoch).tolist()) == list(range(rows))
    steps = 3 * rows // grouped.global_batch
    assert _padded_share(grouped, steps) > 0.85 > 0.6 > _padded_share(plain, steps)
    # in a later epoch too (batches straddle epochs when the rows are not a whole number of batches)
    later = range(rows // grouped.global_batch + 1, steps)
    share = sum(_padded_share_at(grouped, s) for s in later) / len(later)
    assert share > 0.8, share


def _padded_share_at(stream: BatchStream, step: int) -> float:
    lengths = [len(stream.dataset[i]["input_ids"]) for i in _row_ids(stream, step)]
    return sum(lengths) / (len(lengths) * max(lengths))


def test_grouped_order_is_a_pure_function_of_seed_and_step_and_ranks_split_it():
    data = _rows(300)
    one = BatchStream(data, 4, 1, seed=7, pad_id=0, world=1, group_by_length=True)
    again = BatchStream(data, 4, 1, seed=7, pad_id=0, world=1, group_by_length=True)
    other = BatchStream(data, 4, 1, seed=8, pad_id=0, world=1, group_by_length=True)
    for step in (0, 5, 80, 151):  # (a fresh stream: what a resumed run builds)
        assert torch.equal(next(one.micro_batches(step))["input_ids"], next(again.micro_batches(step))["input_ids"])
    assert any(_row_ids(one, s) != _row_ids(other, s) for s in range(10))
    # two ranks with 2 rows each see the 4 rows one process with batch 4 sees
    ranks = [BatchStream(data, 2, 1, seed=7, pad_id=0, rank=r, world=2, group_by_length=True) for r in (0, 1)]
    for step in (0, 9, 120):
        split = torch.cat([next(r.micro_batches(step))["labels"] for r in ranks])
        assert torch.equal(split, next(one.micro_batches(step))["labels"])


def test_grouping_is_refused_where_length_tells_the_classes_apart():
    """Texts whose class shows in their length would make grouped batches of one class each."""
    from minimind.training.batches import groups_mixed

    mixed = _rows(400)
    assert groups_mixed(mixed, 8, seed=0)
    by_length = Dataset.from_dict({"input_ids": [[5] * (10 if i % 2 else 40) for i in range(400)],
                                   "label": [i % 2 for i in range(400)]})
    assert not groups_mixed(by_length, 8, seed=0)
    assert groups_mixed(Dataset.from_dict({"input_ids": [[5] * 3] * 4}), 8, seed=0)  # unlabelled, or too few
