"""Hugging Face Spaces entry point: serve MiniMind Studio on 0.0.0.0:7860."""

import os

from minimind.hardware import on_zero_gpu
from webapp.workspace import default_home, use_private_gradio_temp

if __name__ == "__main__":
    if on_zero_gpu():
        import spaces  # noqa: F401  (ZeroGPU: before anything can touch CUDA, as the spaces package requires)
    workspace = str(default_home())  # MINIMIND_HOME, else the Space's persistent storage when it has some
    use_private_gradio_temp(workspace)  # before gradio is imported: it reads the setting then
    from webapp.app import serve

    serve(os.environ.get("GRADIO_SERVER_NAME", "0.0.0.0"), int(os.environ.get("GRADIO_SERVER_PORT", "7860")),
          workspace)
