"""Our DPO and distillation objectives against Hugging Face TRL, the reference implementation.

trl is a test-only dependency (requirements-test.txt pins the version these mappings were
read from). It is imported unconditionally: a missing trl fails this module instead of
skipping it. Line numbers below are those of trl 1.16.0.

DPO. trl 1.x has no standalone `dpo_loss`: the loss lives inside `DPOTrainer._compute_loss`
(trl/trainer/dpo_trainer.py:1285), which takes a model and a batch. We build a bare trainer
(`object.__new__`) with only the attributes that method reads, hand it precomputed reference
log-probs (`precompute_ref_log_probs`) and a stand-in model whose `log_probs` output is a
one-token completion per row holding our summed log-prob, so trl's sum over the completion
gives back exactly the tensors we pass (gradients flow to them unchanged).

Label smoothing: our `label_smoothing` is conservative DPO (cDPO, Mitchell 2023),
  loss = -(1 - e) log s(b D) - e log s(-b D),
which older trl (0.x `DPOTrainer.dpo_loss`) computed under loss_type "sigmoid". In trl 1.x the
"sigmoid" branch (dpo_trainer.py:1387) ignores `label_smoothing`; trl's `label_smoothing` now
feeds "robust" (rDPO, a different, unbiased estimator) and "exo_pair". The cDPO expression
survives verbatim only in the "aot"/"aot_unpaired" branches (dpo_trainer.py:1447-1465), which
apply it after sorting the batch's log-ratios. With inputs whose chosen and rejected
log-ratios are each already ascending the sort is the identity and "aot_unpaired" computes
cDPO exactly, so that is what the label-smoothed cases compare with. A second test checks the
same loss as the (1 - e, e) mix of trl's plain "sigmoid" loss on the pair and on the swapped
pair, with unsorted inputs.
"""

from collections import defaultdict
from types import SimpleNamespace

import warnings

import pytest
import torch
import torch.nn.functional as F
from transformers import LlamaConfig, LlamaForCausalLM

try:
    import trl  # noqa: F401
except ImportError as error:  # fail, never skip: trl is a dev requirement
    raise ImportError("tests/training/test_objective_parity.py needs trl: pip install -r requirements-test.txt") from error
with warnings.catch_warnings():
    warnings.filterwarnings("ignore", message="You are importing from 'trl.experimental'")
    from trl.experimental.gkd import GKDTrainer
from trl.trainer.distillation_trainer import _chunked_divergence_loss
from trl.trainer.dpo_trainer import DPOTrainer
from trl.trainer.utils import add_fused_lm_head, selective_log_softmax

from minimind.evaluate import token_logprobs
from minimind.training.objectives.distill import distill_loss
from minimind.training.objectives.dpo import chosen_nll, dpo_loss

TOL = 1e-5
PAIRS = 6


class _OneProcessAccelerator:
    """What `DPOTrainer._compute_loss` reads of an `accelerate.Accelerator` on one process.
    `gather` is only called on metric tensors; we keep them so the test can read trl's
    per-pair rewards (the first two gathers, dpo_trainer.py:1584-1585)."""

    device = torch.device("cpu")

    def __init__(self):
        self.gathered = []

    def gather_for_metrics(self, tensor):
        return tensor

    def gather(self, tensor):
        self.gathered.append(tensor)
        return tensor


def _trl_dpo(policy_chosen, policy_rejected, reference_chosen, reference_rejected, beta, label_smoothing,
             loss_type, sft_weight: float = 0.0):
    """trl's DPO loss on summed answer log-probs: (mean loss, chosen rewards, rejected rewards, metrics)."""
    trainer = object.__new__(DPOTrainer)
    trainer.model = SimpleNamespace(training=False)  # "eval" metrics: no token counting
    trainer.accelerator = _OneProcessAccelerator()
    trainer.beta, trainer.label_smoothing = beta, label_smoothing
    trainer.loss_types, trainer.loss_weights = [loss_type], [1.0]
    if sft_weight:  # RPO: trl combines its "sft" loss (mean NLL of the chosen completions) with a weight
        trainer.loss_types, trainer.loss_weights = [loss_type, "sft"], [1.0, sft_weight]
    trainer.f_divergence_type = "reverse_kl"  # standard DPO
    trainer.ld_alpha = None
    trainer.precompute_ref_logps = True
    trainer.aux_loss_enabled = False
    trainer.use_weighting = False
    trainer._metrics = {"train": defaultdict(list), "eval": defaultdict(list)}
    trainer._total_train_tokens, trainer._tp_size = 0, 1

    rows = 2 * policy_chosen.shape[0]  # chosen rows first, then rejected: trl's batch layout too
    log_probs = torch.cat([policy_chosen, policy_rejected]).unsqueeze(1)  # one completion token per row
    zeros = torch.zeros(rows, 1, dtype=log_probs.dtype)

    def model(**kwargs):
        assert kwargs["fused_lm_head"] is True
        return SimpleNamespace(log_probs=log_probs, entropy=zeros, mean_logits=zeros,
                               is_top1=torch.zeros(rows, 1, dtype=torch.bool))

    inputs = {"input_ids": torch.zeros(rows, 2, dtype=torch.long),
              "attention_mask": torch.ones(rows, 2, dtype=torch.long),
              "completion_mask": torch.tensor([[0, 1]] * rows),  # one prompt token, one answer token
              "ref_chosen_logps": reference_chosen, "ref_rejected_logps": reference_rejected}
    loss = trainer._compute_loss(model, inputs, return_outputs=False)
    chosen_rewards, rejected_rewards = trainer.accelerator.gathered[:2]
    return loss, chosen_rewards, rejected_rewards, trainer._metrics["eval"]


def _pair_inputs(seed: int, sorted_logratios: bool):
    """Summed log-probs of PAIRS answers (float64, as leaves): policy chosen/rejected, reference chosen/rejected.
    With `sorted_logratios` the policy-minus-reference log-ratios are ascending in the batch for both the
    chosen and the rejected answers (trl's "aot_unpaired" sort is then the identity)."""
    g = torch.Generator().manual_seed(seed)
    reference_chosen = -torch.rand(PAIRS, generator=g, dtype=torch.float64) * 40 - 5
    reference_rejected = -torch.rand(PAIRS, generator=g, dtype=torch.float64) * 40 - 5
    chosen_ratio = torch.randn(PAIRS, generator=g, dtype=torch.float64) * 4
    rejected_ratio = torch.randn(PAIRS, generator=g, dtype=torch.float64) * 4
    if sorted_logratios:
        chosen_ratio, rejected_ratio = chosen_ratio.sort().values, rejected_ratio.sort().values
    values = (reference_chosen + chosen_ratio, reference_rejected + rejected_ratio, reference_chosen,
              reference_rejected)
    return [v.clone().requires_grad_(True) for v in values]


def _loss_and_grads(fn, inputs):
    out = fn(*inputs)
    grads = torch.autograd.grad(out[0], inputs)
    return out, grads


def _max_diff(a, b) -> float:
    return (a.detach().double() - b.detach().double()).abs().max().item()


@pytest.mark.parametrize("beta", [0.1, 0.5])
@pytest.mark.parametrize("label_smoothing", [0.0, 0.1])
def test_dpo_loss_gradients_and_rewards_match_trl(beta, label_smoothing):
    """Loss, d loss / d (each of the four summed log-probs) and the per-pair rewards equal trl's.
    label_smoothing 0: trl's "sigmoid" loss on unsorted inputs. label_smoothing > 0: trl's cDPO
    expression ("aot_unpaired", whose sort is the identity on these inputs; see the module docstring)."""
    smoothed = label_smoothing > 0
    inputs = _pair_inputs(seed=1 + int(beta * 10) + int(smoothed), sorted_logratios=smoothed)
    if smoothed:  # the premise that makes trl's sort a no-op
        pc, pr, rc, rr = (x.detach() for x in inputs)
        assert ((pc - rc).diff() > 0).all() and ((pr - rr).diff() > 0).all()

    (loss, chosen, rejected), grads = _loss_and_grads(lambda *x: dpo_loss(*x, beta, label_smoothing), inputs)
    (trl_loss, trl_chosen, trl_rejected, metrics), trl_grads = _loss_and_grads(
        lambda *x: _trl_dpo(*x, beta, label_smoothing, "aot_unpaired" if smoothed else "sigmoid"), inputs)

    assert trl_loss.dtype == loss.dtype == torch.float64
    assert _max_diff(loss, trl_loss) < TOL
    for name, ours, theirs in zip(("policy_chosen", "policy_rejected", "reference_chosen", "reference_rejected"),
                                  grads, trl_grads):
        assert _max_diff(ours, theirs) < TOL, name
    # Not vacuous: the gradients are not all zero, and the chosen/rejected ones differ in sign.
    assert grads[0].abs().min() > 0 and (grads[0] * grads[1] < 0).all()
    assert _max_diff(chosen, trl_chosen) < TOL and _max_diff(rejected, trl_rejected) < TOL
    assert metrics["rewards/chosen"][0] == pytest.approx(chosen.mean().item(), abs=TOL)
    assert metrics["rewards/margins"][0] == pytest.approx((chosen - rejected).mean().item(), abs=TOL)
    assert metrics["rewards/accuracies"][0] == pytest.approx((chosen > rejected).double().mean().item())


@pytest.mark.parametrize("beta", [0.1, 0.5])
def test_dpo_label_smoothing_is_trls_sigmoid_mixed_with_the_swapped_pair(beta):
    """cDPO with smoothing e is (1 - e) x trl's "sigmoid" loss on (chosen, rejected) plus e x the same
    loss with chosen and rejected swapped: -log s(-b D) is the sigmoid loss of the reversed preference.
    Unsorted inputs, so this also covers the label-smoothed loss away from trl's aot branch."""
    e = 0.1
    inputs = _pair_inputs(seed=7 + int(beta * 10), sorted_logratios=False)
    pc, pr, rc, rr = inputs

    (loss, chosen, rejected), grads = _loss_and_grads(lambda *x: dpo_loss(*x, beta, e), inputs)

    def mixed(pc, pr, rc, rr):
        forward, fc, fr, _ = _trl_dpo(pc, pr, rc, rr, beta, 0.0, "sigmoid")
        swapped, sc, sr, _ = _trl_dpo(pr, pc, rr, rc, beta, 0.0, "sigmoid")
        assert _max_diff(fc, sr) == 0 and _max_diff(fr, sc) == 0
        return (1 - e) * forward + e * swapped, fc, fr

    (trl_loss, trl_chosen, trl_rejected), trl_grads = _loss_and_grads(mixed, inputs)
    assert _max_diff(loss, trl_loss) < TOL
    for ours, theirs in zip(grads, trl_grads):
        assert _max_diff(ours, theirs) < TOL
    assert _max_diff(chosen, trl_chosen) < TOL and _max_diff(rejected, trl_rejected) < TOL
    # and smoothing matters here: the unsmoothed loss is measurably different
    assert _max_diff(loss, dpo_loss(pc, pr, rc, rr, beta, 0.0)[0]) > 1e-3


def _answer_batch(seed: int, rows=4, length=12, vocab=50):
    """Token ids and labels as our collate makes them: the answer tokens labelled, the prompt
    (a different length per row) and the end padding -100; trl's DPO builds its labels the same
    way, input_ids.masked_fill(completion_mask == 0, -100) (dpo_trainer.py:1298)."""
    g = torch.Generator().manual_seed(seed)
    input_ids = torch.randint(0, vocab, (rows, length), generator=g)
    completion_mask = torch.zeros(rows, length, dtype=torch.long)
    for row, (start, end) in enumerate([(3, 12), (5, 10), (1, 7), (8, 12)][:rows]):
        completion_mask[row, start:end] = 1
    return input_ids, completion_mask, input_ids.masked_fill(completion_mask == 0, -100)


def test_sequence_logprobs_match_trls_selective_log_softmax():
    """token_logprobs(...)[0].sum(-1) is trl's completion log-prob: selective_log_softmax
    (trl/trainer/utils.py:538) of the shifted logits at the next tokens, times the shifted
    completion mask, summed over the sequence. Our function computes in float32 whatever the
    input dtype while trl's reference here runs in float64, so the difference is float32 rounding
    (it grows with the size of the sums; these answers are 4-9 tokens of about -4 nats each)."""
    input_ids, completion_mask, labels = _answer_batch(seed=3)
    g = torch.Generator().manual_seed(4)
    logits = torch.randn(*input_ids.shape, 50, generator=g, dtype=torch.float64)

    ours_tokens, mask = token_logprobs(logits, labels)
    trl_tokens = selective_log_softmax(logits[:, :-1], input_ids[:, 1:]) * completion_mask[:, 1:]
    assert torch.equal(mask, completion_mask[:, 1:].bool())
    assert _max_diff(ours_tokens, trl_tokens) < TOL
    assert _max_diff(ours_tokens.sum(-1), trl_tokens.sum(-1)) < TOL


def test_sequence_logprobs_match_trls_fused_lm_head_used_by_dpo():
    """trl 1.x's DPOTrainer scores completions with `add_fused_lm_head` (trl/trainer/utils.py:1548):
    model(..., labels, fused_lm_head=True).log_probs, the log-prob of each labelled next token computed
    from the hidden states in tiles, summed over the sequence (dpo_trainer.py:1299-1304). On a tiny
    random Llama, that equals token_logprobs on the same model's ordinary logits, values and gradients
    (w.r.t. the LM head weight).
    (Our own MiniMind model cannot take trl's fused head: its backbone returns a tuple, not an
    output with `last_hidden_state`; the fused head is only trl's way to the same numbers.)"""
    torch.manual_seed(0)
    model = LlamaForCausalLM(LlamaConfig(vocab_size=50, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                                         num_attention_heads=2, num_key_value_heads=1)).double()
    add_fused_lm_head(model)
    input_ids, completion_mask, labels = _answer_batch(seed=5)
    weight = model.get_output_embeddings().weight

    trl_sums = model(input_ids=input_ids, labels=labels, fused_lm_head=True).log_probs.sum(dim=1)
    ours_sums = token_logprobs(model(input_ids=input_ids).logits, labels)[0].sum(-1)
    assert _max_diff(ours_sums, trl_sums) < TOL
    (trl_grad,) = torch.autograd.grad(trl_sums.sum(), weight)
    (ours_grad,) = torch.autograd.grad(ours_sums.sum(), weight)
    assert _max_diff(ours_grad, trl_grad) < TOL


def _distill_inputs(seed: int, rows=3, length=10, vocab=40):
    g = torch.Generator().manual_seed(seed)
    student = (torch.randn(rows, length, vocab, generator=g, dtype=torch.float64) * 2).requires_grad_(True)
    teacher = torch.randn(rows, length, vocab, generator=g, dtype=torch.float64) * 2
    labels = torch.randint(0, vocab, (rows, length), generator=g)
    labels[0, :4] = -100  # a prompt
    labels[2, 7:] = -100  # padding
    return student, teacher, labels


@pytest.mark.parametrize("temperature", [1.0, 2.0, 0.7])
def test_distill_kl_matches_trl_gkd_generalized_jsd(temperature):
    """Our KL term is trl's GKDTrainer.generalized_jsd_loss (trl/experimental/gkd/gkd_trainer.py:238)
    with beta=0, times T^2:

      * beta=0 is F.kl_div(student_log_probs, teacher_log_probs, log_target=True), i.e.
        sum_v p_teacher (log p_teacher - log p_student) = KL(teacher || student), our direction
        (beta=1 would be the reverse KL(student || teacher));
      * trl divides both logits by the temperature before the softmax, as we do, but does not
        multiply by T^2 (Hinton's gradient-size correction, which we apply);
      * trl's "batchmean" with labels is the sum over labelled positions and the vocabulary divided by
        the number of labelled positions: our per-labelled-token mean;
      * alignment: GKD passes logits[:, :-1] and labels[:, 1:] (gkd_trainer.py:344-346), the same
        position-t-predicts-token-t+1 shift as ours.

    So distill_loss(s, t, labels, T, kl_weight=1, ce_weight=0)[2] == T^2 * gjsd(s[:, :-1], t[:, :-1],
    labels[:, 1:], beta=0, temperature=T), with equal gradients w.r.t. the student logits."""
    student, teacher, labels = _distill_inputs(seed=11)
    loss, _, kl = distill_loss(student, teacher, labels, temperature, kl_weight=1.0, ce_weight=0.0)
    trl_kl = temperature ** 2 * GKDTrainer.generalized_jsd_loss(
        student[:, :-1], teacher[:, :-1], labels=labels[:, 1:], beta=0.0, temperature=temperature)
    assert _max_diff(loss, kl) == 0
    assert _max_diff(kl, trl_kl) < TOL
    (grad,) = torch.autograd.grad(kl, student)
    (trl_grad,) = torch.autograd.grad(trl_kl, student)
    assert _max_diff(grad, trl_grad) < TOL
    assert grad[:, -1].abs().max() == 0 and grad[0, :3].abs().max() == 0  # unlabelled next tokens: no gradient
    # The direction matters: the reverse KL (beta=1) is a different number on these logits.
    reverse = temperature ** 2 * GKDTrainer.generalized_jsd_loss(
        student[:, :-1], teacher[:, :-1], labels=labels[:, 1:], beta=1.0, temperature=temperature)
    assert _max_diff(kl, reverse) > 1e-3


@pytest.mark.parametrize("temperature", [1.0, 2.0])
def test_distill_kl_matches_trl_distillation_trainer_chunked_divergence(temperature):
    """The same KL through trl's (non-experimental) DistillationTrainer loss, `_chunked_divergence_loss`
    (trl/trainer/distillation_trainer.py:101; beta=0 is KL(teacher || student) there too, per
    `ChunkedDivergenceFunction`, trl/kernels/chunked_divergence.py:371). It takes hidden states and
    LM-head weights; an identity head (weight = I_V) makes the hidden states the logits. Its mask is
    a completion mask already aligned with the predicting positions (labels[:, 1:] != -100), its
    mean is per valid position and there is no T^2, as in GKD. It computes in float32."""
    student, teacher, labels = _distill_inputs(seed=13)
    vocab = student.shape[-1]
    _, _, kl = distill_loss(student, teacher, labels, temperature, kl_weight=1.0, ce_weight=0.0)
    identity = torch.eye(vocab, dtype=torch.float64)
    trl_kl, _, valid = _chunked_divergence_loss(student[:, :-1], teacher[:, :-1], identity, identity,
                                                (labels[:, 1:] != -100).long(), beta=0.0, temperature=temperature)
    trl_kl = temperature ** 2 * trl_kl
    assert int(valid) == int((labels[:, 1:] != -100).sum())
    assert _max_diff(kl, trl_kl) < TOL
    (grad,) = torch.autograd.grad(kl, student)
    (trl_grad,) = torch.autograd.grad(trl_kl, student)
    assert _max_diff(grad, trl_grad) < TOL


def test_distill_kl_matches_torch_kl_div():
    """Independent of trl: F.kl_div(log q_student, log p_teacher, log_target=True) summed over the
    vocabulary and averaged over labelled next tokens, times T^2."""
    student, teacher, labels = _distill_inputs(seed=17)
    temperature = 1.5
    _, _, kl = distill_loss(student, teacher, labels, temperature, kl_weight=1.0, ce_weight=0.0)
    s = F.log_softmax(student[:, :-1] / temperature, -1)
    t = F.log_softmax(teacher[:, :-1] / temperature, -1)
    mask = labels[:, 1:] != -100
    reference = F.kl_div(s, t, reduction="none", log_target=True).sum(-1)[mask].mean() * temperature ** 2
    assert _max_diff(kl, reference) < TOL


@pytest.mark.parametrize("sft_weight", [0.5, 1.0])
def test_dpo_with_an_sft_term_matches_trl_rpo(sft_weight):
    """dpo.sft_weight adds the mean NLL of the chosen answers' tokens: trl's loss types
    ["sigmoid", "sft"] with weights [1, sft_weight] (RPO). One answer token per row here, as in
    the harness, so the per-token mean is the mean over pairs."""
    inputs = _pair_inputs(seed=7, sorted_logratios=False)

    def ours(policy_chosen, policy_rejected, reference_chosen, reference_rejected):
        loss, chosen, rejected = dpo_loss(policy_chosen, policy_rejected, reference_chosen, reference_rejected, 0.1)
        token_logps = torch.cat([policy_chosen, policy_rejected]).unsqueeze(1)
        return loss + sft_weight * chosen_nll(token_logps, torch.ones_like(token_logps, dtype=torch.bool)), chosen

    def theirs(*args):
        return _trl_dpo(*args, 0.1, 0.0, "sigmoid", sft_weight)

    (our_loss, _), our_grads = _loss_and_grads(ours, inputs)
    (trl_loss, *_), trl_grads = _loss_and_grads(theirs, inputs)
    assert _max_diff(our_loss, trl_loss) < TOL
    assert max(_max_diff(a, b) for a, b in zip(our_grads, trl_grads)) < TOL
