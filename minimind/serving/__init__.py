"""OpenAI-compatible serving: `create_app(registry)` and the `ModelRegistry` it serves.

The library never imports the web app; the web app mounts this app (see create_app).
"""

from .app import create_app
from .pool import GenerationPool, QueueFull
from .protocol import ApiError
from .registry import ModelRegistry, ServedModel

__all__ = ["create_app", "ModelRegistry", "ServedModel", "GenerationPool", "QueueFull", "ApiError"]
