"""Hugging Face Spaces entry point: serve MiniMind Studio on 0.0.0.0:7860."""

import os

from webapp.app import serve

if __name__ == "__main__":
    serve(os.environ.get("GRADIO_SERVER_NAME", "0.0.0.0"), int(os.environ.get("GRADIO_SERVER_PORT", "7860")),
          os.environ.get("MINIMIND_HOME", "workspace"))
