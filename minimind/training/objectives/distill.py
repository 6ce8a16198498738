"""Knowledge distillation (Hinton et al., 2015): a student learns the teacher's whole
next-token distribution, softened by a temperature, besides the data's own next token.

loss = ce_weight * CE(student, data) + kl_weight * T^2 * KL(teacher_T || student_T)

over the labelled tokens (all of plain text, the assistant's in chat). The teacher's
logits are computed in inference mode under the run's precision, and kept per row up to
`distill.cache_mb` (TeacherCache): a small corpus is read by the teacher once, and every
later epoch costs the student's step alone. Teacher and student must share one
tokenizer: a token id has to mean the same piece of text to both.
"""

from __future__ import annotations

import torch

from ...checkpoint import load_model, load_tokenizer_for
from ...errors import ConfigError
from ...evaluate import token_logprobs
from .language_model import nll_figures


def distill_loss(student_logits: torch.Tensor, teacher_logits: torch.Tensor, labels: torch.Tensor,
                 temperature: float, kl_weight: float, ce_weight: float):
    """(loss, ce, kl) of one batch; logits [B, T, V], labels [B, T] with -100 where nothing is learnt.
    KL is per labelled token, scaled by T^2 so its gradients keep their size as T changes."""
    logps, mask = token_logprobs(student_logits, labels)
    tokens = mask.sum().clamp(min=1)
    ce = -logps.sum() / tokens
    student = (student_logits[:, :-1].float() / temperature).log_softmax(-1)
    teacher = (teacher_logits[:, :-1].float() / temperature).log_softmax(-1)
    kl = ((teacher.exp() * (teacher - student)).sum(-1) * mask).sum() / tokens * temperature ** 2
    return ce_weight * ce + kl_weight * kl, ce, kl


def same_vocabulary(a, b) -> bool:
    return len(a) == len(b) and a.get_vocab() == b.get_vocab()


class TeacherCache:
    """The teacher's logits of each row seen so far, keyed by the row's tokens (without padding),
    until `limit_bytes` are held; later rows are computed every time. Stored in the dtype the
    teacher produced them in, so a cached row is exactly what a new forward pass would give."""

    def __init__(self, limit_bytes: int):
        self.limit, self.used, self.rows = limit_bytes, 0, {}
        self.hits = self.misses = 0

    def logits(self, compute, batch: dict) -> torch.Tensor:
        ids, mask = batch["input_ids"], batch.get("attention_mask")
        lengths = mask.sum(1).tolist() if mask is not None else [ids.shape[1]] * ids.shape[0]
        keys = [ids[i, :n].cpu().numpy().tobytes() for i, n in enumerate(lengths)]
        missing = [i for i, key in enumerate(keys) if key not in self.rows]
        self.hits += len(keys) - len(missing)
        self.misses += len(missing)
        if len(missing) == len(keys):
            fresh = compute(batch)
            self._keep(keys, lengths, range(len(keys)), fresh)
            return fresh
        fresh = compute({k: v[missing] for k, v in batch.items()}) if missing else None
        if fresh is not None:
            self._keep(keys, lengths, missing, fresh)
        sample = fresh if fresh is not None else self.rows[keys[0]]
        out = torch.zeros(*ids.shape, sample.shape[-1], dtype=sample.dtype, device=ids.device)
        fresh_row = {i: j for j, i in enumerate(missing)}
        for i, (key, n) in enumerate(zip(keys, lengths)):
            out[i, :n] = fresh[fresh_row[i], :n] if i in fresh_row else self.rows[key]
        return out

    def _keep(self, keys, lengths, rows, logits: torch.Tensor) -> None:
        for j, i in enumerate(rows):
            row = logits[j, :lengths[i]]
            size = row.numel() * row.element_size()
            if self.used + size > self.limit:
                return
            self.rows[keys[i]] = row.clone()
            self.used += size


class Distill:
    name = "distill"

    def __init__(self, teacher, temperature: float, kl_weight: float, ce_weight: float, precision,
                 bpc_factor: float | None, cache_mb: float = 0.0):
        self.teacher = teacher
        self.cache = TeacherCache(int(cache_mb * 2**20)) if cache_mb > 0 else None
        self.temperature, self.kl_weight, self.ce_weight = temperature, kl_weight, ce_weight
        self.precision, self.bpc_factor = precision, bpc_factor

    @classmethod
    def from_teacher(cls, cfg, tokenizer, device: str, precision, bpc_factor, log):
        teacher_tokenizer = load_tokenizer_for(cfg.distill.teacher)
        if not same_vocabulary(teacher_tokenizer, tokenizer):
            differ = (f"{len(teacher_tokenizer)} vs {len(tokenizer)} tokens" if len(teacher_tokenizer) != len(tokenizer)
                      else f"both have {len(tokenizer)} tokens, but not the same pieces")
            raise ConfigError(f"the teacher ({cfg.distill.teacher}) and the student do not share a tokenizer "
                              f"({differ}): distil into "
                              "a student built with the teacher's tokenizer (leave model.tokenizer empty for a "
                              "new student: it takes the teacher's)")
        teacher = load_model(cfg.distill.teacher, device=device).eval().requires_grad_(False)
        if precision.dtype != torch.float32:
            teacher = teacher.to(precision.dtype)  # it only reads: weights in the run's precision, cast once
        log(f"teacher: {sum(p.numel() for p in teacher.parameters()):,} parameters from {cfg.distill.teacher}")
        d = cfg.distill
        return cls(teacher, d.temperature, d.kl_weight, d.ce_weight, precision, bpc_factor, d.cache_mb)

    def _forward_teacher(self, batch: dict) -> torch.Tensor:
        with torch.inference_mode():
            logits = self.teacher(input_ids=batch["input_ids"], attention_mask=batch.get("attention_mask")).logits
        return logits.clone()  # an inference tensor cannot take part in autograd

    def _teacher_logits(self, batch: dict) -> torch.Tensor:
        if self.cache is None:
            return self._forward_teacher(batch)
        return self.cache.logits(self._forward_teacher, batch)

    def loss(self, model, batch: dict) -> tuple[torch.Tensor, dict]:
        logits = model(input_ids=batch["input_ids"], attention_mask=batch.get("attention_mask")).logits
        loss, ce, kl = distill_loss(logits, self._teacher_logits(batch), batch["labels"], self.temperature,
                                    self.kl_weight, self.ce_weight)
        return loss, {"ce": ce.detach(), "kl": kl.detach()}

    @torch.no_grad()
    def evaluate(self, model, batches) -> dict:
        """The student's held-out next-token loss (and BPC: comparable with a model trained
        without a teacher), and its KL to the teacher."""
        device = next(model.parameters()).device
        was_training = model.training
        model.eval()
        nll = kl = 0.0
        tokens = 0
        try:
            for batch in batches:
                batch = {k: v.to(device) for k, v in batch.items()}
                with self.precision.autocast():
                    logits = model(input_ids=batch["input_ids"], attention_mask=batch.get("attention_mask")).logits
                    teacher = self._teacher_logits(batch)
                _, ce, batch_kl = distill_loss(logits, teacher, batch["labels"], self.temperature, 1.0, 1.0)
                count = int((batch["labels"][:, 1:] != -100).sum())
                nll += ce.item() * count
                kl += batch_kl.item() * count
                tokens += count
        finally:
            model.train(was_training)
        return {**nll_figures(nll / max(tokens, 1), self.bpc_factor), "kl": kl / max(tokens, 1)}
