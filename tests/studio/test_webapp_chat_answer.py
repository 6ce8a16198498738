"""The chat pane's last word on an answer: one of spaces and newlines alone, which a barely
trained model gives, shows as an ellipsis rather than an invisible bubble."""

from types import SimpleNamespace

import pytest

from webapp.tabs import chat as chat_tab


class _Generation(list):
    dropped_turns = 0


@pytest.mark.parametrize("pieces, shown", [(["  ", "\n", " "], "…"), ([], "…"), (["To", " be"], "To be")])
def test_a_blank_answer_shows_an_ellipsis(monkeypatch, pieces, shown):
    loaded = SimpleNamespace(model=None, tokenizer=None, engine=None)
    ctx = SimpleNamespace(models=SimpleNamespace(load=lambda folder: loaded), model_folder=lambda model_id: model_id)
    monkeypatch.setattr(chat_tab, "chat", lambda *args, **kwargs: _Generation(pieces))
    *_, final = chat_tab._answer(ctx, "run x", [{"role": "user", "content": "To be, or not"}], "", None)
    assert final[-1] == {"role": "assistant", "content": shown}
