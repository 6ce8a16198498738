"""OpenAI-compatible serving: `create_app(registry)` over the process's one `ModelRegistry`.

The library never imports the web app; the web app mounts this app (see create_app).
"""

from ..registry import LoadedModel, ModelRegistry
from .app import create_app
from .pool import GenerationPool, QueueFull
from .protocol import ApiError

__all__ = ["create_app", "ModelRegistry", "LoadedModel", "GenerationPool", "QueueFull", "ApiError"]
