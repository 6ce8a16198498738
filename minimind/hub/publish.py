"""Publish an export folder to the Hugging Face Hub as a model repo, private unless asked otherwise.

What can be checked here is checked before any network: the repo id (huggingface_hub's own
validator), that the folder is an export (a README.md card beside config.json or a .gguf file),
and that there is a token. The token is the caller's (the page's field, the CLI's prompt), else
huggingface_hub's own (HF_TOKEN, else the one `hf auth login` saved); it goes to HfApi for this
request only: never logged, written to a file or put in a message. Every failure (offline, no
network, a refused token, a public repo of that name) is a `HubError` that says what to do.
"""

from __future__ import annotations

import os
from pathlib import Path

import httpx2
from huggingface_hub import HfApi, get_token
from huggingface_hub.errors import (
    HFValidationError,
    HfHubHTTPError,
    OfflineModeIsEnabled,
    RepositoryNotFoundError,
)
from huggingface_hub.utils import validate_repo_id

from ..errors import HubError

COMMIT_MESSAGE = "Upload a MiniMind Studio export"
EXAMPLE_REPO = "your-name/minimind-tang"
TOKENS_PAGE = "huggingface.co/settings/tokens"
NO_TOKEN = ("publishing needs a Hugging Face token with write access (from " + TOKENS_PAGE + "): set HF_TOKEN "
            "in the environment, or type it in the page's token field or at the terminal's prompt")
VISITOR_TOKEN = ("this public page never publishes with its server's token: type your own Hugging Face token "
                 "(write access, from " + TOKENS_PAGE + "); it is used for this upload only")


def check_repo_id(repo_id) -> str:
    """`repo_id` stripped, as huggingface_hub's validator accepts it; HubError before any network."""
    repo_id = repo_id.strip() if isinstance(repo_id, str) else ""
    if not repo_id:
        raise HubError(f"type the Hub repo to publish to (owner/name, e.g. {EXAMPLE_REPO})")
    try:
        validate_repo_id(repo_id)
    except HFValidationError:
        shown = repr(repo_id) if len(repo_id) <= 100 else repr(repo_id[:100]) + "…"  # (a visitor's text, cut)
        raise HubError(f"{shown} is not a Hugging Face repo id: use owner/name (letters, digits, '-', '_' or "
                       f"'.', at most 96 characters, no '--' or '..'), e.g. {EXAMPLE_REPO}") from None
    return repo_id


def is_export(folder: Path) -> bool:
    """Whether `folder` holds an export as minimind.export writes one: its card and its model."""
    folder = Path(folder)
    return (folder / "README.md").is_file() and (
        (folder / "config.json").is_file() or any(p.is_file() for p in folder.glob("*.gguf")))


def check_export(folder, label: str | None = None) -> Path:
    """`folder` when it is an export (see is_export); HubError naming it by `label` otherwise."""
    folder, label = Path(folder), label or str(folder)
    if not folder.is_dir():
        raise HubError(f"{label}: no such export folder")
    if not is_export(folder):
        raise HubError(f"{label}: not an export folder (it needs a README.md card and config.json or a .gguf "
                       "file): export a model first and publish the folder of one format")
    return folder


def resolve_token(token: str | None = None, *, server_token: bool = True) -> str:
    """The token to publish with: `token`, else (when `server_token`) huggingface_hub's own
    resolution. `server_token=False` is a public page's: its visitors never use the server's."""
    token = (token or "").strip() or None
    if token is None and server_token:
        token = get_token()
    if token is None:
        raise HubError(NO_TOKEN if server_token else VISITOR_TOKEN)
    return token


def publish(folder, repo_id: str, token: str | None = None, private: bool = True, *, server_token: bool = True,
            label: str | None = None) -> str:
    """Upload the export `folder` to the model repo `repo_id` (made when missing, private unless
    `private=False`) and return the repo's URL. `label` names the folder in messages (default: its
    path as given); `server_token` as in resolve_token."""
    repo_id = check_repo_id(repo_id)
    folder = check_export(folder, label)
    token = resolve_token(token, server_token=server_token)
    api = HfApi(token=token)
    try:
        url = api.create_repo(repo_id, repo_type="model", private=private, exist_ok=True)
        if private and not api.repo_info(repo_id, repo_type="model").private:  # create_repo keeps what exists
            raise public_repo(repo_id)
        api.upload_folder(folder_path=folder, repo_id=repo_id, repo_type="model", ignore_patterns=[".*"],
                          commit_message=f"{COMMIT_MESSAGE} ({folder.name})")
    except HubError:
        raise
    except Exception as err:  # noqa: BLE001 -- the network boundary: every failure becomes a sentence
        raise explain(err, repo_id, token) from None  # (no chain: the request it holds carries the token)
    return str(url)


def public_repo(repo_id: str) -> HubError:
    """A private upload asked for, to a repo that exists and is public: refused, not made public."""
    return HubError(f"{repo_id} already exists and is public: publishing there would make this export public; "
                    "pick another name, make that repo private on the Hub, or publish it as public")


def explain(err: Exception, repo_id: str, token: str | None = None) -> HubError:
    """The HubError a failed publish becomes; no text of it can hold `token`."""
    if isinstance(err, OfflineModeIsEnabled):
        return HubError(f"{repo_id}: cannot publish: offline mode is on (HF_HUB_OFFLINE=1), so the Hugging Face "
                        "Hub is not contacted; unset HF_HUB_OFFLINE on a machine with a network and publish again")
    if isinstance(err, HfHubHTTPError):
        return _refused(err, repo_id, token)
    if isinstance(err, (ConnectionError, TimeoutError, httpx2.TransportError)):
        return HubError(f"{repo_id}: cannot publish: the connection to the Hugging Face Hub failed "
                        f"({type(err).__name__}); check this machine's network (and HF_ENDPOINT if set), then "
                        "publish again")
    return HubError(f"{repo_id}: publishing failed ({type(err).__name__}: {_first_line(err, token)})")


def _refused(err: HfHubHTTPError, repo_id: str, token: str | None) -> HubError:
    """What an answer of the Hub that is not a success means for the person publishing."""
    status = getattr(err.response, "status_code", None)
    owner = repo_id.partition("/")[0] if "/" in repo_id else "that account"
    if status == 401:
        return HubError(f"{repo_id}: the Hub refused the token (401: invalid or expired); create a write token at "
                        f"{TOKENS_PAGE} and publish again")
    if status == 403:
        return HubError(f"{repo_id}: the token may not write there (403); use a token with write access to "
                        f"{owner}, or publish under your own name")
    if status == 409:
        return HubError(f"{repo_id}: the Hub reported a conflict (409): another upload to that repo is under way, "
                        "or the name is taken by a dataset or Space; wait and publish again, or pick another name")
    if isinstance(err, RepositoryNotFoundError):
        return HubError(f"{repo_id}: the Hub shows this token no such repo (404); check the owner's name and "
                        "that the token may write to it")
    said = _scrubbed(err.server_message or "", token).splitlines()
    return HubError(f"{repo_id}: the Hub refused the upload ({status}{': ' + said[0] if said else ''})")


def _first_line(err: Exception, token: str | None) -> str:
    lines = _scrubbed(str(err), token).splitlines()
    return lines[0] if lines else ""


def _scrubbed(text: str, token: str | None) -> str:
    """`text` with the token (and HF_TOKEN's value) cut out, whatever a library put in it."""
    for secret in {token, os.environ.get("HF_TOKEN")} - {None, ""}:
        text = text.replace(secret, "***")
    return text
