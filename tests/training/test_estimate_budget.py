"""The estimate says what a time budget buys before Start (steps, tokens, passes over the data),
and, below MIN_USEFUL_STEPS steps, the budget that would buy them; its speed figure is kept for the
run and for the next estimate of the same shape, which then runs no probe."""

import pytest

from minimind.training.estimate import MIN_USEFUL_STEPS, estimate
from training_helpers import make_config, write_text_corpus


def test_a_budget_estimate_says_what_it_buys_and_what_would_be_enough(tmp_path, tokenizer_dir):
    corpus = write_text_corpus(tmp_path)
    cfg = make_config(tmp_path, [corpus], model__tokenizer=str(tokenizer_dir), max_steps=0, time_budget_s=60.0,
                      compile="off")
    first = estimate(cfg, scratch=str(tmp_path / "scratch"))
    assert first.steps >= MIN_USEFUL_STEPS and first.useful_s == 0 and not first.measured_before
    assert first.tokens == first.steps * 4 * 32  # steps x rows x tokens
    assert first.passes > 0 and first.eta_s == 60.0 and first.setup_s > 0

    again = estimate(cfg, scratch=str(tmp_path / "scratch2"))
    assert again.measured_before and again.seconds_per_step == pytest.approx(first.seconds_per_step, rel=1e-4)  # no probe

    # a budget too short for MIN_USEFUL_STEPS steps: the estimate names the one that would buy them
    short = make_config(tmp_path, [corpus], model__tokenizer=str(tokenizer_dir), max_steps=0, compile="off",
                        time_budget_s=15 * first.seconds_per_step)  # under 20 steps, whatever the set-up takes
    tight = estimate(short, scratch=str(tmp_path / "scratch3"))
    assert tight.steps < MIN_USEFUL_STEPS
    assert tight.useful_s >= tight.setup_s + MIN_USEFUL_STEPS * tight.seconds_per_step
