"""The Train tab's Reinforce (GRPO) parts: reward inputs drawn from the library's own list of
built-in rewards (never a copy of it), the config's grpo section from the page's inputs, bounded
so that one run cannot ask a hosted server for unbounded sampling, and the held-out answers a run
writes at each evaluation, as a table."""

from __future__ import annotations

import json
import re

import gradio as gr
import pandas as pd

from minimind.training import RunDir
from minimind.training.config import GrpoSection
from minimind.training.rewards import describe_rewards

from ..context import form_number
from ..i18n import both, t
from ..workspace import WorkspaceError

REWARD_KINDS = describe_rewards()
# the Tang prompts sample asks for a form and names a title; a poem should rhyme (in more than one class)
DEFAULT_REWARDS = {"form": 1.0, "rhyme": 1.0, "title": 0.5}
# What one run may ask of the server: answers sampled per prompt, tokens per answer (work grows with
# both), and the KL weight (beyond 1 the model could hardly move from where it started).
BOUNDS = {"group_size": (2, 16), "max_new_tokens": (1, 256), "beta": (0.0, 1.0)}
DEFAULTS = {"group_size": GrpoSection.group_size, "max_new_tokens": GrpoSection.max_new_tokens,
            "beta": GrpoSection.beta}
ROLLOUT_ROWS = 40          # held-out answers the table shows, newest evaluation first
_LIST_SEPARATORS = re.compile(r"[\n,，、]")
EXAMPLE = '[{"name": "form", "weight": 1.0}, {"name": "contains", "weight": 0.5, "text": "月"}]'
# the built-in rewards' descriptions and parameters' help in Chinese (a reward or parameter missing
# here shows the library's English): reward -> its description, (reward, parameter) -> its help
REWARDS_ZH = {
    "form": "回答符合要求的格律诗体裁（句数和每句字数）；接近时给部分分。",
    "rhyme": "偶数句押同一个韵（现代普通话韵母，不计声调）；大多押韵时给部分分；一批回答都押同一个韵部时少给分。",
    "title": "回答切题：用到题目里的字；提示中没有题目时给 1.0。",
    ("rhyme", "class_share"): "一批押韵的回答中，同一韵部最多占多少比例仍得满分（真实唐诗中最常见的韵部约占四分之一）；1 = 不限",
    ("title", "chars"): "回答用到题目（提示中《…》里）多少个不同的字可得满分",
    "length": "回答长度在范围之内；超出范围时线性降到 0。",
    "regex": "回答中能找到一个正则表达式。",
    "contains": "回答包含的必需文本所占的比例。",
    "avoid": "1 减去回答包含的禁用文本所占的比例。",
    "no_repetition": "不重复的字符 n 元组所占的比例：惩罚自我重复。",
    "format": "回答以开头标记开始、以结尾标记结束，中间有文本。",
    ("form", "form"): "五言绝句 / 七言绝句 / 五言律诗 / 七言律诗（或 五绝 …）；留空：用记录的 form 字段，否则用提示中写明的体裁",
    ("length", "min_chars"): "最少字符数，不计空白（0 = 不限）",
    ("length", "max_chars"): "最多字符数（0 = 不限）",
    ("length", "min_lines"): "最少非空行数（0 = 不限）",
    ("length", "max_lines"): "最多非空行数（0 = 不限）",
    ("regex", "pattern"): "一个正则表达式，最多 200 个字符，每个计数重复最多 1,000 次",
    ("contains", "text"): "回答必须包含的文本（加上每条记录的 must_contain）",
    ("avoid", "text"): "回答不能包含的文本（加上每条记录的 must_avoid）",
    ("no_repetition", "n"): "比较的字符 n 元组长度",
    ("format", "open"): "回答开头的文本",
    ("format", "close"): "回答结尾的文本",
}


# ---- page inputs -> config ---------------------------------------------------------------------

def default_spec() -> list[dict]:
    """The rewards ticked when the page opens (and an API caller's default)."""
    return [{"name": name, "weight": weight} for name, weight in DEFAULT_REWARDS.items()]


def _param_value(param: dict, value):
    """A parameter as the page holds it -> as the config takes it (a list from comma- or line-
    separated text); None (an emptied number box) is passed on for the config to name."""
    if param["kind"] == "list":
        return [part.strip() for part in _LIST_SEPARATORS.split(value or "") if part.strip()]
    if param["kind"] == "str":
        return value or ""
    return value


def reward_spec(*values) -> list[dict]:
    """grpo.rewards from the reward inputs (per reward, in describe_rewards order: ticked, weight,
    then its parameters). Parameters left at their default are left out. Nothing is checked here,
    so a bad value in a hidden box never blocks another mode: the config's validation names it."""
    spec, values = [], list(values)
    for kind in REWARD_KINDS:
        width = 2 + len(kind["params"])
        ticked, weight, *params = values[:width] + [None] * (width - len(values[:width]))
        del values[:width]
        if not ticked:
            continue
        entry = {"name": kind["name"], "weight": weight}
        for param, value in zip(kind["params"], params):
            value = _param_value(param, value)
            if value != param["default"]:
                entry[param["name"]] = value
        spec.append(entry)
    return spec


def _reward_list(rewards) -> list:
    """The rewards a request names: a list of {name, weight, params...}, or that list as JSON text."""
    if isinstance(rewards, str):
        try:
            rewards = json.loads(rewards) if rewards.strip() else []
        except ValueError as err:
            raise WorkspaceError(f"rewards must be a JSON list such as {EXAMPLE} ({err})") from None
    if rewards is None:
        rewards = []
    if not isinstance(rewards, list):
        raise WorkspaceError(f"rewards must be a list such as {EXAMPLE} (got {type(rewards).__name__})")
    if not rewards:
        raise WorkspaceError("tick at least one reward: the run makes the answers its rewards score well "
                             "more likely")
    return rewards


def grpo_section(rewards, group_size, beta, max_new_tokens) -> dict:
    """The config's grpo section from the page's (or an API caller's) inputs; the rewards' names,
    weights and parameters are checked by the config's validation (build_rewards)."""
    return {"rewards": _reward_list(rewards),
            "group_size": form_number(group_size, "group size", *BOUNDS["group_size"], whole=True),
            "max_new_tokens": form_number(max_new_tokens, "max new tokens", *BOUNDS["max_new_tokens"], whole=True),
            "beta": form_number(beta, "KL beta", *BOUNDS["beta"])}


# ---- the run folder -> the page --------------------------------------------------------------

def _score(value):
    return round(value, 3) if isinstance(value, (int, float)) else None


def rollout_table(run: RunDir) -> pd.DataFrame | None:
    """A GRPO run's held-out answers (samples.jsonl), newest evaluation first: step, prompt,
    answer, total reward and each reward's score; None before the first evaluation."""
    samples = [s for s in run.read_samples() if isinstance(s, dict) and isinstance(s.get("step"), int)]
    if not samples:
        return None
    names = list(dict.fromkeys(name for s in samples if isinstance(s.get("rewards"), dict) for name in s["rewards"]))
    newest = sorted(samples, key=lambda s: -s["step"])[:ROLLOUT_ROWS]  # stable: an evaluation keeps its order
    rows = [{"step": s["step"], "prompt": str(s.get("prompt", "")), "answer": str(s.get("answer", "")),
             "reward": _score(s.get("reward")),
             **{name: _score((s.get("rewards") or {}).get(name)) for name in names}} for s in newest]
    return pd.DataFrame(rows, columns=["step", "prompt", "answer", "reward", *names])


# ---- widgets ---------------------------------------------------------------------------------------

def _param_input(reward: str, param: dict):
    elem_id = f"reward-{reward}-{param['name']}"
    label = param["name"] + (" *" if param["required"] else "")
    zh = REWARDS_ZH.get((reward, param["name"]), param["help"])
    if param["kind"] in ("int", "float"):
        return gr.Number(param["default"], precision=0 if param["kind"] == "int" else None, label=label,
                         info=both(param["help"], zh), elem_id=elem_id, min_width=120)
    listed = param["kind"] == "list"
    return gr.Textbox(", ".join(param["default"]) if listed else param["default"], label=label,
                      info=both(param["help"] + ("; separate texts with commas" if listed else ""),
                                zh + ("；多个文本用逗号分隔" if listed else "")),
                      elem_id=elem_id, max_lines=1, min_width=160)


def reward_inputs() -> tuple[list, list]:
    """Per built-in reward: a checkbox, and (shown while it is ticked) its weight and parameters.
    Returns the inputs in reward_spec's order and the (checkbox, box) pairs to show and hide."""
    inputs, toggles = [], []
    for kind in REWARD_KINDS:
        name, on = kind["name"], kind["name"] in DEFAULT_REWARDS
        with gr.Row(elem_id=f"reward-{name}", equal_height=False):
            said = both(kind["description"], REWARDS_ZH.get(name, kind["description"]))
            ticked = gr.Checkbox(on, label=name, info=said, elem_id=f"reward-{name}-on", scale=2)
            with gr.Column(visible=on, scale=3) as box, gr.Row():
                weight = gr.Number(DEFAULT_REWARDS.get(name, 1.0), label=t("reward_weight"),
                                   elem_id=f"reward-{name}-weight", min_width=100)
                params = [_param_input(name, p) for p in kind["params"]]
        inputs += [ticked, weight, *params]
        toggles.append((ticked, box))
    return inputs, toggles
