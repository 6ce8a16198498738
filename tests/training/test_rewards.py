"""GRPO rewards on real poems: form, rhyme (a modern-reading proxy), text rewards, and the
config checks that turn a bad YAML entry into a message a user can act on."""

import json
import time

import pytest

from minimind.errors import ConfigError
from minimind.training.rewards import REWARDS, Reward, build_rewards, describe_rewards, score_answer, score_answers
from minimind.training.rewards.poems import (FORMS, form_of, requested_form, rhyme_classes, rhyme_of, rhymes,
                                             title_characters, verses)

JINGYESI = "床前明月光，疑是地上霜。举头望明月，低头思故乡。"            # 五言绝句, 霜/乡: ang
JINGYESI_TRAD = "床前明月光，疑是地上霜。\n舉頭望明月，低頭思故鄉。"
CHUNXIAO = "春眠不觉晓，处处闻啼鸟。夜来风雨声，花落知多少。"            # 鸟/少: ao
BAIDI = "朝辞白帝彩云间，千里江陵一日还。两岸猿声啼不住，轻舟已过万重山。"  # 七言绝句, 还 (huan)/山
BAIDI_TRAD = "朝辭白帝彩雲間，千里江陵一日還。兩岸猿聲啼不住，輕舟已過萬重山。"
SHANJU = ("空山新雨后，天气晚来秋。明月松间照，清泉石上流。"
          "竹喧归浣女，莲动下渔舟。随意春芳歇，王孙自可留。")                  # 五言律诗, 秋/流/舟/留
XIYU = ("好雨知时节，当春乃发生。随风潜入夜，润物细无声。"
        "野径云俱黑，江船火独明。晓看红湿处，花重锦官城。")                    # 五言律诗, eng/ing
HUANGHELOU = ("昔人已乘黄鹤去，此地空余黄鹤楼。黄鹤一去不复返，白云千载空悠悠。"
              "晴川历历汉阳树，芳草萋萋鹦鹉洲。日暮乡关何处是，烟波江上使人愁。")  # 七言律诗
CHUNWANG = ("国破山河在，城春草木深。感时花溅泪，恨别鸟惊心。"
            "烽火连三月，家书抵万金。白头搔更短，浑欲不胜簪。")                  # 簪 is zan today
SHUFFLED = "床前明月光，举头望明月。疑是地上霜，低头思故乡。"                # even verses: 月/乡


def score(name, answer, prompt="", record=None, **params):
    return build_rewards([{"name": name, **params}])[0](answer, prompt, record or {})


# --- poem helpers ---------------------------------------------------------------------------

def test_forms_of_real_poems():
    assert form_of(JINGYESI) == form_of(JINGYESI_TRAD) == "五言绝句"
    assert form_of(BAIDI) == "七言绝句"
    assert form_of(SHANJU) == form_of(CHUNWANG) == "五言律诗"
    assert form_of(HUANGHELOU) == "七言律诗"
    assert form_of("床前明月光，疑是地上霜。") is None  # two verses
    assert form_of(JINGYESI + "床前明月光。") is None
    assert form_of("") is None


def test_verses_ignore_whitespace_ascii_punctuation_and_tags():
    assert verses(" 床前 明月光 ,疑是地上霜.\r\n举头望明月!低头思故乡? ") == ["床前明月光", "疑是地上霜",
                                                                 "举头望明月", "低头思故乡"]
    assert form_of(f"<poem>\n{JINGYESI}\n</poem>") == "五言绝句"
    assert set(FORMS.values()) == {"五言绝句", "七言绝句", "五言律诗", "七言律诗"}


def test_requested_form_from_full_short_and_traditional_names():
    assert requested_form("以《静夜思》为题写一首五言绝句") == "五言绝句"
    assert requested_form("来一首七律吧") == "七言律诗"
    assert requested_form("寫一首七言絕句") == "七言绝句"
    assert requested_form("模仿李白写一首五律，不要写成七绝") == "五言律诗"  # first mention wins
    assert requested_form("写一首李白风格的诗") is None


def test_rhyme_on_real_poems_simplified_and_traditional():
    for poem in (JINGYESI, JINGYESI_TRAD, CHUNXIAO, BAIDI, BAIDI_TRAD, SHANJU, XIYU, HUANGHELOU):
        assert rhymes(poem), poem
    assert not rhymes(SHUFFLED)
    assert not rhymes("床前明月光，疑是地上霜。")  # one even verse is no rhyme


def test_a_rhyme_character_used_again_does_not_rhyme_with_itself():
    """What a policy rewarded for rhyme learned first: ending every even verse with 人."""
    repeated = "春風花落新，春草舊驛人。洞庭飄逐骨，煙浦流多人。"
    assert not rhymes(repeated) and score("rhyme", repeated) == 0.0
    mostly = "暖驊承雲頻，幾川爲賦人。鬢毛榮貴恥，榮德出門人。不敢上官見，不知誰待春。今日應暫進，常時欲遊人。"
    assert not rhymes(mostly)
    assert score("rhyme", mostly) == pytest.approx(0.5 * (2 - 1) / 3)  # 人 and 春 share a class; 人 counts once
    assert rhymes(mostly.replace("常時欲遊人", "常時欲遊新").replace("榮德出門人", "榮德出門身"))


def test_heteronyms_count_any_reading():
    assert {"怀来", "言前"} <= rhyme_classes("还")  # hai / huan: huan rhymes 还 with 山 in BAIDI
    assert {"怀来", "言前"} <= rhyme_classes("還")
    assert rhyme_classes("鄉") == rhyme_classes("乡") == {"江阳"}
    assert rhyme_classes("風") == rhyme_classes("聲") == {"中东"}
    assert rhyme_classes("a") == rhyme_classes("，") == frozenset()


def test_rhyme_is_a_modern_proxy():
    """春望 rhymed in Middle Chinese (深心金簪, 侵 group); 簪 reads zan today, so 3 of 4 share a class."""
    assert not rhymes(CHUNWANG)
    assert score("rhyme", CHUNWANG) == pytest.approx(0.5 * 2 / 3)


# --- poem rewards ---------------------------------------------------------------------------

def test_form_exact_scores_one_and_partial_credit_orders_by_closeness():
    prompt = "写一首五言绝句"
    exact = score("form", JINGYESI, prompt)
    one_long = score("form", "床前明月光光，疑是地上霜。举头望明月，低头思故乡。", prompt)
    seven_chars = score("form", BAIDI, prompt)
    eight_verses = score("form", SHANJU, prompt)
    prose = score("form", "我不会写诗但是今天天气很好我们出去玩吧", prompt)
    assert exact == 1.0
    assert 1.0 > one_long > seven_chars > eight_verses > prose > 0.0
    assert one_long == pytest.approx(0.5 + 0.5 * (3 + 0.8) / 4)
    assert seven_chars == pytest.approx(0.5 + 0.5 * 0.6)
    assert eight_verses == pytest.approx(0.5)
    assert score("form", "", prompt) == 0.0


def test_form_source_param_then_record_then_prompt_then_any():
    assert score("form", SHANJU, "写一首五言绝句", {"form": "五言律诗"}) == 1.0
    assert score("form", SHANJU, "写一首五言绝句", {"form": "五言律诗"}, form="七绝") < 1.0
    assert score("form", HUANGHELOU, "写一首五言绝句", {"form": "七律"}) == 1.0
    assert score("form", BAIDI, "续写：朝辞白帝彩云间") == 1.0  # no form asked: any of the four
    assert score("form", "床前明月光，疑是地上霜。", "续写") < 1.0


def test_rhyme_reward():
    assert score("rhyme", JINGYESI) == 1.0
    assert score("rhyme", SHUFFLED) == 0.0
    assert score("rhyme", "") == 0.0
    assert score("rhyme", "床前明月光，疑是地上霜。") == 0.0


# --- text rewards ---------------------------------------------------------------------------

def test_length_inside_and_linear_outside():
    assert score("length", JINGYESI, min_chars=10, max_chars=30) == 1.0  # 20 chars + 4 punctuation
    assert score("length", "一 二 三", min_chars=6) == pytest.approx(0.5)  # whitespace not counted
    assert score("length", "字" * 30, max_chars=20) == pytest.approx(0.5)
    assert score("length", "字" * 45, max_chars=20) == 0.0
    assert score("length", "一\n\n二\n三", max_lines=2) == pytest.approx(0.5)
    assert score("length", "一\n二", min_lines=4) == pytest.approx(0.5)
    assert score("length", "") == 1.0  # no bounds


def test_regex_matches_and_a_catastrophic_pattern_times_out():
    assert score("regex", JINGYESI, pattern="明月") == 1.0
    assert score("regex", CHUNXIAO, pattern="^明月") == 0.0
    assert score("regex", "", pattern=".*") == 0.0
    start = time.perf_counter()
    assert score("regex", "a" * 40 + "b", pattern="(a+)+$") == 0.0
    assert score("regex", "a" * 40 + "b", pattern="(a|aa)+$") == 0.0  # the engine times this one out
    assert time.perf_counter() - start < 1.0


def test_contains_and_avoid_with_record_fields():
    assert score("contains", JINGYESI, text="明月") == 1.0
    assert score("contains", JINGYESI, text=["明月", "春风"]) == 0.5
    assert score("contains", JINGYESI, record={"must_contain": ["霜", "雪", "酒"]}, text="月") == 0.5
    assert score("contains", JINGYESI, record={"must_contain": "故乡"}) == 1.0
    assert score("contains", JINGYESI) == 1.0  # nothing required
    assert score("avoid", JINGYESI, text=["春风", "秋雨"]) == 1.0
    assert score("avoid", JINGYESI, text="明月", record={"must_avoid": ["霜", "酒"]}) == pytest.approx(1 / 3)
    assert score("avoid", JINGYESI) == 1.0


def test_no_repetition():
    assert score("no_repetition", "啊啊啊啊") == pytest.approx(1 / 3)
    assert score("no_repetition", JINGYESI) == pytest.approx(18 / 19)  # 明月 twice, punctuation dropped
    assert score("no_repetition", "春眠不觉晓", n=1) == 1.0
    assert score("no_repetition", "月") == 0.0
    assert score("no_repetition", "") == 0.0


def test_format_tags():
    assert score("format", f" <poem>{JINGYESI}</poem>\n") == 1.0
    assert score("format", f"<poem>{JINGYESI}") == 0.5
    assert score("format", f"{JINGYESI}</poem>") == 0.5
    assert score("format", "<poem>  </poem>") == 0.5
    assert score("format", JINGYESI) == 0.0
    assert score("format", "") == 0.0
    assert score("format", "【诗】明月【完】", open="【诗】", close="【完】") == 1.0


# --- config ---------------------------------------------------------------------------------

def test_score_answer_is_the_weighted_mean():
    rewards = build_rewards([{"name": "form", "weight": 3}, {"name": "contains", "weight": 1, "text": "春风"},
                             {"name": "rhyme", "weight": 0}])
    scores = score_answer(rewards, JINGYESI, "写一首五言绝句", {})
    assert scores == {"form": 1.0, "contains": 0.0, "rhyme": 1.0, "reward": 0.75}
    assert [r.name for r in rewards] == ["form", "contains", "rhyme"]
    assert rewards[0].weight == 3.0 and build_rewards([{"name": "rhyme"}])[0].weight == 1.0


def test_rhyme_credit_spreads_over_the_classes_in_a_batch():
    """One rhyme class for most of a batch (what GRPO found: 清 生 情 成 …) keeps class_share of the
    batch's rhyming answers at full credit; a spread batch, a lone answer and class_share 1 score as
    each answer alone."""
    assert rhyme_of(XIYU) == ("中东", frozenset("生声明城")) and rhyme_of(JINGYESI)[0] == "江阳"
    assert rhyme_of(SHUFFLED) is None  # no two even verses rhyme
    rewards = build_rewards([{"name": "rhyme"}])
    assert rewards[0].params == {"class_share": 0.3}
    spread = [JINGYESI, CHUNXIAO, SHANJU, XIYU, BAIDI, JINGYESI_TRAD, SHUFFLED]
    alone = [score_answer(rewards, a, "")["rhyme"] for a in spread]
    assert [s["rhyme"] for s in score_answers(rewards, spread, [""] * 7, [None] * 7)] == alone
    crowded = [XIYU] * 8 + [JINGYESI, CHUNXIAO]  # 8 of 10 rhyming answers in 中东: 3 allowed at full credit
    scores = [s["rhyme"] for s in score_answers(rewards, crowded, [""] * 10, [None] * 10)]
    assert scores[:8] == [pytest.approx(3 / 8)] * 8 and scores[8:] == [1.0, 1.0]
    loose = build_rewards([{"name": "rhyme", "class_share": 1}])
    assert [s["rhyme"] for s in score_answers(loose, crowded, [""] * 10, [None] * 10)] == [1.0] * 10
    assert score_answer(rewards, XIYU, "")["rhyme"] == 1.0  # two of a class are never crowded


def test_title_reward_counts_the_titles_characters_the_answer_uses():
    assert title_characters("以《春夜喜雨》为题写一首五言律诗") == set("春夜喜雨")
    assert title_characters("写一首五言律诗") == set()
    prompt = "以《春夜喜雨》为题写一首五言律诗"
    assert score("title", XIYU, prompt) == 1.0           # 春, 夜, 雨: two or more is full credit
    assert score("title", JINGYESI, prompt) == 0.0       # none of them
    assert score("title", "春眠不觉晓", prompt) == 0.5    # one of two
    assert score("title", "春眠不觉晓", prompt, chars=1) == 1.0
    assert score("title", "春" * 20, prompt) == 0.5       # repeating one character earns no more
    assert score("title", JINGYESI, "写一首五言绝句") == 1.0  # no title: nothing to stay on
    assert score("title", "月", "以《月》为题") == 1.0     # a one-character title needs that one


def test_build_fills_defaults_and_normalizes():
    reward = build_rewards([{"name": "contains", "text": "月"}, {"name": "form", "form": "七绝"}])
    assert reward[0] == Reward("contains", 1.0, {"text": ["月"]})
    assert reward[1].params == {"form": "七言绝句"}
    assert build_rewards([{"name": "format"}])[0].params == {"open": "<poem>", "close": "</poem>"}


@pytest.mark.parametrize("specs, needle", [
    ([], "none configured"),
    ([{"weight": 1}], "needs a name"),
    ([{"name": "rhymes"}], "known rewards: form, rhyme, title, length, regex, contains, avoid, no_repetition, format"),
    ([{"name": "form", "chars": 5}], "its parameters: form"),
    ([{"name": "rhyme", "form": "五绝"}], "its parameters: class_share"),
    ([{"name": "format", "form": "五绝"}], "its parameters: open, close"),
    ([{"name": "rhyme", "class_share": 0}], "class_share must be above 0 and at most 1"),
    ([{"name": "title", "chars": 0}], "chars must be between 1 and 10"),
    ([{"name": "length", "max_chars": "20"}], "'max_chars' must be an integer"),
    ([{"name": "length", "max_chars": 20.5}], "'max_chars' must be an integer"),
    ([{"name": "length", "min_chars": 30, "max_chars": 20}], "min_chars (30) is above max_chars (20)"),
    ([{"name": "length", "min_lines": -1}], "min_lines must be >= 0"),
    ([{"name": "contains", "text": 5}], "must be a string or a list of strings"),
    ([{"name": "contains", "text": ["月", ""]}], "empty string"),
    ([{"name": "form"}, {"name": "form", "weight": 2}], "'form' is listed twice"),
    ([{"name": "form", "weight": -1}], "weight must be a number between 0 and 1000"),
    ([{"name": "form", "weight": "high"}], "weight must be a number between 0 and 1000"),
    ([{"name": "form", "weight": 0}], "give at least one reward a weight > 0"),
    ([{"name": "form", "form": "十四行诗"}], "is not one of 五言绝句"),
    ([{"name": "regex"}], "parameter 'pattern' is required"),
    ([{"name": "regex", "pattern": "(月"}], "does not compile: missing )"),
    ([{"name": "regex", "pattern": "月" * 201}], "keep it to 200 or fewer"),
    ([{"name": "no_repetition", "n": 0}], "n must be between 1 and 16"),
    ([{"name": "format", "open": ""}], "open is empty"),
])
def test_build_errors_say_what_to_fix(specs, needle):
    with pytest.raises(ConfigError) as caught:
        build_rewards(specs)
    assert needle in str(caught.value)


def test_describe_rewards_for_the_page():
    described = describe_rewards()
    json.dumps(described, ensure_ascii=False)
    assert [d["name"] for d in described] == list(REWARDS) == [
        "form", "rhyme", "title", "length", "regex", "contains", "avoid", "no_repetition", "format"]
    regex = next(d for d in described if d["name"] == "regex")
    assert regex["params"][0] == {"name": "pattern", "kind": "str", "default": "", "required": True,
                                  "help": regex["params"][0]["help"]}
    assert all(d["description"] for d in described)


def test_make_tang_chat_uses_these_helpers():
    from scripts import make_tang_chat

    assert make_tang_chat.form_of is form_of and make_tang_chat.verses is verses
    assert make_tang_chat.FORMS is FORMS
