"""The page's text in both languages: every key has an English and a Chinese text, messages
fill in the same values in both, and a request's Accept-Language picks the language."""

import pytest

from webapp.i18n import EN, ZH, language, placeholders, tr


def test_every_key_has_both_languages():
    assert set(EN) == set(ZH), sorted(set(EN) ^ set(ZH))
    empty = [k for k in EN if not str(EN[k]).strip() or not str(ZH[k]).strip()]
    assert not empty


@pytest.mark.parametrize("key", sorted(EN))
def test_messages_fill_in_the_same_values(key):
    assert placeholders(EN[key]) == placeholders(ZH[key])


def test_chinese_text_is_chinese():
    """A Chinese text that is the English one unchanged is a missed translation (a few are
    names or symbols on purpose)."""
    same = {k for k in EN if EN[k] == ZH[k]}
    assert same <= {"mode_lora", "mode_qlora", "lora_alpha", "dpo_beta", "grpo_beta", "top_p", "top_k"}, same


@pytest.mark.parametrize("header, lang", [("zh-CN,zh;q=0.9,en;q=0.8", "zh"), ("zh", "zh"), ("zh-TW", "zh"),
                                          ("en-US,en;q=0.9", "en"), ("", "en"), ("fr-FR,zh;q=0.5", "en")])
def test_accept_language_picks_the_language(header, lang):
    assert language(header) == lang


def test_without_a_request_messages_are_english():
    assert language() == "en"
    assert tr("device_line", device="cpu (fp32)") == "**Device:** cpu (fp32)"
    assert tr("device_line", lang="zh", device="cpu (fp32)") == "**设备：** cpu (fp32)"
    assert tr("m_stopped_at", lang="zh", run_id="r1", step=3) == "**r1**：停在第 3 步——按“继续”接着训练。"
