"""The run's optimizer (training/optimizers.py): AdamW, or Muon on the decoder layers' matrices with
AdamW on the rest. BatchedMuon is checked against torch.optim.Muon, the split of weights by name,
its state through a checkpoint, and a Muon run stopped and resumed against an uninterrupted one."""

import copy

import pytest
import torch
from helpers import tiny_config
from training_helpers import (
    assert_same_losses,
    interrupted_run,
    make_config,
    write_text_corpus,
)

from minimind import MiniMindForCausalLM
from minimind.errors import ConfigError
from minimind.training import TrainConfig
from minimind.training.checkpoint import _flatten_optimizer, _unflatten_optimizer
from minimind.training.optimizers import (
    MUON_MAX_SHARE,
    BatchedMuon,
    MuonWithAdamW,
    choose_optimizer,
    is_hidden_matrix,
    make_optimizer,
    muon_share,
    muon_update_flops,
)


def _model(seed: int = 0) -> MiniMindForCausalLM:
    torch.manual_seed(seed)
    return MiniMindForCausalLM(tiny_config())


def _hidden(model) -> list[torch.Tensor]:
    return [p for name, p in model.named_parameters() if is_hidden_matrix(name, p)]


def _steps(model, optimizer, n: int = 3) -> None:
    for step in range(n):
        ids = torch.randint(0, model.config.vocab_size, (2, 12), generator=torch.Generator().manual_seed(step))
        model(input_ids=ids, labels=ids).loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)


@pytest.mark.parametrize("nesterov", [True, False])
def test_batched_muon_is_torch_muon(nesterov):
    """The same update as torch.optim.Muon with Moonshot's AdamW-RMS scaling (Newton-Schulz in bf16,
    as torch runs it): bit for bit, though same-shaped matrices go through it together."""
    ours, reference = _model(), _model()
    ours_opt = BatchedMuon(_hidden(ours), lr=1e-2, weight_decay=0.1, nesterov=nesterov, ns_dtype=torch.bfloat16)
    torch_opt = torch.optim.Muon(_hidden(reference), lr=1e-2, weight_decay=0.1, nesterov=nesterov,
                                 adjust_lr_fn="match_rms_adamw")
    start = [p.detach().clone() for p in _hidden(ours)]
    _steps(ours, ours_opt)
    _steps(reference, torch_opt)
    moved = max(float((p - s).abs().max()) for p, s in zip(_hidden(ours), start))
    assert moved > 1e-3  # the weights did move
    for a, b in zip(_hidden(ours), _hidden(reference)):
        torch.testing.assert_close(a, b, atol=1e-6, rtol=0)
    for a, b in zip(_hidden(ours), _hidden(reference)):
        torch.testing.assert_close(ours_opt.state[a]["momentum_buffer"], torch_opt.state[b]["momentum_buffer"])


def test_newton_schulz_in_float32_is_close_to_bfloat16():
    ours, reference = _model(), _model()
    _steps(ours, BatchedMuon(_hidden(ours), lr=1e-2, ns_dtype=torch.float32))
    _steps(reference, BatchedMuon(_hidden(reference), lr=1e-2, ns_dtype=torch.bfloat16))
    for a, b in zip(_hidden(ours), _hidden(reference)):
        torch.testing.assert_close(a, b, atol=3e-3, rtol=0)


def test_muon_takes_the_layer_matrices_and_adamw_the_rest():
    model = _model()
    cfg = TrainConfig.from_dict({"data": {"files": ["x"]}, "optim": {"name": "muon", "lr": 1e-3}})
    optimizer = make_optimizer(model, cfg, "cpu")
    assert isinstance(optimizer, MuonWithAdamW)
    names = {id(p): name for name, p in model.named_parameters()}
    on_muon = {names[id(p)] for g in optimizer.muon.param_groups for p in g["params"]}
    on_adamw = {names[id(p)] for g in optimizer.adamw.param_groups for p in g["params"]}
    assert on_muon and not on_muon & on_adamw
    assert on_muon | on_adamw == set(names.values())
    assert all(".layers." in n and n.endswith("proj.weight") for n in on_muon), on_muon
    assert "model.embed_tokens.weight" in on_adamw and any("norm" in n for n in on_adamw)
    assert len(optimizer.param_groups) == 3  # one Muon group, AdamW's decay and no-decay groups: the schedule sets all
    adamw = make_optimizer(model, TrainConfig.from_dict({"data": {"files": ["x"]}, "optim": {"lr": 1e-3}}), "cpu")
    assert isinstance(adamw, torch.optim.AdamW)


def test_lora_factors_stay_on_adamw():
    assert not is_hidden_matrix("base_model.model.model.layers.0.self_attn.q_proj.lora_A.default.weight",
                                torch.zeros(4, 8))
    assert is_hidden_matrix("model.layers.0.mlp.up_proj.weight", torch.zeros(4, 8))
    assert not is_hidden_matrix("model.layers.0.input_layernorm.weight", torch.zeros(8))
    assert not is_hidden_matrix("lm_head.weight", torch.zeros(4, 8))


def test_muon_state_goes_through_a_checkpoint_and_back():
    model = _model()
    cfg = TrainConfig.from_dict({"data": {"files": ["x"]}, "optim": {"name": "muon", "lr": 1e-3}})
    optimizer = make_optimizer(model, cfg, "cpu")
    _steps(model, optimizer, 2)
    tensors, meta = _flatten_optimizer(optimizer.state_dict())
    restored = make_optimizer(model, cfg, "cpu")
    restored.load_state_dict(_unflatten_optimizer(tensors, meta))
    for a, b in ((optimizer.muon, restored.muon), (optimizer.adamw, restored.adamw)):
        sa, sb = a.state_dict(), b.state_dict()
        assert sa["param_groups"] == sb["param_groups"]
        for key in sa["state"]:
            for name, value in sa["state"][key].items():
                torch.testing.assert_close(value, sb["state"][key][name])
    plain = make_optimizer(model, TrainConfig.from_dict({"data": {"files": ["x"]}, "optim": {"lr": 1e-3}}), "cpu")
    _steps(model, plain, 1)
    with pytest.raises(ConfigError, match="resume it with optim.name: adamw"):
        copy.deepcopy(restored).load_state_dict(plain.state_dict())


def test_ns_steps_reaches_muon_and_matches_torch_at_that_count():
    """`optim.ns_steps` sets Muon's Newton-Schulz iterations: 4 steps update as torch.optim.Muon's
    ns_steps=4 does, and differently from the default 5; out of range is refused."""
    cfg = TrainConfig.from_dict({"data": {"files": ["x"]}, "optim": {"name": "muon", "lr": 1e-2, "ns_steps": 4}})
    assert make_optimizer(_model(), cfg, "cpu").muon.param_groups[0]["ns_steps"] == 4
    ours, reference, five = _model(), _model(), _model()
    _steps(ours, BatchedMuon(_hidden(ours), lr=1e-2, weight_decay=0.1, ns_steps=4, ns_dtype=torch.bfloat16))
    _steps(reference, torch.optim.Muon(_hidden(reference), lr=1e-2, weight_decay=0.1, ns_steps=4,
                                       adjust_lr_fn="match_rms_adamw"))
    _steps(five, BatchedMuon(_hidden(five), lr=1e-2, weight_decay=0.1, ns_dtype=torch.bfloat16))
    for a, b, c in zip(_hidden(ours), _hidden(reference), _hidden(five)):
        torch.testing.assert_close(a, b, atol=1e-6, rtol=0)
    assert max(float((a - c).abs().max()) for a, c in zip(_hidden(ours), _hidden(five))) > 1e-5
    with pytest.raises(ConfigError, match="optim.ns_steps must be 1..10"):
        TrainConfig.from_dict({"data": {"files": ["x"]}, "optim": {"ns_steps": 0}}).validate()


def test_an_unknown_optimizer_is_refused():
    with pytest.raises(ConfigError, match="optim.name must be one of auto, adamw, muon, not .lion."):
        TrainConfig.from_dict({"data": {"files": ["x"]}, "optim": {"name": "lion"}}).validate()


def test_a_stopped_and_resumed_muon_run_matches_an_uninterrupted_one(tmp_path, tokenizer_dir):
    corpus = write_text_corpus(tmp_path)
    common = {"model__tokenizer": str(tokenizer_dir), "max_steps": 10, "optim__warmup_steps": 2,
              "optim__name": "muon", "precision": "fp32"}
    interrupted_run(lambda where: make_config(where, [corpus], **common), tmp_path, stop_at=4)
    a, _ = assert_same_losses(tmp_path / "a" / "run", tmp_path / "b" / "run", range(1, 11))
    assert a[10] < a[1]  # it trains


@pytest.mark.parametrize("raw, expected", [
    ({}, "auto"),                                        # a new transformer, pretrained: decided on its shape
    ({"model": {"architecture": "lstm"}}, "adamw"),                        # no decoder layers for it
    ({"distributed": "fsdp"}, "adamw"),                                    # FSDP shards Muon's matrices
    ({"mode": "sft", "model": {"init_from": "base"}}, "adamw"),            # fine-tunes: not measured
    ({"mode": "pretrain", "model": {"init_from": "base"}}, "adamw"),       # continued pretraining
    ({"optim": {"name": "adamw"}}, "adamw"),                               # chosen: kept
    ({"mode": "sft", "model": {"init_from": "base"}, "optim": {"name": "muon"}}, "muon"),
])
def test_auto_leaves_muon_open_only_to_pretrain_a_new_transformer(raw, expected):
    config = TrainConfig.from_dict({"data": {"files": ["x"]}, **raw})
    assert config.optim.name == "auto" or "optim" in raw
    assert config.resolved("cpu").optim.name == expected


def test_muon_update_flops_count_each_hidden_matrix_newton_schulz_iterations():
    model = _model()
    expected = 0
    for name, p in model.named_parameters():
        if is_hidden_matrix(name, p):
            m, n = sorted(p.shape)
            expected += 5 * (4 * m * m * n + 2 * m ** 3)  # per iteration: X X^T, (X X^T)^2, (.) X
    assert muon_update_flops(model, 5) == expected > 0
    assert muon_update_flops(model, 4) == expected * 4 / 5


@pytest.mark.parametrize("preset, tokens, expected", [
    ("pico", 4 * 256, "muon"),     # the CPU default batch: its update ~22 % of a step
    ("nano", 4 * 256, "muon"),     # ~60 %: Muon still wins in the same time (7.24 vs 7.43 BPC)
    ("mini", 4 * 256, "muon"),     # ~113 %: by less (7.98 vs 8.06)
    ("small", 4 * 256, "adamw"),   # ~168 %: AdamW's 2.2x cheaper steps win (8.32 vs 8.38)
    ("small", 32 * 512, "muon"),   # a GPU's batch: ~11 %
])
def test_auto_takes_muon_where_its_update_is_cheap_beside_the_step(preset, tokens, expected):
    from minimind import MiniMindConfig

    model = MiniMindForCausalLM(MiniMindConfig.from_preset(preset))
    cfg = TrainConfig.from_dict({"data": {"files": ["x"]}}).resolved("cpu")
    share = muon_share(model, cfg, tokens)
    assert (share <= MUON_MAX_SHARE) == (expected == "muon")
    assert choose_optimizer(cfg, model, tokens) == expected
    cfg.optim.name = "muon"  # a name the user chose is kept, whatever it costs
    assert choose_optimizer(cfg, model, tokens) == "muon"


def test_a_classifiers_new_head_can_learn_at_a_rate_of_its_own():
    """classify.head_lr_scale (10 by default) gives the `score` head (and only it) a group whose rate the
    loop scales; 1.0 (or a language model) keeps the two plain groups; out of range is refused."""
    from minimind.classifier import MiniMindForSequenceClassification, label_maps

    torch.manual_seed(0)
    model = MiniMindForSequenceClassification(tiny_config(**label_maps(["a", "b"])))
    raw = {"task": "classify", "mode": "sft", "data": {"files": ["x"]}, "optim": {"lr": 1e-3},
           "model": {"init_from": "somewhere"}}
    scaled = make_optimizer(model, TrainConfig.from_dict(raw), "cpu")
    heads = [g for g in scaled.param_groups if "lr_scale" in g]
    assert len(heads) == 1 and heads[0]["lr_scale"] == 10 and heads[0]["params"] == [model.score.weight]
    assert sum(len(g["params"]) for g in scaled.param_groups) == len(list(model.parameters()))
    plain = make_optimizer(model, TrainConfig.from_dict({**raw, "classify": {"head_lr_scale": 1}}), "cpu")
    assert len(plain.param_groups) == 2 and not any("lr_scale" in g for g in plain.param_groups)
    language_model = TrainConfig.from_dict({"data": {"files": ["x"]}, "optim": {"lr": 1e-3}})
    assert len(make_optimizer(_model(), language_model, "cpu").param_groups) == 2
    for bad in (0, -1, float("nan"), 1e9, True, "ten"):
        with pytest.raises(ConfigError, match="classify.head_lr_scale must be a number"):
            TrainConfig.from_dict({**raw, "classify": {"head_lr_scale": bad}}).resolved("cpu")
