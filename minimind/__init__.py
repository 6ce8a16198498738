"""MiniMind: a small Llama-shaped language model you can train, chat with and export.

Importing the package registers `MiniMindConfig` / `MiniMindForCausalLM` /
`MiniMindForSequenceClassification` (AutoModelForSequenceClassification) (and the LSTM
family, `MiniMindLSTMConfig` / `MiniMindLSTMForCausalLM`) with the
transformers Auto classes, so `AutoModelForCausalLM.from_pretrained(dir)` works
in any process that has run `import minimind`.
"""

import logging

# transformers imports torchao (our int8 export) whenever it is installed; on a CPU-only
# machine torchao logs that its CUDA kernels failed to load, and torch logs a pytree
# deprecation for two of its enums. Neither is actionable for a user: keep them quiet.
logging.getLogger("torchao").setLevel(logging.ERROR)
logging.getLogger("torch.utils._pytree").setLevel(logging.ERROR)

from transformers import AutoConfig, AutoModelForCausalLM, AutoModelForSequenceClassification  # noqa: E402

from .config import PRESETS, MiniMindConfig  # noqa: E402
from .model import MiniMindForCausalLM, MiniMindModel  # noqa: E402
from .lstm import LSTM_PRESETS, MiniMindLSTMConfig, MiniMindLSTMForCausalLM  # noqa: E402
from .classifier import MiniMindForSequenceClassification  # noqa: E402

AutoConfig.register(MiniMindConfig.model_type, MiniMindConfig, exist_ok=True)
AutoModelForCausalLM.register(MiniMindConfig, MiniMindForCausalLM, exist_ok=True)
AutoModelForSequenceClassification.register(MiniMindConfig, MiniMindForSequenceClassification, exist_ok=True)
AutoConfig.register(MiniMindLSTMConfig.model_type, MiniMindLSTMConfig, exist_ok=True)
AutoModelForCausalLM.register(MiniMindLSTMConfig, MiniMindLSTMForCausalLM, exist_ok=True)

__all__ = ["MiniMindConfig", "MiniMindForCausalLM", "MiniMindForSequenceClassification", "MiniMindModel", "PRESETS",
           "MiniMindLSTMConfig", "MiniMindLSTMForCausalLM", "LSTM_PRESETS"]
__version__ = "0.1.0"
