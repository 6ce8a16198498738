"""`python -m webapp [--host H] [--port P] [--workspace DIR]`: serve MiniMind Studio."""

import argparse
import os

from minimind.hardware import on_zero_gpu

from .workspace import default_home, use_private_gradio_temp


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m webapp", description=__doc__)
    parser.add_argument("--host", default=os.environ.get("GRADIO_SERVER_NAME", "0.0.0.0"))
    parser.add_argument("--port", type=int, default=int(os.environ.get("GRADIO_SERVER_PORT", "7860")))
    parser.add_argument("--workspace", default=str(default_home()),
                        help="folder for uploads, corpora, runs and exports (MINIMIND_HOME; on a Space with "
                             "persistent storage, /data/minimind)")
    args = parser.parse_args()
    if on_zero_gpu():
        import spaces  # noqa: F401  (ZeroGPU: before anything can touch CUDA, as the spaces package requires)
    use_private_gradio_temp(args.workspace)  # before gradio is imported: it reads the setting then
    from .app import serve

    serve(args.host, args.port, args.workspace)


if __name__ == "__main__":  # a child process of webapp.bounded imports this module again: no server there
    main()
