"""`compile: auto` keeps compiled layers only where the run measures them faster (CompileTrial):
eager steps are timed, the layers compile, compiled steps are timed, and the faster wins. On the
trainer's fake clock, a run whose compiled steps are faster keeps them; one whose compiled steps
are no faster goes back to eager; the compiling steps' seconds stay out of the budget's figures."""

import pytest
from helpers import tiny_config
from training_helpers import fake_clock, make_config, write_text_corpus

from minimind import MiniMindForCausalLM
from minimind.lstm import MiniMindLSTMConfig, MiniMindLSTMForCausalLM
from minimind.training import RunDir, train
from minimind.training import loop as training_loop
from minimind.training.compiling import (
    MIN_GAIN,
    TRIAL_COMPILE_STEPS,
    TRIAL_COMPILED_STEPS,
    TRIAL_EAGER_STEPS,
    CompileTrial,
    decoder_layers,
    measure_compile,
)


def _walk(trial: CompileTrial, eager_s: float, compiled_s: float) -> list:
    """What the trial says after each step: a slow warm-up step, eager steps, 30-s compiling steps,
    then compiled ones; with whether each step was a compiling one."""
    said = []
    seconds = [9.0] + [eager_s] * TRIAL_EAGER_STEPS + [30.0] * TRIAL_COMPILE_STEPS + [compiled_s] * (
        TRIAL_COMPILED_STEPS + 2)
    for s in seconds:
        compiling = trial.compiling
        said.append((trial.after_step(s), compiling))
    return said


def test_the_trial_compiles_after_the_eager_steps_and_keeps_what_is_faster():
    said = _walk(CompileTrial(), 1.0, 0.9)
    actions = [a for a, _ in said]
    compiling = [c for _, c in said]
    at = 1 + TRIAL_EAGER_STEPS  # the warm-up step, then the eager ones
    assert actions[at - 1] == "compile" and actions[:at - 1] == [None] * (at - 1)
    assert compiling == [False] * at + [True] * TRIAL_COMPILE_STEPS + [False] * (TRIAL_COMPILED_STEPS + 2)
    decided = at + TRIAL_COMPILE_STEPS + TRIAL_COMPILED_STEPS - 1
    assert actions[decided] == "keep" and set(actions[decided + 1:]) == {None}
    assert [a for a, _ in _walk(CompileTrial(), 1.0, 1.0 - MIN_GAIN / 2)][decided] == "eager"  # not enough
    assert [a for a, _ in _walk(CompileTrial(), 1.0, 1.2)][decided] == "eager"
    trial = CompileTrial()
    _walk(trial, 1.0, 0.5)
    assert (trial.eager_s, trial.compiled_s) == (1.0, 0.5)  # the compiling steps' 30 s count nowhere


def test_only_a_long_auto_run_with_decoder_layers_is_measured(tmp_path):
    model = MiniMindForCausalLM(tiny_config())
    cfg = make_config(tmp_path, ["x"], compile="auto")
    assert measure_compile(cfg, 300, model) and not measure_compile(cfg, 299, model)
    cfg.compile = "on"  # compiled from the first step, unmeasured
    assert not measure_compile(cfg, 300, model)
    assert not measure_compile(make_config(tmp_path, ["x"], compile="auto", mode="grpo"), 300, model)
    lstm = MiniMindLSTMForCausalLM(MiniMindLSTMConfig(vocab_size=64, hidden_size=16, num_hidden_layers=1))
    assert not measure_compile(cfg, 300, lstm)  # no decoder layers


@pytest.mark.parametrize("compiled_batch_s, kept", [(0.0625, True), (0.125, False)])
def test_a_run_keeps_compiled_layers_only_when_its_compiled_steps_are_faster(
        tmp_path, tokenizer_dir, monkeypatch, compiled_batch_s, kept):
    clock = fake_clock(monkeypatch)  # eager: 1/8 s a micro-batch
    compiled_layers = []

    def compile_now(model, log):  # a stand-in compile: the layers run as before, at the clock's new speed
        layers = decoder_layers(model)
        for layer in layers:
            layer._compiled_call_impl = layer._call_impl
        compiled_layers.extend(layers)
        clock.per_batch = compiled_batch_s
        log(f"compiling {len(layers)} decoder layers (torch.compile)")
        return layers

    monkeypatch.setattr(training_loop, "compile_now", compile_now)
    corpus = write_text_corpus(tmp_path)
    cfg = make_config(tmp_path, [corpus], model__tokenizer=str(tokenizer_dir), max_steps=300, compile="auto",
                      eval_every=0, save_every=0, eval_batches=1, log_every=50)
    status = train(cfg)
    log = RunDir(tmp_path / "run").log_file.read_text()
    assert status["state"] == "finished" and status["step"] == 300 and compiled_layers
    assert "compiling 2 decoder layers" in log
    if kept:
        assert "compiled layers kept: 0.062s a step against 0.125s eager" in log
        assert all(layer._compiled_call_impl is not None for layer in compiled_layers)
    else:
        assert "compiled layers dropped: 0.125s a step against 0.125s eager (less than 3 % faster)" in log
        assert all(layer._compiled_call_impl is None for layer in compiled_layers)
