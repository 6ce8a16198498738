"""Reinforce (GRPO) from the page, in headless Chromium: save the Tang prompts sample, choose
Reinforce (GRPO) with the shipped MiniMind-Tang as the start, tick one more reward, launch a
short run and watch it finish; the rewards plot and the table of held-out answers with their
rewards show what the run wrote."""

import re

import pytest
import yaml
from webapp_helpers import needs_shipped, pick

from minimind.training import RunDir
from webapp.context import SAMPLES

PROMPTS_SAMPLE = next(label for label, name in SAMPLES.items() if name == "tang_prompts.jsonl")

pytestmark = [pytest.mark.browser, needs_shipped("minimind-tang")]


def _save_prompts_sample(studio_page, expect) -> None:
    page = studio_page.page
    pick(page, "…or use a bundled sample", PROMPTS_SAMPLE)
    page.locator("#inspect-btn").click()
    expect(page.locator("#corpus-summary")).to_contain_text("prompts", timeout=120_000)
    studio_page.save_corpus("tang-prompts")


def _choose_grpo(page, expect) -> None:
    """Reinforce (GRPO) of the shipped model on the saved prompts: its own inputs appear, form and
    rhyme ticked; no_repetition ticked too shows its weight and parameter."""
    pick(page, "Start from", "shipped: minimind-tang")
    grpo_box = page.locator("#train-grpo")
    expect(grpo_box).to_be_hidden()
    page.locator("#train-mode").get_by_text("Reinforce (GRPO)", exact=True).click()
    expect(grpo_box).to_be_visible()
    expect(page.locator("#train-weights")).to_contain_text("QLoRA")
    expect(page.locator("#train-beta")).to_be_hidden()  # DPO's beta, not GRPO's KL beta
    for name, weight in (("form", "1"), ("rhyme", "1"), ("title", "0.5")):
        expect(page.locator(f"#reward-{name}-on input")).to_be_checked()
        expect(page.locator(f"#reward-{name}-weight input")).to_have_value(weight)
    expect(page.locator("#reward-rhyme-class_share input")).to_have_value("0.3")
    expect(page.locator("#reward-no_repetition-weight")).to_be_hidden()
    page.locator("#reward-no_repetition-on input").check()
    expect(page.locator("#reward-no_repetition-weight")).to_be_visible()
    page.locator("#reward-no_repetition-weight input").fill("0.5")
    expect(page.locator("#reward-no_repetition-n input")).to_have_value("2")
    pick(page, "Corpus", "tang-prompts")


def _short_run_settings(studio_page) -> None:
    page = studio_page.page
    studio_page.fill_train_form(steps=3, batch_size=2, eval_every=3)
    page.locator("#train-group-size input").fill("4")
    page.locator("#train-max-new-tokens input").fill("32")


def test_a_grpo_run_from_the_page(tmp_path, studio_page):
    from playwright.sync_api import expect

    page = studio_page()  # the shipped models of the repository
    expect(page.locator("#title")).to_contain_text("MiniMind Studio")
    _save_prompts_sample(studio_page, expect)
    page.get_by_role("tab", name="Train").click()
    _choose_grpo(page, expect)
    _short_run_settings(studio_page)

    # a bad reward parameter: the config's message, and no run
    page.locator("#reward-regex-on input").check()
    page.locator("#reward-regex-pattern input").fill("(unclosed")
    page.locator("#start-btn").click()
    expect(page.get_by_text(re.compile(r"pattern '\(unclosed' does not compile"))).to_be_visible()
    assert not list((tmp_path / "workspace" / "runs").iterdir())
    page.locator("#reward-regex-on input").uncheck()

    studio_page.start_run()
    try:
        expect(page.locator("#train-progress")).to_contain_text("finished: step 3/3", timeout=120_000)
    except AssertionError as error:  # what the page showed beside what the run itself wrote (a stalled page
        runs = list((tmp_path / "workspace" / "runs").iterdir())  # once showed step 1/3 of a finished run)
        told = [(r / name).read_text()[-3000:] for r in runs for name in ("status.json", "train.log")
                if (r / name).is_file()]
        raise AssertionError(f"{error}\npage: {page.locator('#train-progress').inner_text()!r}\n"
                             + "\n".join(told)) from error
    expect(page.locator("#train-facts")).to_contain_text(re.compile(r"Held-out reward:\*?\*? ?\d\.\d{3}"))

    plot = page.locator("#objective-plot")
    expect(plot).to_be_visible(timeout=90_000)
    for series in ("reward_form", "reward_rhyme", "reward_title", "reward_no_repetition", "kl", "val_reward"):
        expect(plot).to_contain_text(series)
    table = page.locator("#rollouts-table")
    expect(table).to_be_visible(timeout=90_000)
    for header in ("prompt", "answer", "reward", "form", "rhyme", "no_repetition"):
        expect(table).to_contain_text(header)
    expect(table).to_contain_text("为题")  # a held-out Tang prompt
    expect(table).to_contain_text(re.compile(r"0\.\d+|\b[01]\b"))  # its scores

    run = RunDir(next((tmp_path / "workspace" / "runs").iterdir()))
    config = yaml.safe_load(run.config_file.read_text(encoding="utf-8"))
    assert config["grpo"]["rewards"] == [{"name": "form", "weight": 1.0}, {"name": "rhyme", "weight": 1.0},
                                         {"name": "title", "weight": 0.5}, {"name": "no_repetition", "weight": 0.5}]
    assert (config["grpo"]["group_size"], config["grpo"]["max_new_tokens"]) == (4, 32)
    assert run.read_samples() and all(s["step"] == 3 for s in run.read_samples())
    studio_page.screenshot("tab-train-grpo")
