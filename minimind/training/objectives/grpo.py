"""Group relative policy optimisation (Shao et al., 2024): learn from rewards a user states.

Each step the policy writes `group_size` answers to every prompt of the batch (sampled
through the inference engine, rollouts.py), the configured rewards score them
(training/rewards/, built-in functions only), and each answer's advantage is its reward
relative to the other answers to the same prompt: (r - group mean) / group std. With several
rewards that r is their weighted mean, unless `reward_aggregation: normalize_then_sum` (GDPO, Liu et
al., 2026): then each reward is made relative to its group first, the results are summed by weight,
and the sums are standardised over the step's batch. A reward that varies within few groups, or
little beside a larger one, then still moves the policy. The
loss is PPO's clipped policy-ratio objective per answer token, with an optional KL
penalty to the starting model (k3 estimator: exp(q - p) - (q - p) - 1, with q the
reference's and p the policy's log-probability), averaged over each answer's tokens, then
over the answers (the paper's normalisation: each answer weighs the same, and a batch
split over micro-batches or processes gives the same gradient as the whole batch).

The loop asks `rollouts()` for a step's training batches, then makes `updates`
optimizer passes over them: the first pass has ratio 1 (the answers come from these
weights); later passes see how far the policy moved and clip it. With LoRA the
reference is the same weights with the adapter switched off; a full fine-tune keeps a
frozen copy of the starting weights.
"""

from __future__ import annotations

import copy

import torch
import torch.distributed as dist

from ...evaluate import token_logprobs
from ..batches import IGNORE
from ..rewards import score_answers
from .rollouts import RolloutPolicy

SEED_STRIDE = 1_000_003


def group_advantages(rewards: torch.Tensor, scale: bool = True, eps: float = 1e-4) -> torch.Tensor:
    """Advantages of a (prompts, group) reward matrix: each reward minus its group's mean, divided
    by the group's (unbiased) standard deviation when `scale`. A group whose answers all score
    the same teaches nothing: its advantages are 0."""
    centred = rewards - rewards.mean(dim=1, keepdim=True)
    if not scale:
        return centred
    return centred / (rewards.std(dim=1, keepdim=True) + eps)


def decoupled_advantages(rewards: torch.Tensor, weights: torch.Tensor, eps: float = 1e-4,
                          world: int = 1) -> torch.Tensor:
    """GDPO's advantages of a (prompts, group, rewards) matrix: each reward minus its group's mean over
    its group's (unbiased) std, summed with `weights`, then standardised over the whole step's batch
    (every process's rows when `world` > 1). A reward alike across a group adds nothing to it."""
    summed = (group_advantages(rewards, eps=eps) * weights).sum(-1).view(-1)  # (dim 1 is the group here too)
    moments = torch.stack([torch.tensor(float(summed.numel())), summed.sum(), (summed * summed).sum()]).double()
    if world > 1:
        dist.all_reduce(moments)
    n, total, squares = moments.tolist()
    mean = total / n
    std = max(0.0, (squares - n * mean * mean) / (n - 1)) ** 0.5 if n > 1 else 0.0
    return (summed - mean) / (std + eps)


def grpo_loss(logps: torch.Tensor, old_logps: torch.Tensor, advantages: torch.Tensor, mask: torch.Tensor,
              clip: float, beta: float = 0.0, ref_logps: torch.Tensor | None = None):
    """The clipped GRPO loss of a batch of answers, per-token tensors of shape (rows, T).

    `advantages` has one value per row. Returns (loss, metrics): the loss is the mean over rows of
    each row's mean over its answer tokens of -min(ratio·A, clip(ratio, 1-ε, 1+ε)·A) + β·KL;
    metrics are the mean KL per answer token and the share of tokens whose ratio was clipped."""
    mask = mask.float()
    tokens = mask.sum().clamp(min=1)
    row_tokens = mask.sum(-1).clamp(min=1)
    ratio = torch.exp(logps - old_logps)
    adv = advantages[:, None]
    unclipped, clipped = ratio * adv, ratio.clamp(1 - clip, 1 + clip) * adv
    per_token = -torch.minimum(unclipped, clipped)
    metrics = {"clip_fraction": ((clipped < unclipped).float() * mask).sum().detach() / tokens}
    if ref_logps is not None:
        delta = ref_logps - logps
        kl = torch.exp(delta) - delta - 1
        metrics["kl"] = (kl * mask).sum().detach() / tokens
        if beta:
            per_token = per_token + beta * kl
    return ((per_token * mask).sum(-1) / row_tokens).mean(), metrics


class Grpo:
    name = "grpo"

    def __init__(self, base_model, reference, tokenizer, cfg, precision, rewards):
        self.base_model = base_model    # the trained model (peft-wrapped for adapters)
        self.reference = reference      # frozen starting weights (full fine-tune with beta > 0), else None
        self.g = cfg.grpo
        self.seed = cfg.seed
        self.updates_per_step = cfg.grpo.updates
        self.adapter = bool(cfg.adapter_kind)
        self.precision, self.rewards = precision, rewards
        self.policy = RolloutPolicy(base_model, tokenizer)
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
        self.rank, self.world = 0, 1
        self.samples: list[dict] = []   # a few held-out answers of the last evaluation, with their rewards

    @classmethod
    def for_model(cls, model, cfg, tokenizer, precision, rewards, rank: int = 0, world: int = 1):
        reference = None
        if cfg.grpo.beta > 0 and not cfg.adapter_kind:
            reference = copy.deepcopy(model).eval().requires_grad_(False)
        objective = cls(model, reference, tokenizer, cfg, precision, rewards)
        objective.rank, objective.world = rank, world
        return objective

    # ---- rollouts ---------------------------------------------------------

    def rollouts(self, model, micro_batches, step: int) -> tuple[list[dict], dict]:
        """The step's training batches: `group_size` sampled answers to each prompt, scored and
        turned into advantages (one training micro-batch per prompt micro-batch), and the
        rollout metrics (mean rewards, answer length, sampling speed)."""
        micro = list(micro_batches)
        G = self.g.group_size
        prompts, texts, records, seeds = [], [], [], []
        for m, batch in enumerate(micro):
            for i, (ids, text, record) in enumerate(zip(batch["prompt_ids"], batch["prompt"], batch["params"])):
                row = (m * self.world + self.rank) * len(batch["prompt_ids"]) + i  # its place in the global batch
                for j in range(G):
                    prompts.append(list(ids))
                    texts.append(text)
                    records.append(record)
                    seeds.append(_seed(self.seed, step, row, j))
        self.policy.sync(self.base_model)
        rolled = self.policy.sample(prompts, seeds, self.g.max_new_tokens, self.g.temperature, self.g.top_k,
                                    self.g.top_p)
        scores = score_answers(self.rewards, [self.policy.text(a) for a in rolled.answers], texts, records)
        totals = torch.tensor([s["reward"] for s in scores], dtype=torch.float32).view(-1, G)
        if self.g.reward_aggregation == "normalize_then_sum":
            each = torch.tensor([[s[r.name] for r in self.rewards] for s in scores], dtype=torch.float32)
            advantages = decoupled_advantages(each.view(-1, G, len(self.rewards)),
                                              torch.tensor([r.weight for r in self.rewards]), world=self.world)
        else:
            advantages = group_advantages(totals, self.g.scale_rewards).view(-1)
        batches, start = [], 0
        for batch in micro:
            rows = len(batch["prompt_ids"]) * G
            batches.append(self._training_batch(prompts[start:start + rows], rolled.answers[start:start + rows],
                                                advantages[start:start + rows]))
            start += rows
        metrics = _mean_rewards(scores)
        metrics["reward_std"] = float(totals.std(dim=1).mean())  # group_size >= 2
        metrics["answer_tokens"] = rolled.tokens / len(rolled.answers)
        metrics["rollout_tokens_per_s"] = rolled.tokens / max(rolled.seconds, 1e-9)
        return batches, metrics

    def _training_batch(self, prompts: list[list[int]], answers: list[list[int]], advantages: torch.Tensor) -> dict:
        """Prompt + answer rows labelled on the answer tokens, with each row's advantage, and the
        per-token log-probabilities the loss compares with: the sampling policy's (for passes after
        the first) and the reference's (for the KL term)."""
        width = max(len(p) + max(len(a), 1) for p, a in zip(prompts, answers))
        rows = len(prompts)
        input_ids = torch.full((rows, width), self.pad_id, dtype=torch.long)
        labels = torch.full((rows, width), IGNORE, dtype=torch.long)
        mask = torch.zeros((rows, width), dtype=torch.long)
        for r, (p, a) in enumerate(zip(prompts, answers)):
            seq = p + a
            input_ids[r, :len(seq)] = torch.as_tensor(seq)
            labels[r, len(p):len(seq)] = torch.as_tensor(a, dtype=torch.long)
            mask[r, :len(seq)] = 1
        batch = {"input_ids": input_ids, "labels": labels, "attention_mask": mask, "advantages": advantages}
        device = next(self.base_model.parameters()).device
        on_device = {k: v.to(device) for k, v in batch.items()}
        if self.updates_per_step > 1:
            batch["old_logps"] = self._logps(self.base_model, on_device).cpu()
        if self.reference is not None or self.adapter:  # the KL term, or (beta 0, LoRA) just its figure
            batch["ref_logps"] = self._reference_logps(on_device).cpu()
        return batch

    @torch.no_grad()
    def _logps(self, model, batch: dict) -> torch.Tensor:
        was_training = model.training
        model.eval()
        try:
            with self.precision.autocast():
                logits = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits
            return token_logprobs(logits, batch["labels"])[0]
        finally:
            model.train(was_training)

    def _reference_logps(self, batch: dict) -> torch.Tensor:
        if self.reference is not None:
            return self._logps(self.reference, batch)
        with self.base_model.disable_adapter():
            return self._logps(self.base_model, batch)

    # ---- the loss the loop optimises ------------------------------------

    def loss(self, model, batch: dict) -> tuple[torch.Tensor, dict]:
        logits = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits
        logps, mask = token_logprobs(logits, batch["labels"])
        old = batch.get("old_logps")
        return grpo_loss(logps, logps.detach() if old is None else old, batch["advantages"], mask,
                         self.g.clip, self.g.beta, batch.get("ref_logps"))

    # ---- held-out figures -------------------------------------------------

    def evaluate(self, model, batches) -> dict:
        """Mean rewards of one sampled answer to each held-out prompt (the same seeds at every
        evaluation, so the curve moves with the weights only); keeps the first `eval_samples`
        answers in `samples`."""
        self.policy.sync(self.base_model)
        prompts, texts, records = [], [], []
        for batch in batches:
            prompts += [list(ids) for ids in batch["prompt_ids"]]
            texts += list(batch["prompt"])
            records += list(batch["params"])
        if not prompts:
            return {}
        seeds = [_seed(self.seed, -1, i, 0) for i in range(len(prompts))]
        rolled = self.policy.sample(prompts, seeds, self.g.max_new_tokens, self.g.temperature, self.g.top_k,
                                    self.g.top_p)
        answers = [self.policy.text(a) for a in rolled.answers]
        scores = score_answers(self.rewards, answers, texts, records)
        self.samples = [{"prompt": t, "answer": a, "reward": s["reward"],
                         "rewards": {k: v for k, v in s.items() if k != "reward"}}
                        for t, a, s in zip(texts[:self.g.eval_samples], answers, scores)]
        figures = _mean_rewards(scores)
        figures["answer_tokens"] = rolled.tokens / len(rolled.answers)
        return figures


def _mean_rewards(scores: list[dict]) -> dict:
    """{"reward": mean total, "reward_<name>": mean of each reward} over scored answers."""
    return {(name if name == "reward" else f"reward_{name}"): sum(s[name] for s in scores) / len(scores)
            for name in scores[0]}


def _seed(seed: int, step: int, row: int, sample: int) -> int:
    """The sampler seed of one answer: fixed by the run's seed and the answer's place in the run
    (step, prompt row of the global batch, sample of the group), so one process and several
    processes sharing the batch sample the same answers."""
    value = seed
    for part in (step + 1, row, sample):
        value = (value * SEED_STRIDE + part) % (2 ** 63 - 1)
    return value
