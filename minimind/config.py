"""MiniMindConfig: the one description of a model's shape, saved as config.json.

A dense MiniMind model is Llama-shaped (same parameter names and math as
`transformers.LlamaForCausalLM`), so most fields carry Llama's names. The
extras are the attention kernel, rotary scaling and the optional MoE block, and
the options that models imported from the Hub need (minimind.hub): biases on the
attention projections (Qwen2), RMSNorm on each head's queries and keys (Qwen3), a
sliding attention window (Mistral) and Llama-3's rotary scaling.
"""

from __future__ import annotations

from transformers import PretrainedConfig

ATTENTION_IMPLS = ("sdpa", "eager", "blocked")
ROPE_SCALING_TYPES = (None, "linear", "ntk", "llama3")
# how a token's position reaches the model: rotary q/k (the default, Llama's), a per-head
# linear distance penalty on attention scores (ALiBi), a fixed sinusoid or a learned vector
# added to the embeddings, or nothing at all (causal masking alone carries order: NoPE)
POSITION_ENCODINGS = ("rope", "alibi", "sinusoidal", "learned", "none")
# what a sequence classifier's head reads: the last real token's hidden state (Llama's
# ForSequenceClassification) or the mean over the real tokens
CLASSIFIER_POOLINGS = ("last", "mean")


class MiniMindConfig(PretrainedConfig):
    """Shape and numerics of a MiniMind decoder. Use `from_preset` for named sizes."""

    model_type = "minimind"
    keys_to_ignore_at_inference = ["cache"]

    vocab_size: int = 6400                 # tokenizer size (ids 0..vocab_size-1)
    hidden_size: int = 512                 # model width d
    intermediate_size: int = 1408          # SwiGLU hidden width (per expert with MoE)
    num_hidden_layers: int = 8             # decoder blocks
    num_attention_heads: int = 8           # query heads
    num_key_value_heads: int = 2           # key/value heads (GQA when < query heads)
    head_dim: int | None = None            # defaults to hidden_size // num_attention_heads
    max_position_embeddings: int = 2048    # longest context the model is meant for (the learned table's size)
    position_encoding: str = "rope"        # one of POSITION_ENCODINGS
    rms_norm_eps: float = 1e-5             # RMSNorm epsilon
    rope_theta: float = 10000.0            # rotary base frequency
    rope_scaling_type: str | None = None   # None, "linear" (position interpolation), "ntk" (scaled base) or
                                           # "llama3" (low frequencies slowed by the factor, high kept, a blend between)
    rope_scaling_factor: float = 1.0       # context extension factor for rope_scaling_type
    rope_low_freq_factor: float = 1.0      # llama3: wavelengths past original/low are divided by the factor
    rope_high_freq_factor: float = 4.0     # llama3: wavelengths under original/high are kept
    rope_original_max_position: int | None = None  # llama3: the context the model was pretrained at
    attention_bias: bool = False           # biases on the q, k and v projections (Qwen2, Llama's attention_bias)
    attention_out_bias: bool = False       # a bias on the output projection (Llama's and Qwen3's attention_bias)
    qk_norm: bool = False                  # RMSNorm over each head's queries and keys before rotary (Qwen3)
    sliding_window: int | None = None      # a query sees at most this many keys, itself included (Mistral)
    family: str | None = None              # the Hub family an imported model came from ("llama", "mistral",
                                           # "qwen2", "qwen3"; minimind.hub): exports write that layout back
    tie_word_embeddings: bool = True       # lm_head shares the embedding matrix
    initializer_range: float = 0.02        # std of the normal init
    dropout: float = 0.0                   # residual dropout (training only)
    attention_impl: str = "sdpa"           # "sdpa" (fused), "eager" (reference) or "blocked" (tiled online softmax)
    attention_block_size: int = 128        # tile size of the "blocked" kernel
    use_moe: bool = False                  # SwiGLU experts with top-k routing instead of one MLP
    num_experts: int = 4                   # experts per MoE layer
    num_experts_per_tok: int = 2           # experts each token is routed to
    router_aux_loss_coef: float = 0.01     # weight of the load-balancing loss added to the LM loss
    classifier_pooling: str = "last"       # a classifier's head reads this (CLASSIFIER_POOLINGS)
    pad_token_id: int | None = 0
    bos_token_id: int | None = 1
    eos_token_id: int | list[int] | None = 2
    use_cache: bool = True

    def __post_init__(self, **kwargs):
        if self.head_dim is None:
            self.head_dim = self.hidden_size // self.num_attention_heads
        super().__post_init__(**kwargs)
        self._check()

    def _check(self) -> None:
        def need(ok: bool, msg: str) -> None:
            if not ok:
                raise ValueError(f"MiniMindConfig: {msg}")

        need(self.attention_impl in ATTENTION_IMPLS,
             f"attention_impl must be one of {ATTENTION_IMPLS}, got {self.attention_impl!r}")
        need(self.rope_scaling_type in ROPE_SCALING_TYPES,
             f"rope_scaling_type must be one of {ROPE_SCALING_TYPES}, got {self.rope_scaling_type!r}")
        need(self.rope_scaling_factor >= 1.0, "rope_scaling_factor must be >= 1")
        need(self.num_attention_heads % self.num_key_value_heads == 0,
             "num_attention_heads must be a multiple of num_key_value_heads")
        need(self.position_encoding in POSITION_ENCODINGS,
             f"position_encoding must be one of {POSITION_ENCODINGS}, got {self.position_encoding!r}")
        need(self.position_encoding != "rope" or self.head_dim % 2 == 0, "head_dim must be even for rotary embeddings")
        need(self.position_encoding != "sinusoidal" or self.hidden_size % 2 == 0,
             "hidden_size must be even for sinusoidal positions")
        need(self.rope_scaling_type is None or self.position_encoding == "rope",
             "rope_scaling_type only applies to position_encoding 'rope'")
        need(self.classifier_pooling in CLASSIFIER_POOLINGS,
             f"classifier_pooling must be one of {CLASSIFIER_POOLINGS}, got {self.classifier_pooling!r}")
        need(self.attention_block_size >= 1, "attention_block_size must be positive")
        need(self.rope_scaling_type != "llama3" or (self.rope_original_max_position or 0) > 0,
             "llama3 rotary scaling needs rope_original_max_position")
        need(self.rope_scaling_type != "llama3" or self.rope_high_freq_factor > self.rope_low_freq_factor,
             "llama3 rotary scaling needs rope_high_freq_factor > rope_low_freq_factor")
        need(self.sliding_window is None or self.sliding_window >= 1, "sliding_window must be positive")
        if self.use_moe:
            need(1 <= self.num_experts_per_tok <= self.num_experts,
                 "num_experts_per_tok must be between 1 and num_experts")

    @property
    def is_dense(self) -> bool:
        return not self.use_moe

    def hf_fields(self) -> dict:
        """The config.json fields every Llama-family model shares, for these same weights (dense, rotary only)."""
        if self.use_moe:
            raise ValueError("a mixture-of-experts MiniMind has no Llama equivalent (dense models only)")
        if self.position_encoding != "rope":
            raise ValueError(f"a MiniMind with {self.position_encoding!r} positions has no Llama equivalent "
                             "(Llama is rotary only)")
        return {
            "vocab_size": self.vocab_size, "hidden_size": self.hidden_size,
            "intermediate_size": self.intermediate_size, "num_hidden_layers": self.num_hidden_layers,
            "num_attention_heads": self.num_attention_heads, "num_key_value_heads": self.num_key_value_heads,
            "head_dim": self.head_dim, "hidden_act": "silu",
            "max_position_embeddings": self.max_position_embeddings, "rms_norm_eps": self.rms_norm_eps,
            "rope_parameters": self.rope_dict(), "tie_word_embeddings": self.tie_word_embeddings,
            "initializer_range": self.initializer_range,
            "bos_token_id": self.bos_token_id, "eos_token_id": self.eos_token_id,
            "pad_token_id": self.pad_token_id, "dtype": str(self.dtype).replace("torch.", "") if self.dtype else "float32",
        }

    def to_llama_dict(self) -> dict:
        """config.json for a stock `LlamaForCausalLM` holding these same weights (dense, rotary only)."""
        if self.qk_norm or self.sliding_window or self.attention_bias != self.attention_out_bias:
            raise ValueError("this model has query/key norms, a sliding window or biases on q/k/v only, which "
                             "Llama lacks: it exports in its own family's layout (minimind.hub)")
        return {"architectures": ["LlamaForCausalLM"], "model_type": "llama", **self.hf_fields(),
                "attention_bias": self.attention_bias, "mlp_bias": False}

    def rope_dict(self) -> dict:
        """transformers' `rope_parameters` for the same rotary frequencies ("ntk" is a larger base)."""
        rope = {"rope_type": "default", "rope_theta": self.rope_theta}
        if self.rope_scaling_type == "ntk":
            d = self.head_dim
            rope["rope_theta"] = self.rope_theta * self.rope_scaling_factor ** (d / (d - 2))
        elif self.rope_scaling_type == "linear":
            rope = {"rope_type": "linear", "rope_theta": self.rope_theta, "factor": self.rope_scaling_factor}
        elif self.rope_scaling_type == "llama3":
            rope = {"rope_type": "llama3", "rope_theta": self.rope_theta, "factor": self.rope_scaling_factor,
                    "low_freq_factor": self.rope_low_freq_factor, "high_freq_factor": self.rope_high_freq_factor,
                    "original_max_position_embeddings": self.rope_original_max_position}
        return rope

    @classmethod
    def from_preset(cls, name: str, **overrides) -> "MiniMindConfig":
        """A named size (see PRESETS), with any field overridden."""
        if name not in PRESETS:
            raise ValueError(f"unknown preset {name!r}; choose one of {', '.join(PRESETS)}")
        return cls(**{**PRESETS[name], **overrides})


PRESETS: dict[str, dict] = {
    # pico: 1.6M parameters (tied, vocab 6400): d=128, 4 layers, 4 query / 2 kv heads of 32,
    # FFN 352. What a few CPU-minutes train best (training/sizing.py chooses it for them).
    "pico": dict(hidden_size=128, intermediate_size=352, num_hidden_layers=4,
                 num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=1024),
    # micro: 2.8M parameters (tied, vocab 6400): d=192, 4 layers, 3 query / 1 kv heads, FFN 512.
    "micro": dict(hidden_size=192, intermediate_size=512, num_hidden_layers=4,
                  num_attention_heads=3, num_key_value_heads=1, max_position_embeddings=1024),
    # nano: 4.6M parameters (tied embeddings, vocab 6400): d=256, 4 layers, 4 query / 2 kv heads,
    # FFN 704. CPU demos and tests.
    "nano": dict(hidden_size=256, intermediate_size=704, num_hidden_layers=4,
                 num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=1024),
    # mini: 11.9M parameters (tied, vocab 6400): d=384, 6 layers, 6 query / 2 kv heads, FFN 1024.
    # Fits in 24 MB as bf16: the size of the shipped models.
    "mini": dict(hidden_size=384, intermediate_size=1024, num_hidden_layers=6,
                 num_attention_heads=6, num_key_value_heads=2, max_position_embeddings=1024),
    # small: 25.8M parameters (tied, vocab 6400): d=512, 8 layers, 8 query / 2 kv heads, FFN 1408.
    "small": dict(hidden_size=512, intermediate_size=1408, num_hidden_layers=8,
                  num_attention_heads=8, num_key_value_heads=2, max_position_embeddings=2048),
    # base: 80.4M parameters (tied, vocab 6400): d=768, 12 layers, 12 query / 4 kv heads, FFN 2048.
    "base": dict(hidden_size=768, intermediate_size=2048, num_hidden_layers=12,
                 num_attention_heads=12, num_key_value_heads=4, max_position_embeddings=4096),
    # small-moe: 77.8M parameters in all, 43.1M active per token: the small shape with
    # 4 SwiGLU experts per layer, top-2 routing and a load-balancing loss.
    "small-moe": dict(hidden_size=512, intermediate_size=1408, num_hidden_layers=8,
                      num_attention_heads=8, num_key_value_heads=2, max_position_embeddings=2048,
                      use_moe=True, num_experts=4, num_experts_per_tok=2),
}
