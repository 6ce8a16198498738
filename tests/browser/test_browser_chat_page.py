"""The Chat tab as a newcomer meets it, in headless Chromium with the shipped models: the
message box is the tab's first input and Enter sends it; the system prompt is an optional
setting where Enter starts a new line; side by side, each pane is headed by its model's name."""

import re

import pytest
from webapp_helpers import SHIPPED, needs_shipped

pytestmark = [pytest.mark.browser, needs_shipped("minimind-tang", "minimind-shakespeare")]

# the first control a user can type into or operate, in document order, inside the Chat tab
FIRST_INPUT = """() => {
  const tab = document.querySelector('#tab-chat');
  const el = [...tab.querySelectorAll('input, textarea, select, [contenteditable=true]')]
      .find(e => e.type !== 'hidden' && e.offsetParent !== null);
  return el && el.closest('[id]') ? el.closest('[id]').id : null;
}"""


def _pick(page, box_id: str, option: str) -> None:
    """Choose `option` in the Gradio dropdown with elem_id `box_id`."""
    page.locator(f"#{box_id} input").click()
    page.get_by_role("option", name=option).first.click()


def test_chat_tab_message_box_first_enter_sends_and_panes_name_their_models(studio_page):
    from playwright.sync_api import expect

    page = studio_page(shipped_dir=SHIPPED, background_jobs=False)
    page.get_by_role("tab", name="Chat").click()
    box = page.locator("#chat-input textarea")
    expect(box).to_be_visible()
    assert page.evaluate(FIRST_INPUT) == "chat-input"
    # the placeholder tells what to do; the system prompt is an optional setting, not the first box
    assert "Enter" in (box.get_attribute("placeholder") or "")

    _pick(page, "chat-model", "shipped: minimind-tang")
    expect(page.locator("#chatbot")).to_contain_text("minimind-tang")

    # Enter in the message box sends; the shipped MiniMind-Tang's answer streams in
    prompt = "以《春夜》为题写一首五言绝句"
    box.fill(prompt)
    box.press("Enter")
    expect(page.locator("#chatbot [data-testid=user]")).to_have_count(1)
    expect(page.locator("#chatbot [data-testid=user]")).to_contain_text(prompt)
    answer = page.locator("#chatbot [data-testid=bot]")
    expect(answer).to_have_count(1, timeout=60_000)
    expect(answer).to_have_text(re.compile(r"[^\s…]"), timeout=60_000)
    expect(box).to_have_value("")  # the box is emptied for the next message
    expect(page.locator("#chat-send")).to_be_enabled()

    # the system prompt sits in Settings, says it is optional; Enter there starts a new line, sends nothing
    page.locator("#chat-settings").get_by_text("Settings").first.click()
    system = page.locator("#chat-system textarea")
    expect(system).to_be_visible()
    expect(page.locator("#chat-system")).to_contain_text("System prompt (optional)")
    system.fill("Answer as a Tang poet.")
    system.press("Enter")
    expect(system).to_have_value("Answer as a Tang poet.\n")
    page.wait_for_timeout(500)
    expect(page.locator("#chatbot [data-testid=user]")).to_have_count(1)

    # side by side: the panes are headed by the two chosen models' names
    page.locator("#chat-side-by-side input[type=checkbox]").check()
    expect(page.locator("#chatbot-b")).to_be_visible()
    _pick(page, "chat-model-b", "shipped: minimind-shakespeare")
    expect(page.locator("#chatbot-b")).to_contain_text("minimind-shakespeare")
    expect(page.locator("#chatbot")).to_contain_text("minimind-tang")
    studio_page.screenshot("tab-chat-side-by-side")
