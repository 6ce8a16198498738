"""Publish an existing export folder to the Hugging Face Hub as a model repo.

  python -m minimind publish exports/hf your-name/minimind-tang
  python -m minimind publish exports/gguf-q8_0 your-name/minimind-tang-gguf --public

FOLDER is one format's folder as `python -m minimind export` writes it (a README.md card beside
config.json or a .gguf file). The repo is made when missing, private unless --public; an existing
public repo is refused unless --public. The token: HF_TOKEN, else the one `hf auth login` saved,
else asked for at the terminal; it is used for the upload only, never stored or printed.
(`python -m minimind export ... --push-to-hub REPO` exports and publishes in one go.)
"""

from __future__ import annotations

import argparse

HELP = "publish an export folder to the Hugging Face Hub (a private model repo unless --public)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("folder", help="one format's export folder (holds README.md and config.json or a .gguf)")
    p.add_argument("repo", help="Hub model repo to publish to (owner/name)")
    p.add_argument("--public", action="store_true", help="a new repo is public (default private)")


def run(args) -> int:
    from ..hub.publish import check_export, check_repo_id
    from .export import push, terminal_token

    check_repo_id(args.repo)
    check_export(args.folder)  # both before the token is asked for
    push(args.folder, args.repo, terminal_token(), args.public)
    return 0
