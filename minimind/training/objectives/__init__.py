"""What the one training loop optimises. An objective is a small object with:

- `loss(model, batch) -> (loss, metrics)`: the mean loss of one micro-batch and a dict of
  detached scalar tensors (averaged over the step's micro-batches and processes, logged
  beside the loss);
- `evaluate(model, batches) -> dict`: held-out figures over the validation batches
  (`loss` first when there is one; GRPO reports rewards; the loop records each as
  `val_<name>`).

An objective whose final evaluation is more than figures (classify: a confusion matrix) also
has `report(model, batches) -> dict`, which the loop calls over every validation row at the end
and saves (see loop.py).

An objective that makes its own data (GRPO samples answers) also has
`rollouts(model, micro_batches, step) -> (batches, metrics)`, which turns a step's prompt
batches into training batches, and `updates_per_step`, the optimizer passes over them.

`language_model` serves pretrain and supervised fine-tuning (the data decides which
tokens carry a label: all of plain text, only the assistant's in chat), `dpo` learns
from preference pairs against a frozen reference policy, `distill` from a teacher's
logits, `grpo` from rewards on answers it samples itself, and `classify` trains a sequence
classifier on labelled text. Each keeps whatever frozen model it needs; none keeps training state, so
resuming a run rebuilds the same objective from the config.
"""

from __future__ import annotations

from ..rewards import build_rewards
from .classify import Classify
from .distill import Distill
from .dpo import Dpo
from .grpo import Grpo
from .language_model import LanguageModel


def build_objective(cfg, model, tokenizer, device: str, precision, corpus, log, rank: int = 0, world: int = 1):
    """The objective of `cfg.mode` for this run. `model` is the freshly built model, before any
    checkpoint is loaded into it: DPO's reference policy is that starting model."""
    bpc_factor = corpus.val_tokens / corpus.val_characters if corpus.val_characters else None
    if cfg.objective == "classify":
        return Classify.for_corpus(cfg, corpus, precision, log)
    if cfg.objective == "dpo":
        d = cfg.dpo
        log(f"objective: DPO ({d.loss}, beta {d.beta:g}, label smoothing {d.label_smoothing:g})"
            + (f" + {d.sft_weight:g} x next-token loss of the chosen answers (RPO)" if d.sft_weight else "")
            + (" against the starting model with the adapter off" if cfg.adapter_kind
               else " against a frozen copy of the starting model"))
        return Dpo.for_model(model, cfg, precision, bpc_factor)
    if cfg.objective == "grpo":
        g = cfg.grpo
        rewards = build_rewards(g.rewards)
        log(f"objective: GRPO, {g.group_size} answers per prompt, rewards "
            + ", ".join(f"{r.name} x{r.weight:g}" for r in rewards)
            + (" (each relative to its group, then summed: normalize_then_sum)"
               if g.reward_aggregation == "normalize_then_sum" else "")
            + f"; clip {g.clip:g}, {g.updates} update(s) per batch of rollouts"
            + (f", KL penalty {g.beta:g} to the starting model" if g.beta else ", no KL penalty"))
        return Grpo.for_model(model, cfg, tokenizer, precision, rewards, rank, world)
    if cfg.objective == "distill":
        return Distill.from_teacher(cfg, tokenizer, device, precision, bpc_factor, log)
    return LanguageModel(precision, bpc_factor)
