"""`python -m webapp [--host H] [--port P] [--workspace DIR]`: serve MiniMind Studio."""

import argparse
import os

from .app import serve


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m webapp", description=__doc__)
    parser.add_argument("--host", default=os.environ.get("GRADIO_SERVER_NAME", "0.0.0.0"))
    parser.add_argument("--port", type=int, default=int(os.environ.get("GRADIO_SERVER_PORT", "7860")))
    parser.add_argument("--workspace", default=os.environ.get("MINIMIND_HOME", "workspace"),
                        help="folder for uploads, corpora, runs and exports (MINIMIND_HOME)")
    args = parser.parse_args()
    serve(args.host, args.port, args.workspace)


main()
