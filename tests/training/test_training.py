"""The trainer, for real on tiny data: config, modes, run folder, masking, NaN guard."""

import json
import math

import pytest
import torch
from safetensors.torch import load_file

from minimind.checkpoint import load_model
from minimind.errors import ConfigError, TrainingError
from minimind.training import RunDir, TrainConfig, train
from minimind.training import loop as training_loop
from minimind.training import setup as training_setup
from minimind.training.batches import BatchStream
from minimind.training.objectives.language_model import LanguageModel
from minimind.training.schedule import lr_at
from helpers import ROOT
from training_helpers import (TINY_OVERRIDES, fake_clock, losses, make_config, save_base_model, write_chat_corpus,
                              write_text_corpus)


def test_config_round_trips_and_validates(tmp_path):
    cfg = TrainConfig.from_dict({"mode": "lora", "model": {"init_from": "base"}, "data": {"files": ["a.txt"]},
                                 "lora": {"rank": 8}})
    for name in ("run.yaml", "run.json"):
        cfg.save(tmp_path / name)
        assert TrainConfig.load(tmp_path / name) == cfg
    assert cfg.with_overrides(["optim.lr=3e-4", "lora.target_modules=[q_proj,v_proj]"]).optim.lr == 3e-4
    with pytest.raises(ConfigError, match="lora.rank must be 1..256"):
        TrainConfig.from_dict({"mode": "lora", "model": {"init_from": "b"}, "data": {"files": ["a"]},
                               "lora": {"rank": 0}}).validate()
    with pytest.raises(ConfigError, match="unknown config key"):
        TrainConfig.from_dict({"optim": {"learning_rate": 1}})
    with pytest.raises(ConfigError, match="set model.init_from"):
        TrainConfig.from_dict({"mode": "sft", "data": {"files": ["a"]}}).validate()
    resolved = TrainConfig.from_dict({"data": {"files": ["a"]}}).resolved("cpu", bf16_ok=True)
    assert resolved.precision == "bf16" and resolved.batch_size > 0
    assert resolved.model.preset == "auto" and resolved.optim.lr is None  # both chosen when the run starts
    assert TrainConfig.from_dict({"data": {"files": ["a"]}, "model": {"preset": "pico"}}).resolved("cpu").optim.lr == 4e-3
    with pytest.raises(ConfigError, match="model.preset must be auto or one of"):
        TrainConfig.from_dict({"data": {"files": ["a"]}, "model": {"preset": "huge"}}).validate()
    assert TrainConfig.from_dict({"data": {"files": ["a"]}}).resolved("cpu", bf16_ok=False).precision == "fp32"


def test_schedule_warms_up_then_decays_to_the_floor():
    lrs = [lr_at(s, 100, 1.0, 10, 0.1) for s in range(100)]
    assert lrs[0] == pytest.approx(0.1) and lrs[9] == pytest.approx(1.0)
    assert all(a >= b for a, b in zip(lrs[9:], lrs[10:]))
    assert lrs[-1] == pytest.approx(0.1, abs=1e-3)


def test_pretrain_writes_a_complete_run_folder(tmp_path, tokenizer_dir):
    corpus = write_text_corpus(tmp_path)
    cfg = make_config(tmp_path, [corpus], model__tokenizer=str(tokenizer_dir), max_steps=5, eval_every=2,
                      save_every=2, keep_checkpoints=2)
    status = train(cfg)
    run = RunDir(tmp_path / "run")
    assert status["state"] == "finished" and status["step"] == 5
    assert TrainConfig.load(run.config_file).max_steps == 5
    records = run.read_metrics()
    assert {"step", "loss", "lr", "grad_norm", "tokens_per_s", "mfu", "elapsed_s"} <= set(records[0])
    assert any("val_bpc" in r for r in records) and records[-1]["step"] == 5
    ckpts = sorted(p.name for p in run.checkpoints.iterdir())
    assert ckpts == ["step-4", "step-5"]  # last two kept, final one always saved
    final = run.checkpoints / "step-5"
    for name in ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json",
                 "generation_config.json", "trainer/state.json", "trainer/optimizer.safetensors"):
        assert (final / name).is_file(), name
    model = load_model(final)
    assert model.config.vocab_size == 512
    assert "finished" in run.log_file.read_text()


def test_pretrain_on_the_shipped_tang_sample_lowers_validation_loss(tmp_path):
    """Real training on samples/ (2,016 poems; runs on a clean clone): a tokenizer trained on the
    corpus, a small model, 150 steps; the held-out poems' loss falls well below its first
    evaluation and below chance (ln 800 = 6.68 nats)."""
    sample = ROOT / "samples" / "tang_poems_sample.jsonl"
    cfg = make_config(tmp_path, [sample], model__overrides={**TINY_OVERRIDES, "hidden_size": 128,
                                                            "intermediate_size": 256},
                      model__vocab_size=800, max_steps=150, batch_size=8, data__seq_len=64, eval_every=25,
                      eval_batches=8, log_every=25, optim__lr=3e-3, data__val_fraction=0.05)
    status = train(cfg)
    assert status["step"] == 150 and status["val_rows"] > 50  # held-out poems, not training rows
    evals = [r for r in RunDir(tmp_path / "run").read_metrics() if "val_loss" in r]
    first, last = evals[0]["val_loss"], evals[-1]["val_loss"]
    print("tang val loss by step:", [(r["step"], round(r["val_loss"], 3)) for r in evals])
    assert evals[0]["step"] == 25 and evals[-1]["step"] == 150
    assert last < first - 0.5 and last < math.log(800) - 1.5


def test_sft_trains_only_on_assistant_tokens(tmp_path, tokenizer):
    base = save_base_model(tmp_path / "base", tokenizer)
    chat = write_chat_corpus(tmp_path)
    cfg = make_config(tmp_path, [chat], mode="sft", model__init_from=str(base), data__seq_len=96, max_steps=2)
    corpus = training_setup.prepare_data(cfg.resolved("cpu", False), tokenizer, training_loop.dist.DistInfo())
    row = corpus.train[0]
    kept = [i for i, lab in zip(row["input_ids"], row["labels"]) if lab != -100]
    assert tokenizer.decode(kept).endswith("<|im_end|>")
    assert "user" not in tokenizer.decode(kept) and "詩人" not in tokenizer.decode(kept)
    # the loss the loop computes is the cross-entropy over those positions only
    model = load_model(base)
    batch = BatchStream(corpus.train, 2, 1, 0, 0).micro_batches(0).__next__()
    loss, _ = LanguageModel(None, None).loss(model, batch)
    logits = model(input_ids=batch["input_ids"], attention_mask=batch.get("attention_mask")).logits
    target = batch["labels"][:, 1:]
    keep = target != -100
    manual = torch.nn.functional.cross_entropy(logits[:, :-1][keep], target[keep])
    torch.testing.assert_close(loss, manual)
    assert train(cfg)["state"] == "finished"


def test_lora_changes_only_adapter_weights_and_reloads(tmp_path, tokenizer):
    from peft import PeftModel

    base = save_base_model(tmp_path / "base", tokenizer)
    chat = write_chat_corpus(tmp_path)
    cfg = make_config(tmp_path, [chat], mode="lora", model__init_from=str(base), data__seq_len=96,
                      max_steps=4, lora__rank=4, lora__dropout=0.0, optim__lr=1e-2)
    status = train(cfg)
    adapter = tmp_path / "run" / "checkpoints" / "step-4"
    assert (adapter / "adapter_config.json").is_file() and (adapter / "adapter_model.safetensors").is_file()
    assert json.loads((adapter / "adapter_config.json").read_text())["base_model_name_or_path"] == str(base)
    saved = load_file(str(adapter / "adapter_model.safetensors"))
    assert saved and all("lora_" in k for k in saved)
    assert any(v.abs().sum() > 0 for k, v in saved.items() if "lora_B" in k)  # adapters learned something
    # the base weights on disk are untouched, and base + adapter reload gives the trained logits
    before = load_file(str(base / "model.safetensors"))
    reloaded = PeftModel.from_pretrained(load_model(base), str(adapter)).eval()
    via_ours = load_model(adapter)  # an adapter folder names its base
    ids = torch.randint(5, 512, (1, 20))
    with torch.no_grad():
        a, b = reloaded(input_ids=ids).logits, via_ours(input_ids=ids).logits
        plain = load_model(base)(input_ids=ids).logits
    torch.testing.assert_close(a, b)
    assert (a - plain).abs().max() > 1e-4
    after = load_file(str(base / "model.safetensors"))
    assert all(torch.equal(before[k], after[k]) for k in before)
    assert status["trainable_params"] < status["params"] / 5


def test_qlora_runs_two_steps_on_cpu(tmp_path, tokenizer):
    base = save_base_model(tmp_path / "base", tokenizer)
    chat = write_chat_corpus(tmp_path)
    # precision auto: bf16 where the CPU has bf16 instructions, fp32 where it has not
    # (forced bf16 QLoRA takes about 3 minutes there, against a second)
    cfg = make_config(tmp_path, [chat], mode="qlora", model__init_from=str(base), data__seq_len=96,
                      max_steps=2, lora__rank=4, precision="auto")
    status = train(cfg)
    assert status["state"] == "finished" and status["step"] == 2
    assert all(math.isfinite(v) for v in losses(tmp_path / "run").values())
    assert (tmp_path / "run" / "checkpoints" / "step-2" / "adapter_model.safetensors").is_file()


def test_nan_loss_is_skipped_then_stops_with_a_clear_error(tmp_path, tokenizer_dir, monkeypatch):
    corpus = write_text_corpus(tmp_path)
    real = LanguageModel.loss
    calls = {"n": 0}

    def sometimes_nan(self, model, batch):
        calls["n"] += 1
        loss, metrics = real(self, model, batch)
        return (loss * float("nan") if calls["n"] in (2, 3) else loss), metrics

    monkeypatch.setattr(LanguageModel, "loss", sometimes_nan)
    cfg = make_config(tmp_path, [corpus], model__tokenizer=str(tokenizer_dir), max_steps=4, max_bad_steps=3)
    status = train(cfg)
    assert status["state"] == "finished" and status["step"] == 4
    assert "step skipped (2 in a row)" in RunDir(tmp_path / "run").log_file.read_text()

    monkeypatch.setattr(LanguageModel, "loss", lambda self, m, b: (real(self, m, b)[0] * float("nan"), {}))
    cfg2 = make_config(tmp_path / "again", [corpus], model__tokenizer=str(tokenizer_dir), max_steps=4,
                       max_bad_steps=3)
    with pytest.raises(TrainingError, match="NaN/Inf for 3 steps in a row"):
        train(cfg2)
    status = RunDir(tmp_path / "again" / "run").read_status()
    assert status["state"] == "failed" and "NaN/Inf" in status["error"]


def test_compiled_layers_train_like_eager_ones(tmp_path, tokenizer_dir):
    corpus = write_text_corpus(tmp_path)
    runs = {}
    for setting in ("off", "on"):
        cfg = make_config(tmp_path / setting, [corpus], model__tokenizer=str(tokenizer_dir), max_steps=3,
                          compile=setting)
        train(cfg)
        runs[setting] = losses(tmp_path / setting / "run")
    assert "compiling 2 decoder layers" in RunDir(tmp_path / "on" / "run").log_file.read_text()
    for step in runs["off"]:
        assert abs(runs["off"][step] - runs["on"][step]) < 1e-3


def test_a_new_model_planned_to_repeat_its_data_trains_with_dropout(tmp_path, tokenizer_dir):
    """Planned passes over the training split at REPEAT_PASSES or more: residual dropout
    REPEAT_DROPOUT in the model, its config.json and the run's config.yaml (a resume builds the
    same model); fewer passes, or a dropout the user set, are left alone."""
    from minimind.training.sizing import REPEAT_DROPOUT, REPEAT_PASSES

    corpus = write_text_corpus(tmp_path, copies=1)  # 82 rows: 6 steps of 16 a pass
    settings = {"repeats": {"max_steps": 0, "epochs": REPEAT_PASSES + 1},
                "once": {"max_steps": 0, "epochs": 1.0},
                "set": {"max_steps": 0, "epochs": REPEAT_PASSES + 1, "model__overrides__dropout": 0.0}}
    dropout = {}
    for name, extra in settings.items():
        cfg = make_config(tmp_path / name, [corpus], model__tokenizer=str(tokenizer_dir), batch_size=16,
                          compile="off", **extra)
        status = train(cfg)
        run = RunDir(tmp_path / name / "run")
        saved = TrainConfig.load(run.config_file).model.overrides.get("dropout")
        model = load_model(status["final_checkpoint"])
        dropout[name] = (saved, model.config.dropout)
        if name == "repeats":
            assert f"residual dropout {REPEAT_DROPOUT:g}" in run.log_file.read_text()
    assert dropout == {"repeats": (REPEAT_DROPOUT, REPEAT_DROPOUT), "once": (None, 0.0), "set": (0.0, 0.0)}


def test_chosen_dropout_is_the_models_during_training(tmp_path, tokenizer_dir, monkeypatch):
    """The dropout is set before the first step: the layers' nn.Dropout modules train with it."""
    from minimind.training.sizing import REPEAT_DROPOUT, REPEAT_PASSES

    seen = []
    real_loss = LanguageModel.loss

    def watching_loss(self, model, batch):
        seen.append({m.p for m in model.modules() if isinstance(m, torch.nn.Dropout)})
        return real_loss(self, model, batch)

    monkeypatch.setattr(LanguageModel, "loss", watching_loss)
    corpus = write_text_corpus(tmp_path, copies=1)
    train(make_config(tmp_path, [corpus], model__tokenizer=str(tokenizer_dir), max_steps=0, batch_size=16,
                      compile="off", epochs=REPEAT_PASSES + 1))
    assert seen and all(ps == {REPEAT_DROPOUT} for ps in seen)


def test_time_budget_holds_the_whole_run_to_the_wall_clock(tmp_path, tokenizer_dir, monkeypatch):
    """On the trainer's own clock (1/8 s a micro-batch, 1/50 s a validation batch, 1/2 s a save: exact
    on any machine) a 6 s budget counts from the call to train(): the probes size the run, measured
    steps, evaluations and saves re-size it, and the run ends, final evaluation and save included,
    within the budget and less than one step short of it."""
    clock = fake_clock(monkeypatch)
    corpus = write_text_corpus(tmp_path)
    cfg = make_config(tmp_path, [corpus], model__tokenizer=str(tokenizer_dir), max_steps=0, time_budget_s=6.0,
                      compile="off", eval_every=8, save_every=16)
    started = clock.now
    status = train(cfg)
    used = clock.now - started
    log = RunDir(tmp_path / "run").log_file.read_text()
    assert "run re-sized to" in log
    assert status["state"] == "finished" and status["step"] == status["total"]
    assert 6.0 - 0.125 < used <= 6.0, (used, status["step"], log)


def test_a_re_size_after_an_evaluation_keeps_that_evaluation(tmp_path, tokenizer_dir, monkeypatch):
    """With automatic intervals a re-size changes eval_every. When steps turn twice as slow midway,
    the re-size after the next evaluation halves the run and its interval; the evaluation that was
    due at that step still happens: every re-size after the first follows one."""
    clock = fake_clock(monkeypatch)
    corpus = write_text_corpus(tmp_path)
    cfg = make_config(tmp_path, [corpus], model__tokenizer=str(tokenizer_dir), max_steps=0, time_budget_s=20.0,
                      compile="off", eval_every=0, save_every=0, eval_batches=1)

    def slower_from_40(step, total, info):
        if step == 40:
            clock.per_batch = 0.25

    assert train(cfg, progress=slower_from_40)["state"] == "finished"
    run = RunDir(tmp_path / "run")
    resized = [line for line in run.log_file.read_text().splitlines() if "run re-sized to" in line]
    evaluated = sorted(r["step"] for r in run.read_metrics() if "val_loss" in r)
    assert len(evaluated) >= len(resized), (resized, evaluated)  # one per re-size after the first + the last


def test_re_sizes_do_not_crowd_evaluations_or_saves(tmp_path, tokenizer_dir, monkeypatch):
    """Steps that slow down little by little (a machine warming up) re-size the run after each
    evaluation, and each re-size changes the automatic intervals. Interval evaluations and saves
    count from the last one: they stay about an interval apart, and none falls within half an
    interval of the final one (by `step % interval` they came 3 steps apart in a real run)."""
    clock = fake_clock(monkeypatch)
    corpus = write_text_corpus(tmp_path)
    cfg = make_config(tmp_path, [corpus], model__tokenizer=str(tokenizer_dir), max_steps=0, time_budget_s=20.0,
                      compile="off", eval_every=0, save_every=0, eval_batches=1)

    def slower_and_slower(step, total, info):
        clock.per_batch *= 1.004

    status = train(cfg, progress=slower_and_slower)
    assert status["state"] == "finished"
    run = RunDir(tmp_path / "run")
    evaluated = sorted(r["step"] for r in run.read_metrics() if "val_loss" in r)
    saved = [int(line.rsplit("step-", 1)[1]) for line in run.log_file.read_text().splitlines() if "saved step-" in line]
    assert evaluated[-1] == saved[-1] == status["step"]
    for steps, share in ((evaluated, 10), (saved, 5)):  # the automatic intervals: a tenth and a fifth of the run
        gaps = [b - a for a, b in zip(steps, steps[1:])]
        # (half an interval of the final run: a re-size just after a save may shorten it by a step)
        assert min(gaps) >= status["step"] // share // 2 - 1, (steps, status["step"])
        assert len(steps) <= share + 2, steps


def test_steps_that_turn_faster_late_still_fill_the_budget(tmp_path, tokenizer_dir, monkeypatch):
    """Steps that turn twice as fast two thirds of the way in (the other core freed) are planned
    with the steps since the last re-size, not the mean of the whole run, and evaluations and
    saves are counted one by one: the run still ends less than one (fast) step short of its 30 s
    budget. By the run-long mean and a per-step share of evaluations it ended 1.05 s short."""
    clock = fake_clock(monkeypatch)
    corpus = write_text_corpus(tmp_path)
    cfg = make_config(tmp_path, [corpus], model__tokenizer=str(tokenizer_dir), max_steps=0, time_budget_s=30.0,
                      compile="off", eval_every=0, save_every=0, eval_batches=1)
    started = clock.now

    def faster_after_20_s(step, total, info):
        if clock.now - started >= 20.0:
            clock.per_batch = 0.0625

    status = train(cfg, progress=faster_after_20_s)
    used = clock.now - started
    assert status["state"] == "finished" and status["step"] == status["total"]
    assert 30.0 - 0.0625 < used <= 30.0, (used, status["step"])


def test_a_compiled_models_first_evaluation_does_not_plan_the_rest(tmp_path, tokenizer_dir, monkeypatch):
    """A compiled model's first evaluation also compiles its evaluation shapes (on the fake clock:
    4 s more, once). Planned with that figure for every evaluation left, the run ended 8 s short of
    its 20; the budget keeps its guess until the second evaluation, and the run ends within its budget
    and less than one step short of it."""
    from minimind.training.compiling import decoder_layers

    clock = fake_clock(monkeypatch)
    monkeypatch.setattr(training_loop, "compile_layers", lambda model, cfg, max_steps, log: decoder_layers(model))
    real_eval = LanguageModel.evaluate  # (the fake clock's)
    evaluations = []

    def first_compiles(self, model, batches):  # the first evaluation compiles
        evaluations.append(clock.now)
        if len(evaluations) == 1:
            clock.now += 4.0
        return real_eval(self, model, batches)

    monkeypatch.setattr(LanguageModel, "evaluate", first_compiles)
    corpus = write_text_corpus(tmp_path)
    cfg = make_config(tmp_path, [corpus], model__tokenizer=str(tokenizer_dir), max_steps=0, time_budget_s=20.0,
                      compile="on", eval_every=15, save_every=0, eval_batches=1)
    started = clock.now
    status = train(cfg)
    used = clock.now - started
    assert status["state"] == "finished" and status["step"] == status["total"] and len(evaluations) >= 4
    assert 20.0 - 0.125 < used <= 20.0, (used, status["step"], evaluations)


def test_zero_init_starts_each_block_as_the_identity_and_trains(tmp_path, tokenizer_dir):
    """model.zero_init (modded-nanogpt's): a new model's attention output and MLP down projections
    start at zero, so its first logits are the embeddings' alone; a real run then grows them."""
    from minimind.tokenizer import load_tokenizer
    from minimind.training.modes import new_model

    corpus = write_text_corpus(tmp_path)
    cfg = make_config(tmp_path, [corpus], model__tokenizer=str(tokenizer_dir), model__zero_init=True,
                      optim__warmup_steps=1)
    model = new_model(cfg, load_tokenizer(tokenizer_dir))
    zeroed = [n for n, p in model.named_parameters() if not p.any()]
    assert zeroed and all(n.endswith(("o_proj.weight", "down_proj.weight")) for n in zeroed)
    assert len(zeroed) == 2 * model.config.num_hidden_layers
    ids = torch.tensor([[5, 6, 7]])
    hidden = model.model.norm(model.model.embed_tokens(ids))  # every block adds nothing
    assert torch.allclose(model(ids).logits, model.lm_head(hidden), atol=1e-6)

    status = train(cfg)
    assert status["state"] == "finished" and all(math.isfinite(v) for v in losses(tmp_path / "run").values())
    trained = load_model(status["final_checkpoint"])
    assert all(p.any() for p in trained.parameters())

    # refused before any work (tokenizer, data, size probe) where there is no new transformer to start
    for where, settings in (("lstm", {"model__architecture": "lstm"}),
                            ("fine-tune", {"mode": "lora", "model__init_from": str(tmp_path / "run")})):
        refused = make_config(tmp_path / where, [corpus], model__tokenizer=str(tokenizer_dir), model__zero_init=True,
                              **settings)
        with pytest.raises(ConfigError, match="zero_init .* for a new model"):
            refused.validate()
        with pytest.raises(ConfigError, match="zero_init"):
            train(refused)
        assert not (tmp_path / where / "cache").exists()  # no data prepared
