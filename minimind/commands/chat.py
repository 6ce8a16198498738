"""Chat with a model in the terminal; answers stream as they are written.

  python -m minimind chat --model checkpoints/minimind-tang
  python -m minimind chat --model base/ --adapter runs/lora1/checkpoints/step-500

In the chat: /reset forgets the conversation, /system TEXT sets the system
message (and resets), /params k=v ... changes sampling (e.g. /params
temperature=0.7 top_k=40; /params alone shows them), /quit or Ctrl-D leaves.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TextIO

from ..errors import CheckpointError, SamplingError

HELP = "chat with a model in the terminal (streaming, with history)"
COMMANDS = "/reset, /system TEXT, /params k=v ..., /quit"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", default="checkpoints/minimind-tang", help="model folder (or a LoRA adapter folder)")
    p.add_argument("--adapter", default=None, help="LoRA adapter folder to apply on top of --model")
    p.add_argument("--system", default="", help="system message for the conversation")
    # sampling: unset options take the model's generation_config.json (else the library's defaults)
    p.add_argument("--temperature", type=float, default=None, help="0 = greedy; higher = more varied")
    p.add_argument("--top-k", type=int, default=None, help="sample among the k most likely tokens (0 = off)")
    p.add_argument("--top-p", type=float, default=None, help="nucleus sampling mass (1 = off)")
    p.add_argument("--repetition-penalty", type=float, default=None, help="> 1 discourages repeats")
    p.add_argument("--max-new-tokens", type=int, default=None, help="longest answer in tokens")
    p.add_argument("--seed", type=int, default=None, help="fix the random draws")


class ChatSession:
    """The conversation state and the slash commands; the loop only reads lines and prints."""

    def __init__(self, model, tokenizer, params, system: str = ""):
        self.model, self.tokenizer, self.params = model, tokenizer, params
        self.system = system
        self.history: list[dict] = []

    def messages(self, user_text: str) -> list[dict]:
        head = [{"role": "system", "content": self.system}] if self.system else []
        return head + self.history + [{"role": "user", "content": user_text}]

    def command(self, line: str) -> str | None:
        """Handle a /command; returns what to print, or None for /quit."""
        name, _, rest = line.strip().partition(" ")
        rest = rest.strip()
        if name in ("/quit", "/exit"):
            return None
        if name == "/reset":
            self.history = []
            return "(conversation cleared)"
        if name == "/system":
            self.system, self.history = rest, []
            return f"(system message {'set' if rest else 'cleared'}; conversation cleared)"
        if name == "/params":
            if rest:
                pairs = {}
                for item in rest.split():
                    key, sep, value = item.partition("=")
                    if not sep:
                        return f"(expected k=v, got {item!r})"
                    pairs[key.replace("-", "_")] = value
                try:
                    self.params = self.params.with_text_values(pairs)
                except SamplingError as err:
                    return f"(not changed: {err})"
            return "(" + " ".join(f"{k}={v}" for k, v in _shown(self.params).items()) + ")"
        return f"(unknown command {name}; commands: {COMMANDS})"

    def answer(self, user_text: str, out: TextIO) -> None:
        """Stream the answer to `out` and keep the exchange in the history."""
        from ..generation import chat

        generation = chat(self.model, self.tokenizer, self.messages(user_text), self.params)
        if generation.dropped_turns:
            self.history = self._drop_turns(generation.dropped_turns)
            out.write(f"({generation.dropped_turns} oldest turn(s) dropped to fit the context)\n")
        for piece in generation:
            out.write(piece)
            out.flush()
        out.write("\n")
        if generation.finish_reason == "length":
            out.write(f"(stopped at max_new_tokens={self.params.max_new_tokens})\n")
        self.history += [{"role": "user", "content": user_text},
                         {"role": "assistant", "content": generation.text}]

    def _drop_turns(self, n: int) -> list[dict]:
        starts = [i for i, m in enumerate(self.history) if m["role"] == "user"]
        return self.history[starts[n]:] if n < len(starts) else []


def _shown(params) -> dict:
    from dataclasses import asdict

    values = asdict(params)
    values["stop"] = "|".join(values["stop"])
    return values


def load(model_dir: str, adapter: str | None):
    from ..checkpoint import load_model, load_tokenizer_for

    if not Path(model_dir).exists():
        raise CheckpointError(f"{model_dir}: no such model folder (pass --model DIR with a trained model, "
                              "e.g. runs/<id>/checkpoints/step-N, or train one with `python -m minimind train`)")
    # merged: a plain model, which the inference engine runs (also when model_dir is an adapter folder)
    return load_model(model_dir, adapter=adapter, merge=True), load_tokenizer_for(model_dir)


def run(args, stdin: TextIO | None = None, stdout: TextIO | None = None) -> int:
    from ..sampling_params import SamplingParams

    stdin, stdout = stdin or sys.stdin, stdout or sys.stdout
    given = dict(temperature=args.temperature, top_k=args.top_k, top_p=args.top_p,
                 repetition_penalty=args.repetition_penalty, max_new_tokens=args.max_new_tokens, seed=args.seed)
    model, tokenizer = load(args.model, args.adapter)
    params = SamplingParams.from_model(args.adapter or args.model,
                                       **{k: v for k, v in given.items() if v is not None})
    session = ChatSession(model, tokenizer, params, args.system)
    stdout.write(f"chatting with {args.model}{' + ' + args.adapter if args.adapter else ''} "
                 f"({COMMANDS}; Ctrl-D quits)\n")
    read = _prompt_reader(stdin, stdout)
    while True:
        line = read()
        if line is None:  # Ctrl-D / end of input
            return 0
        if not line.strip():
            continue
        if line.startswith("/"):
            reply = session.command(line)
            if reply is None:
                return 0
            stdout.write(reply + "\n")
            continue
        try:
            session.answer(line, stdout)
        except SamplingError as err:
            stdout.write(f"(error: {err})\n")


def _prompt_reader(stdin: TextIO, stdout: TextIO):
    """Lines from a terminal (with line editing and a "> " prompt) or from a pipe; None at the end."""
    if stdin is sys.stdin and stdin.isatty():
        try:
            import readline  # noqa: F401  (arrow keys and history for input())
        except ImportError:
            pass

        def read_tty() -> str | None:
            try:
                return input("> ")
            except EOFError:
                stdout.write("\n")
                return None
        return read_tty

    def read_pipe() -> str | None:
        line = stdin.readline()
        return line.rstrip("\n") if line else None
    return read_pipe
