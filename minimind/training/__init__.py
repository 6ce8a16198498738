"""Training: one loop for pretrain / full fine-tune / LoRA / QLoRA, with run folders,
exact resume and torchrun scale-out."""

from .config import TrainConfig
from .loop import train
from .run_dir import RunDir

__all__ = ["TrainConfig", "train", "RunDir"]
