"""The first, short runs a newcomer tries (issue 44), from a fresh workspace in a real browser: a
2-minute LoRA and a 2-minute GRPO of the shipped MiniMind-Tang and a 1-minute LSTM pretrained from
nothing. While each trains, the page names what it is doing at every moment (never a bare
"step 0/?"), both loss lines are drawn while it trains (a validation point from before its last
step), and the validation line has at least two points by its end; each takes at
least 20 steps and ends within 5 % of its budget of wall time (the trainer's clock, from its
process's start; the page's own view of it, from Start to "finished", within a few seconds more);
on a loaded machine, within what one more step and the final evaluation take.

The full walk takes about six minutes, so it is `slow`; its fast twin, a 1-minute LoRA on the
same page, runs by default and checks the same things at that budget, with shorter rows (64
tokens, 4 a step) so that it takes at least 5 steps beside the other tests on two cores, and ends within
20 % of its budget there (in CI a
30-s twin spent 17 s starting and made 6 steps of 0.75 s: the other test process held a core)."""

import json
import re
import time

import pytest
from helpers import ROOT
from webapp_helpers import needs_shipped, pick

from webapp.workspace import Workspace

pytestmark = [pytest.mark.browser, needs_shipped("minimind-tang")]

SHIPPED = "shipped: minimind-tang"
CORPORA = {"poems": ("tang_poems_sample.jsonl", {"kind": "text", "documents": 500}),
           "prompts": ("tang_prompts.jsonl", {"kind": "prompts", "documents": 2000})}
PHASED = re.compile(r"^running \((starting|preparing data|measuring speed|building the model|compiling|training|"
                    r"evaluating|saving a checkpoint|final evaluation)\): step")
BEFORE_TRAINING = {"starting", "preparing data", "measuring speed", "building the model"}


def _watch(studio_page, ws: Workspace, budget_s: float, min_steps: int, share: float = 0.05) -> dict:
    """Press Start, then watch the run as a person does until it finishes: what the progress line says,
    whether both loss lines show while it trains, and the validation points it has by then."""
    from playwright.sync_api import expect

    page = studio_page.page
    started = time.monotonic()
    studio_page.start_run()
    run_id = page.locator("#train-run input").input_value()
    run = ws.runs / run_id
    phases, val_steps_while_training = set(), set()
    deadline = started + budget_s + 120
    while time.monotonic() < deadline:
        line = page.locator("#train-progress").inner_text().strip()
        if "finished" in line:
            break
        if line.startswith("running"):
            assert PHASED.match(line), f"a running run's line names its phase: {line!r}"
            phases.add(PHASED.match(line).group(1))
            legend = page.locator("#loss-plot .role-legend")
            named = legend.first.text_content() or "" if legend.count() else ""
            if "train" in named and "validation" in named and _state(run) == "running":
                val_steps_while_training |= {r["step"] for r in _metrics(run) if any(k.startswith("val_") for k in r)}
        time.sleep(0.5)
    seen_s = time.monotonic() - started
    expect(page.locator("#train-progress")).to_contain_text("finished", timeout=5_000)
    status = json.loads((run / "status.json").read_text())
    told = f"{status}\n{_log_tail(run)}"  # what a failure shows: the trainer's own account of the run
    assert status["state"] == "finished", told
    assert status["step"] >= min_steps, (min_steps, told)
    # within 5 % of the budget, or of what one more step and the final evaluation and save cost: the
    # run stops when they no longer fit, and on a loaded machine a step took 0.75-3 s and the last
    # one may take longer than the ones it was planned from
    step_s = status["tokens"] / status["step"] / status["tokens_per_s"] if status.get("tokens_per_s") else 0.0
    assert abs(budget_s - status["wall_s"]) <= max(share * budget_s, 3 * step_s), (budget_s, step_s, told)
    # + what the trainer's clock leaves out (Start's handler, the launch; 13 s beside the other test
    # process in one CI run), the page's 2-s refresh
    assert seen_s <= 1.05 * budget_s + 15, (seen_s, budget_s, told)
    assert "training" in phases and phases & BEFORE_TRAINING, (phases, told)
    # the validation line is drawn while the run trains: a point from before its last step shows with the
    # train line (the last step's evaluation may come and the run finish between two looks, 0.1 s apart
    # in a quiet run; in CI the test saw only the first point while running, and the run then had 2)
    val_steps = [r["step"] for r in _metrics(run) if any(k.startswith("val_") for k in r)]
    assert any(s < status["step"] for s in val_steps_while_training), (sorted(val_steps_while_training), told)
    assert len(val_steps) >= 2 and val_steps[-1] == status["step"], (val_steps, told)
    strokes = page.locator("#loss-plot .role-legend-symbol path").evaluate_all(
        "els => els.map(e => e.getAttribute('stroke'))")
    assert len(set(strokes)) == 2 and None not in strokes, strokes  # both lines drawn, each in its colour
    return {"run": run, "status": status, "phases": phases, "seen_s": seen_s}


def _metrics(run) -> list[dict]:
    path = run / "metrics.jsonl"
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()] if path.is_file() else []


def _state(run) -> str | None:
    path = run / "status.json"
    return json.loads(path.read_text()).get("state") if path.is_file() else None


def _log_tail(run, lines: int = 30) -> str:
    path = run / "train.log"
    return "\n".join(path.read_text().splitlines()[-lines:]) if path.is_file() else "(no train.log)"


def _page(studio_page, corpora):
    ws = Workspace(studio_page.workspace)
    for name in corpora:
        file, summary = CORPORA[name]
        ws.save_corpus(name, [ROOT / "samples" / file], {"kind": "auto"}, dict(summary))
    return ws, studio_page()  # the shipped models of the repository


def _minutes(page, minutes: float) -> None:
    page.locator("#train-stop-after").get_by_text("minutes", exact=True).click()
    page.locator("#train-minutes input").fill(f"{minutes:g}")


def test_a_one_minute_lora_names_each_phase_draws_both_curves_and_keeps_its_budget(studio_page):
    ws, page = _page(studio_page, ["poems"])
    studio_page.choose_training(SHIPPED, "lora", "poems")
    studio_page.fill_train_form(seq_len=64, batch_size=4)  # short steps: enough of them beside other tests
    _minutes(page, 1)
    # (beside the other test process it made 9 to 34 steps of up to 2 s, and kept 7.5 to 10.8 s for
    # the last step, evaluation and save, timed while the other process held a core; quiet: ~100
    # steps, within 5 %)
    _watch(studio_page, ws, 60.0, min_steps=5, share=0.2)
    studio_page.screenshot("short-run-lora-1min")


@pytest.mark.slow
def test_two_minute_lora_and_grpo_and_a_one_minute_lstm_show_something(studio_page):
    ws, page = _page(studio_page, ["poems", "prompts"])
    walked = {}
    studio_page.choose_training(SHIPPED, "lora", "poems")
    _minutes(page, 2)
    walked["lora"] = _watch(studio_page, ws, 120.0, min_steps=20)
    studio_page.choose_training(SHIPPED, "Reinforce (GRPO)", "prompts")
    walked["grpo"] = _watch(studio_page, ws, 120.0, min_steps=20)
    studio_page.choose_training("new model: auto (sized to the number of steps)", "pretrain", "poems")
    studio_page.open_advanced()
    pick(page, "Architecture", "LSTM")
    _minutes(page, 1)
    walked["lstm"] = _watch(studio_page, ws, 60.0, min_steps=20)
    studio_page.screenshot("short-runs-done")
    for name, seen in walked.items():  # what the closing note quotes
        print(name, seen["status"]["step"], round(seen["status"]["wall_s"], 1), round(seen["seen_s"], 1),
              sorted(seen["phases"]))
