"""optim.ema: a moving average of the trained weights, which evaluations and checkpoints see while
the optimizer goes on from the weights themselves."""

import os
import signal

import pytest
import torch
from safetensors.torch import load_file
from training_helpers import assert_same_losses, make_config, write_text_corpus

from minimind.errors import ConfigError, TrainingError
from minimind.training import TrainConfig, train
from minimind.training.config import EMA_DECAY
from minimind.training.ema import AVERAGE, TRAINED, WeightAverage, decay_at


def _model() -> torch.nn.Module:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.Linear(3, 2))
    model[1].bias.requires_grad_(False)  # a frozen weight has no average
    return model


def _step(model, step: int) -> None:
    with torch.no_grad():
        for p in model.parameters():
            if p.requires_grad:
                p.add_(torch.randn_like(p) * step)


def test_the_average_moves_by_one_minus_the_decay_which_starts_low():
    assert decay_at(0.998, 1) == pytest.approx(2 / 11) and decay_at(0.998, 90) == pytest.approx(0.91)
    assert decay_at(0.998, 10_000) == 0.998 and decay_at(0.5, 30) == 0.5
    model = _model()
    average = WeightAverage(model, 0.9)
    assert sorted(average.average) == ["0.bias", "0.weight", "1.weight"]
    expected = {name: p.detach().clone() for name, p in model.named_parameters() if p.requires_grad}
    for step in range(1, 30):
        _step(model, step)
        average.update(step)
        d = decay_at(0.9, step)
        for name, p in model.named_parameters():
            if p.requires_grad:
                expected[name] = d * expected[name] + (1 - d) * p.detach()
    for name, value in expected.items():
        torch.testing.assert_close(average.average[name], value, rtol=1e-6, atol=1e-6)
        assert not torch.allclose(value, dict(model.named_parameters())[name])


def test_a_swap_puts_the_average_in_and_the_trained_weights_back_exactly():
    model = _model()
    model[0].bias.data = model[0].bias.data.to(torch.bfloat16)  # a weight held in another dtype
    average = WeightAverage(model, 0.5)
    for step in range(1, 6):
        _step(model, step)
        average.update(step)
    params = dict(model.named_parameters())
    trained = {name: p.detach().clone() for name, p in params.items()}
    means = {name: a.clone() for name, a in average.average.items()}
    with WeightAverage(model, 0.5, start=6).swapped_in(5):  # before its first step: the trained weights
        assert all(torch.equal(p, trained[name]) for name, p in params.items())
    with average.swapped_in(5):
        for name, mean in means.items():
            assert torch.equal(params[name], mean.to(params[name].dtype))
        saved = average.state_tensors()  # (inside a swap, the copies are still the right way round)
    for name, p in params.items():
        assert torch.equal(p, trained[name])
    for name, mean in means.items():
        assert torch.equal(average.average[name], mean)
    # the trainer state: the trained weights and the average, put back as they were on resume
    fresh = _model()
    fresh[0].bias.data = fresh[0].bias.data.to(torch.bfloat16)
    again = WeightAverage(fresh, 0.5)
    again.load_state_tensors(average.state_tensors())
    for name, p in fresh.named_parameters():
        assert torch.equal(p, trained[name])
    for name, mean in means.items():
        assert torch.equal(again.average[name], mean)
    assert set(saved) == {TRAINED + n for n in means} | {AVERAGE + n for n in means}
    with pytest.raises(TrainingError, match="another model"):
        again.load_state_tensors({k: v for k, v in saved.items() if not k.endswith("1.weight")})


@pytest.mark.parametrize("raw, expected", [
    ({}, EMA_DECAY),                                                                 # a new model, pretrained
    ({"task": "classify", "mode": "sft", "model": {"init_from": "base"}}, EMA_DECAY),
    ({"task": "classify", "mode": "lora", "model": {"init_from": "base"}}, EMA_DECAY),
    ({"mode": "sft", "model": {"init_from": "base"}}, 0.0),                          # not measured
    ({"mode": "lora", "model": {"init_from": "base"}}, 0.0),
    ({"mode": "pretrain", "model": {"init_from": "base"}}, 0.0),                     # continued pretraining
    ({"distributed": "fsdp"}, 0.0),                                                  # shards: not done
    ({"optim": {"ema": 0.99}}, 0.99),                                                # chosen: kept
])
def test_auto_averages_where_it_was_measured_to_pay(raw, expected):
    assert TrainConfig.from_dict({"data": {"files": ["x"]}, **raw}).resolved("cpu").optim.ema == expected


@pytest.mark.parametrize("bad", [1.0, -0.1, 2, True])
def test_a_decay_outside_0_to_1_is_refused(bad):
    with pytest.raises(ConfigError, match="optim.ema must be"):
        TrainConfig.from_dict({"data": {"files": ["x"]}, "optim": {"ema": bad}}).resolved("cpu")
    with pytest.raises(ConfigError, match="distributed: fsdp"):
        TrainConfig.from_dict({"data": {"files": ["x"]}, "distributed": "fsdp", "optim": {"ema": 0.99}}).resolved("cpu")


def test_the_model_folder_holds_the_average_and_training_goes_as_without_it(tmp_path, tokenizer_dir):
    """The same run with and without the average: the same losses step by step (the optimizer never
    sees the average), the trained weights in the trainer state are the plain run's model, and the
    model folder is the saved average, which differs from them."""
    corpus = write_text_corpus(tmp_path)

    def build(where, **kw):
        return make_config(where, [corpus], model__tokenizer=str(tokenizer_dir), max_steps=8, eval_every=4,
                           optim__warmup_steps=2, **kw)

    averaged, plain = train(build(tmp_path / "a", optim__ema_from=4)), train(build(tmp_path / "b", optim__ema=0))
    assert TrainConfig.load(tmp_path / "a" / "run" / "config.yaml").optim.ema == EMA_DECAY
    assert_same_losses(tmp_path / "a" / "run", tmp_path / "b" / "run", range(1, 9), tolerance=1e-6)
    assert averaged["val_loss"] != plain["val_loss"]  # evaluations see the average
    final = tmp_path / "a" / "run" / "checkpoints" / "step-8"
    model, state = load_file(str(final / "model.safetensors")), load_file(str(final / "trainer" / "average.safetensors"))
    plain_model = load_file(str(tmp_path / "b" / "run" / "checkpoints" / "step-8" / "model.safetensors"))
    assert not (tmp_path / "b" / "run" / "checkpoints" / "step-8" / "trainer" / "average.safetensors").exists()
    names = [n for n in model if TRAINED + n in state]
    assert len(names) == len(model)
    differ = 0
    for name in names:
        torch.testing.assert_close(state[TRAINED + name], plain_model[name], rtol=0, atol=1e-6)
        assert torch.equal(model[name], state[AVERAGE + name].to(model[name].dtype))
        differ += not torch.allclose(model[name], plain_model[name])
    assert differ > len(names) // 2


def test_a_checkpoint_saved_without_an_average_resumes_with_one_from_its_weights(tmp_path, tokenizer_dir):
    """A run saved before optim.ema existed (or with it at 0) and resumed with the average on: the
    average starts from the checkpoint's weights, and the log says so."""
    cfg = make_config(tmp_path, [write_text_corpus(tmp_path)], model__tokenizer=str(tokenizer_dir), max_steps=6,
                      optim__ema=0)

    def stop(step, total, info):
        if step == 3:
            os.kill(os.getpid(), signal.SIGTERM)

    assert train(cfg, progress=stop)["step"] == 3
    assert not (tmp_path / "run" / "checkpoints" / "step-3" / "trainer" / "average.safetensors").exists()
    cfg.optim.ema = None  # auto, as a run folder written before optim.ema reads
    assert train(cfg, resume=True)["state"] == "finished"
    assert "step-3 holds no weight average: the average starts from its weights" in (
        tmp_path / "run" / "train.log").read_text()
    assert (tmp_path / "run" / "checkpoints" / "step-6" / "trainer" / "average.safetensors").is_file()


def test_a_run_shorter_than_ema_from_keeps_its_last_steps_weights(tmp_path, tokenizer_dir):
    """Below optim.ema_from (1,000 by default) a run evaluates and saves its trained weights, as
    without the average (which its trainer state still keeps, for a resume past that step)."""
    corpus = write_text_corpus(tmp_path)
    runs = {name: train(make_config(tmp_path / name, [corpus], model__tokenizer=str(tokenizer_dir), max_steps=6,
                                    eval_every=3, **kw)) for name, kw in (("a", {}), ("b", {"optim__ema": 0}))}
    assert runs["a"]["val_loss"] == runs["b"]["val_loss"]
    a, b = (tmp_path / name / "run" / "checkpoints" / "step-6" for name in "ab")
    assert load_file(str(a / "model.safetensors")).keys() == load_file(str(b / "model.safetensors")).keys()
    for name, tensor in load_file(str(a / "model.safetensors")).items():
        assert torch.equal(tensor, load_file(str(b / "model.safetensors"))[name])
    assert (a / "trainer" / "average.safetensors").is_file()
    assert "from step 1,000 on" in (tmp_path / "a" / "run" / "train.log").read_text()
