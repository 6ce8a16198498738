"""The page's text in both languages: every key has an English and a Chinese text, messages
fill in the same values in both, and a request's Accept-Language picks the language."""

import json
from pathlib import Path

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


def test_a_message_made_while_the_page_is_built_is_translated_in_the_browser():
    """A dropdown's first choices are made before any request: tr() then registers the text in
    both languages and answers with Gradio's marker for it, which the browser translates."""
    import gradio as gr

    from webapp.i18n import PAGE_EN, PAGE_ZH

    with gr.Blocks():
        built = tr("model_shipped", name="minimind-tang")
    key = json.loads(built.removeprefix("__i18n__"))["key"]
    assert (PAGE_EN[key], PAGE_ZH[key]) == ("shipped: minimind-tang", "内置：minimind-tang")
    assert tr("model_shipped", name="minimind-tang") == "shipped: minimind-tang"  # outside a build: English


def test_the_samples_the_kinds_and_the_devices_have_chinese_names():
    from webapp.context import SAMPLES
    from webapp.tabs.corpus import sample_choices

    assert [value for _, value in sample_choices()] == list(SAMPLES)
    assert all(EN[f"sample_{Path(file).stem}"] == name for name, file in SAMPLES.items())
    assert tr("c_kind", lang="zh", kind="preference") == "**类型：** 偏好"
    assert tr("device_line", lang="zh", device="CPU (2 threads, bf16), bf16") == "**设备：** CPU (2 线程, bf16), bf16"
    assert tr("device_line", device="CPU (2 threads, bf16), bf16") == "**Device:** CPU (2 threads, bf16), bf16"
