"""`python -m webapp [--host H] [--port P] [--workspace DIR]`: serve MiniMind Studio."""

import argparse
import os

from .workspace import use_private_gradio_temp


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m webapp", description=__doc__)
    parser.add_argument("--host", default=os.environ.get("GRADIO_SERVER_NAME", "0.0.0.0"))
    parser.add_argument("--port", type=int, default=int(os.environ.get("GRADIO_SERVER_PORT", "7860")))
    parser.add_argument("--workspace", default=os.environ.get("MINIMIND_HOME", "workspace"),
                        help="folder for uploads, corpora, runs and exports (MINIMIND_HOME)")
    args = parser.parse_args()
    use_private_gradio_temp(args.workspace)  # before gradio is imported: it reads the setting then
    from .app import serve

    serve(args.host, args.port, args.workspace)


if __name__ == "__main__":  # a child process of webapp.bounded imports this module again: no server there
    main()
