"""Hugging Face Spaces entry point: serve MiniMind Studio on 0.0.0.0:7860."""

import os

from webapp.workspace import use_private_gradio_temp

if __name__ == "__main__":
    workspace = os.environ.get("MINIMIND_HOME", "workspace")
    use_private_gradio_temp(workspace)  # before gradio is imported: it reads the setting then
    from webapp.app import serve

    serve(os.environ.get("GRADIO_SERVER_NAME", "0.0.0.0"), int(os.environ.get("GRADIO_SERVER_PORT", "7860")),
          workspace)
