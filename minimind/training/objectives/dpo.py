"""Direct preference optimisation (Rafailov et al., 2023): raise the policy's log-odds of
the chosen answer over the rejected one, measured against a frozen reference policy
(the starting model), so no reward model and no sampling are needed.

A batch holds B pairs as 2B rows: the chosen answers first, then the rejected ones,
labelled on the answer tokens only (minimind.training.batches.collate). With LoRA the
reference is the same weights with the adapter switched off, so there is no second copy
in memory; a full fine-tune keeps one frozen copy of the starting weights.
"""

from __future__ import annotations

import copy

import torch
import torch.nn.functional as F

from ...evaluate import token_logprobs
from ..batches import split_pairs
from .language_model import nll_figures


def dpo_loss(policy_chosen: torch.Tensor, policy_rejected: torch.Tensor, reference_chosen: torch.Tensor,
             reference_rejected: torch.Tensor, beta: float, label_smoothing: float = 0.0):
    """The sigmoid DPO loss of a batch of pairs from summed answer log-probabilities.

    Returns (mean loss, chosen rewards, rejected rewards); a reward is beta times the
    policy's log-ratio to the reference. `label_smoothing` > 0 is the conservative variant
    that assumes that share of the pairs is mislabelled."""
    logits = (policy_chosen - policy_rejected) - (reference_chosen - reference_rejected)
    losses = (-F.logsigmoid(beta * logits) * (1 - label_smoothing)
              - F.logsigmoid(-beta * logits) * label_smoothing)
    chosen_rewards = beta * (policy_chosen - reference_chosen).detach()
    rejected_rewards = beta * (policy_rejected - reference_rejected).detach()
    return losses.mean(), chosen_rewards, rejected_rewards


def chosen_nll(token_logps: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean negative log-likelihood per token of the chosen answers (the first half of the rows):
    the supervised term that `dpo.sft_weight` adds (RPO, Pang et al., 2024; trl's "sft" loss), which
    keeps the chosen answers likely while the pair's margin grows."""
    chosen, chosen_mask = split_pairs(token_logps)[0], split_pairs(mask)[0]
    return -chosen.sum() / chosen_mask.sum().clamp(min=1)


class Dpo:
    name = "dpo"

    def __init__(self, base_model, reference, beta: float, label_smoothing: float, precision,
                 bpc_factor: float | None, sft_weight: float = 0.0):
        self.base_model = base_model    # the peft model (adapter switched off for the reference) ...
        self.reference = reference      # ... or a frozen copy of the starting weights
        self.beta, self.label_smoothing, self.sft_weight = beta, label_smoothing, sft_weight
        self.precision, self.bpc_factor = precision, bpc_factor

    @classmethod
    def for_model(cls, model, cfg, precision, bpc_factor):
        reference = None
        if not cfg.adapter_kind:
            reference = copy.deepcopy(model).eval().requires_grad_(False)
        return cls(model, reference, cfg.dpo.beta, cfg.dpo.label_smoothing, precision, bpc_factor,
                   cfg.dpo.sft_weight)

    def _reference_logits(self, batch: dict) -> torch.Tensor:
        with torch.no_grad():
            if self.reference is not None:
                return self.reference(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits
            with self.base_model.disable_adapter():
                return self.base_model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits

    def _pair_terms(self, model, batch: dict):
        logits = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits
        reference_logits = self._reference_logits(batch)
        policy, mask = token_logprobs(logits, batch["labels"])
        reference, _ = token_logprobs(reference_logits, batch["labels"])
        loss, chosen, rejected = dpo_loss(*split_pairs(policy.sum(-1)), *split_pairs(reference.sum(-1)),
                                          self.beta, self.label_smoothing)
        if self.sft_weight:
            loss = loss + self.sft_weight * chosen_nll(policy, mask)
        return loss, chosen, rejected, logits, reference_logits, policy, mask

    def loss(self, model, batch: dict) -> tuple[torch.Tensor, dict]:
        loss, chosen, rejected, *_ = self._pair_terms(model, batch)
        return loss, {"reward_margin": (chosen - rejected).mean(), "accuracy": (chosen > rejected).float().mean(),
                      "chosen_reward": chosen.mean(), "rejected_reward": rejected.mean()}

    @torch.no_grad()
    def evaluate(self, model, batches) -> dict:
        """DPO loss, reward margin, preference accuracy (chosen reward > rejected; a tie, as for the
        starting model itself, counts one half), the policy's
        mean per-token KL to the reference on the answers, and BPC of the chosen answers."""
        device = next(model.parameters()).device
        was_training = model.training
        model.eval()
        totals = dict(loss=0.0, margin=0.0, correct=0.0, pairs=0, kl=0.0, kl_tokens=0, nll=0.0, tokens=0)
        try:
            for batch in batches:
                batch = {k: v.to(device) for k, v in batch.items()}
                with self.precision.autocast():
                    loss, chosen, rejected, logits, ref_logits, policy, mask = self._pair_terms(model, batch)
                pairs = chosen.numel()
                totals["loss"] += loss.item() * pairs
                totals["margin"] += (chosen - rejected).sum().item()
                totals["correct"] += (chosen > rejected).sum().item() + 0.5 * (chosen == rejected).sum().item()
                totals["pairs"] += pairs
                log_p = logits[:, :-1].float().log_softmax(-1)
                log_q = ref_logits[:, :-1].float().log_softmax(-1)
                kl = (log_p.exp() * (log_p - log_q)).sum(-1)
                totals["kl"] += (kl * mask).sum().item()
                totals["kl_tokens"] += int(mask.sum())
                totals["nll"] -= split_pairs(policy)[0].sum().item()
                totals["tokens"] += int(split_pairs(mask)[0].sum())
        finally:
            model.train(was_training)
        pairs = max(totals["pairs"], 1)
        chosen_fit = nll_figures(totals["nll"] / max(totals["tokens"], 1), self.bpc_factor)
        figures = {"loss": totals["loss"] / pairs, "accuracy": totals["correct"] / pairs,
                   "reward_margin": totals["margin"] / pairs, "kl": totals["kl"] / max(totals["kl_tokens"], 1),
                   "chosen_ppl": chosen_fit["ppl"]}
        if "bpc" in chosen_fit:
            figures["chosen_bpc"] = chosen_fit["bpc"]
        return figures
