"""MiniMindForSequenceClassification: pooling (the last token's, or the mean) that padding on either side
does not change, labels in the config, save and load (also through AutoModelForSequenceClassification and
load_model), a classifier built on the shipped causal model's decoder, the loss, and `predict`."""

import json

import pytest
import torch
from transformers import AutoModelForSequenceClassification

import minimind  # noqa: F401  (Auto-class registration)
from minimind import MiniMindForCausalLM, MiniMindForSequenceClassification
from minimind.checkpoint import is_classifier, load_model
from minimind.classifier import classes_of, classifier_from, label_maps, last_token_index, pooled, predict
from minimind.errors import ConfigError
from minimind.tokenizer import load_tokenizer
from helpers import ROOT, tiny_config

SHIPPED = ROOT / "checkpoints" / "minimind-tang"
CLASSES = ["neg", "neutral", "pos"]


def classifier(**overrides) -> MiniMindForSequenceClassification:
    torch.manual_seed(0)
    return MiniMindForSequenceClassification(tiny_config(**label_maps(CLASSES), **overrides)).eval()


def padded(rows, side: str, pad: int = 0):
    width = max(len(r) for r in rows)
    ids = torch.full((len(rows), width), pad, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for i, row in enumerate(rows):
        span = slice(0, len(row)) if side == "right" else slice(width - len(row), width)
        ids[i, span], mask[i, span] = row, 1
    return ids, mask


@pytest.mark.parametrize("pooling", ["last", "mean"])
@pytest.mark.parametrize("side", ["right", "left"])
@pytest.mark.parametrize("position_encoding", ["rope", "alibi", "learned"])
def test_padded_batch_gives_each_rows_logits_alone(side, position_encoding, pooling):
    model = classifier(position_encoding=position_encoding, classifier_pooling=pooling)
    torch.manual_seed(1)
    rows = [torch.randint(3, 512, (n,)) for n in (9, 4, 1, 6)]
    ids, mask = padded(rows, side)
    batch = model(input_ids=ids, attention_mask=mask).logits
    alone = torch.cat([model(input_ids=row[None]).logits for row in rows])
    assert batch.shape == (4, 3)
    assert torch.allclose(batch, alone, atol=1e-5)


def test_last_token_index_finds_the_last_real_token_on_either_side():
    hidden = torch.zeros(3, 5, 1)
    mask = torch.tensor([[1, 1, 1, 0, 0], [0, 0, 1, 1, 1], [1, 1, 1, 1, 1]])
    assert last_token_index(mask, hidden).tolist() == [2, 4, 4]
    assert last_token_index(None, hidden).tolist() == [4, 4, 4]


def test_mean_pooling_averages_the_real_tokens_only():
    hidden = torch.arange(30, dtype=torch.float32).reshape(3, 5, 2)
    mask = torch.tensor([[1, 1, 1, 0, 0], [0, 0, 1, 1, 1], [1, 1, 1, 1, 1]])
    expected = torch.stack([hidden[0, :3].mean(0), hidden[1, 2:].mean(0), hidden[2].mean(0)])
    assert torch.equal(pooled(hidden, mask, "mean"), expected)
    assert torch.equal(pooled(hidden, None, "mean"), hidden.mean(1))
    assert torch.equal(pooled(hidden, mask, "last"), hidden[[0, 1, 2], [2, 4, 4]])
    with pytest.raises(ValueError, match="classifier_pooling must be one of"):
        classifier(classifier_pooling="max")


def test_labels_give_the_cross_entropy_optionally_weighted():
    model = classifier()
    ids, labels = torch.randint(3, 512, (4, 6)), torch.tensor([0, 2, 1, 2])
    out = model(input_ids=ids, labels=labels)
    assert torch.allclose(out.loss, torch.nn.functional.cross_entropy(out.logits, labels))
    weights = torch.tensor([1.0, 2.0, 0.5])
    weighted = model(input_ids=ids, labels=labels, class_weights=weights).loss
    assert torch.allclose(weighted, torch.nn.functional.cross_entropy(out.logits, labels, weight=weights))


@pytest.mark.parametrize("pooling", ["last", "mean"])
def test_save_load_keeps_labels_and_logits(tmp_path, pooling):
    model = classifier(classifier_pooling=pooling)
    model.save_pretrained(tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    assert config.get("classifier_pooling", "last") == pooling
    assert config["architectures"] == ["MiniMindForSequenceClassification"]
    assert config["id2label"] == {"0": "neg", "1": "neutral", "2": "pos"} and config["label2id"]["pos"] == 2
    ids = torch.randint(3, 512, (2, 7))
    for loaded in (AutoModelForSequenceClassification.from_pretrained(tmp_path), load_model(tmp_path)):
        assert isinstance(loaded, MiniMindForSequenceClassification)
        assert classes_of(loaded) == CLASSES
        assert torch.equal(loaded.eval()(input_ids=ids).logits, model(input_ids=ids).logits)
    assert is_classifier(tmp_path)


def test_the_shipped_causal_model_loads_as_a_classifier_with_a_new_head():
    model = MiniMindForSequenceClassification.from_pretrained(SHIPPED, **label_maps(["a", "b"]))
    causal = MiniMindForCausalLM.from_pretrained(SHIPPED)
    for (name, mine), theirs in zip(model.model.state_dict().items(), causal.model.state_dict().values()):
        assert torch.equal(mine, theirs), name
    assert model.score.weight.shape == (2, model.config.hidden_size)
    assert model.score.weight.std().item() == pytest.approx(model.config.initializer_range, rel=0.2)
    assert not is_classifier(SHIPPED)
    built = classifier_from(causal, ["a", "b"], seed=0)  # the trainer's way: the decoder itself, a new head
    assert built.model is causal.model and classes_of(built) == ["a", "b"]
    assert built.config.architectures == ["MiniMindForSequenceClassification"]
    assert classifier_from(built, ["a", "b"]) is built  # same classes: kept as is
    assert classes_of(classifier_from(built, ["x", "y", "z"])) == ["x", "y", "z"]


def test_an_lstm_model_is_refused_with_a_reason():
    from minimind.lstm import MiniMindLSTMConfig, MiniMindLSTMForCausalLM

    lstm = MiniMindLSTMForCausalLM(MiniMindLSTMConfig.from_preset(next(iter(minimind.LSTM_PRESETS)), vocab_size=64))
    with pytest.raises(ConfigError, match="transformer MiniMind decoder"):
        classifier_from(lstm, ["a", "b"])


def test_predict_gives_label_probabilities_as_a_batch_or_one_by_one():
    tokenizer = load_tokenizer(SHIPPED)
    # in fp32: the shipped bf16 weights run in bf16, whose kernels round differently by batch shape
    # on a CPU without bf16 instructions (0.25 % apart there); padding must change nothing beyond that
    model = MiniMindForSequenceClassification.from_pretrained(SHIPPED, **label_maps(["李白", "杜甫"])).float()
    texts = ["床前明月光，疑是地上霜。", "國破山河在", "春"]
    together = predict(model, tokenizer, texts, batch_size=3)
    one_by_one = [predict(model, tokenizer, [t])[0] for t in texts]
    assert [list(p) for p in together] == [["李白", "杜甫"]] * 3
    for a, b in zip(together, one_by_one):
        assert sum(a.values()) == pytest.approx(1.0)
        assert a == pytest.approx(b, abs=1e-5)
    single = predict(model, tokenizer, "春")  # one text alone is a list of one
    assert len(single) == 1 and single[0] == pytest.approx(one_by_one[2], abs=1e-6)


def test_the_labels_beside_an_adapter_are_read_in_one_place_and_refused_with_the_file_named(tmp_path):
    """The loader and the API's classifier list read labels.json through read_adapter_labels:
    an adapter from before pooling was recorded reads as "last"; a broken file is a
    CheckpointError naming it (the API lists no classes for it)."""
    from minimind.classifier import ADAPTER_LABELS, read_adapter_labels, write_adapter_labels
    from minimind.errors import CheckpointError
    from webapp.api import folder_labels

    write_adapter_labels(tmp_path, ["李白", "杜甫"], "mean")
    assert read_adapter_labels(tmp_path) == (["李白", "杜甫"], "mean") and folder_labels(tmp_path) == ["李白", "杜甫"]
    (tmp_path / ADAPTER_LABELS).write_text(json.dumps({"classes": ["a", "b"]}))
    assert read_adapter_labels(tmp_path) == (["a", "b"], "last")
    for broken in ('{"classes": ["a"], "pooling": "max"}', "[1, 2]", "{", '{"pooling": "last"}'):
        (tmp_path / ADAPTER_LABELS).write_text(broken)
        with pytest.raises(CheckpointError, match=ADAPTER_LABELS):
            read_adapter_labels(tmp_path)
        assert folder_labels(tmp_path) == []


def test_label_smoothing_moves_that_share_of_the_target_evenly_to_every_class():
    from minimind.classifier import classification_loss

    torch.manual_seed(0)
    logits, labels = torch.randn(6, 3), torch.tensor([0, 1, 2, 2, 1, 0])
    logp = logits.log_softmax(-1)
    hard = -logp[torch.arange(6), labels]
    by_hand = (0.9 * hard + 0.1 * -logp.mean(-1)).mean()
    assert torch.allclose(classification_loss(logits, labels, smoothing=0.1), by_hand)
    assert torch.allclose(classification_loss(logits, labels), hard.mean())


def test_a_bad_label_smoothing_is_refused_with_its_range():
    from minimind.training.config import TrainConfig

    raw = {"task": "classify", "mode": "sft", "data": {"files": ["x"]}, "model": {"init_from": "somewhere"}}
    assert TrainConfig.from_dict({**raw, "classify": {"label_smoothing": 0.1}}).resolved("cpu").classify.label_smoothing == 0.1
    for bad in (-0.1, 1, float("nan"), True, "some"):
        with pytest.raises(ConfigError, match="classify.label_smoothing must be a number"):
            TrainConfig.from_dict({**raw, "classify": {"label_smoothing": bad}}).resolved("cpu")
