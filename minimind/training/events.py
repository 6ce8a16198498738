"""Moments of a run that each face words its own way.

The trainer's log speaks to someone at a terminal ("resume with --resume"); the web page has a
Resume button instead. So rather than one face rewriting the other's sentences, a run records
such a moment as an event, a kind and its fields, and each face renders it: `cli_text` gives the
terminal's words (what train.log and status.json's `error` hold, as before events), the page
its own (webapp/i18n.py, keys `ev_<kind>`). run_dir.py keeps events beside the text they stand
for; a run written before events has only the text, and every face shows it as written.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

# kind -> the terminal's words, with the event's fields as {placeholders}
CLI_WORDS = {
    "stopped": "stopped at step {step} (checkpoint saved); resume with --resume",
    "ended": "the training process ended unexpectedly (see train.log)",  # no word from it: killed, out of memory
}
KEPT_WORDS = "; its last checkpoint ({checkpoint}) is kept and it can be resumed"  # "ended", when one is kept


@dataclass(frozen=True)
class RunEvent:
    kind: str                       # one of CLI_WORDS
    step: int | None = None         # stopped: the step its checkpoint holds
    checkpoint: str | None = None   # ended: the newest checkpoint kept (step-N), if any

    def __post_init__(self):
        if self.kind not in CLI_WORDS:
            raise ValueError(f"unknown run event {self.kind!r} (known: {', '.join(CLI_WORDS)})")

    def cli_text(self) -> str:
        """The event in the terminal's words."""
        text = CLI_WORDS[self.kind].format(step=self.step)
        return text + (KEPT_WORDS.format(checkpoint=self.checkpoint) if self.checkpoint else "")

    def to_dict(self) -> dict:
        """The event as stored: its kind and the fields it has."""
        return {k: v for k, v in asdict(self).items() if v is not None}

    @classmethod
    def from_dict(cls, raw) -> RunEvent | None:
        """An event as stored, or None for anything else (a newer kind, a damaged record): the
        reader then shows the text the event stands for."""
        if not isinstance(raw, dict):
            return None
        try:
            return cls(**raw)
        except (TypeError, ValueError):
            return None

    def as_error(self) -> dict:
        """status.json fields for a run that ends with this event: `error` in the terminal's words
        (what the CLI and older readers show) and `error_event`, this event."""
        return {"error": self.cli_text(), "error_event": self.to_dict()}
