"""The zh page's words for what the page and the library say in English (issue 44, item 7): every
error a newcomer meets has a Chinese entry in webapp/errors_zh.py, built here by the code that
raises it; every line the trainer logs (the `log(...)` calls of minimind/training, rendered with
sample values) has one in webapp/log_zh.py; a message no entry knows keeps a Chinese lead-in.
Fast: no model is loaded, run folders and corpora are written by hand."""

import ast
import re

import gradio as gr
import pytest

from minimind.data import DataConfig, inspect_corpus
from minimind.errors import MiniMindError
from minimind.sampling_params import SamplingParams
from minimind.training import RunDir, TrainConfig
from minimind.training.sizing import SizeChoice
from webapp import errors_zh
from webapp.context import AppContext, form_number, user_errors, user_errors_gen
from webapp.errors_zh import ERRORS, LEAD, error_zh
from webapp.jobs import JobManager
from webapp.log_zh import LOG, log_line_zh, log_text_zh
from webapp.tabs import chat, compare, corpus, export, grpo, train
from webapp.tabs.train_form import TrainForm
from webapp_helpers import page_workspace
from helpers import ROOT

NUMBERS = {"steps": 5, "batch": 2, "seq_len": 64, "lr": 1e-4, "accum": 1,
           "precision": "fp32", "rank": 4, "alpha": 8, "eval_every": 0}
BASE = "shipped:minimind-tang"
ENGLISH_RUN = re.compile(r"[A-Za-z][a-z]+(?:[ ,;:'()-]+[A-Za-z][a-z]+){3,}")  # four English words in a row
NAMES = re.compile(r"'[^']*'|\"[^\"]*\"|`[^`]*`|MINIMIND_\w+|Hugging Face|torch\.compile|HuggingFaceTB/\S+")


def english_left(text: str) -> list[str]:
    """Runs of four or more English words in `text`, quoted names and values aside."""
    return ENGLISH_RUN.findall(NAMES.sub(" ", text))


@pytest.fixture
def ctx(tmp_path):
    ws, shipped = page_workspace(tmp_path, corpora=("chats", "prompts"))
    return AppContext(ws, JobManager(ws), shipped_dir=shipped)


def raised(fn, *args, **kwargs) -> str:
    """The message `fn(*args)` fails with (a MiniMindError's text or a gr.Error's message)."""
    try:
        result = fn(*args, **kwargs)
        if hasattr(result, "__next__"):
            list(result)
    except gr.Error as err:
        return err.message
    except MiniMindError as err:
        return str(err)
    raise AssertionError(f"{fn} did not fail")


def _form(**kw):
    return TrainForm(**{"base": BASE, "mode": "lora", "corpus": "chats", **NUMBERS, **kw})


def page_messages(ctx) -> list[str]:
    """The page's own errors a newcomer can meet, each made by the code that raises it."""
    run = RunDir(ctx.workspace.runs / "r1").create()
    TrainConfig.from_dict({"mode": "lora", "max_steps": 4, "data": {"files": ["x"]},
                           "model": {"init_from": "m"}}).save(run.config_file)
    run.write_status(state="finished", mode="lora", step=4, total=4)
    to_config = lambda **kw: _form(**kw).to_config(ctx)  # noqa: E731
    return [
        raised(ctx.model_folder, None), raised(ctx.model_folder, "shipped:nope"),
        raised(form_number, 7, "the tokenizer's vocabulary", 262, 65536, whole=True),
        raised(to_config, corpus=None), raised(to_config, steps=0), raised(to_config, steps=2.5),
        raised(to_config, batch="many"), raised(to_config, lr=2), raised(to_config, seq_len=None),
        raised(to_config, stop_after="minutes", minutes=0), raised(to_config, mode=["lora"]),
        raised(to_config, base="new:auto"), raised(to_config, base=None), raised(to_config, base="hub:"),
        raised(to_config, mode="dpo"), raised(to_config, mode="grpo"), raised(to_config, mode="sft", corpus="prompts"),
        raised(to_config, task="classify"), raised(to_config, mode="distill", teacher=None),
        raised(to_config, mode="pretrain", base="new:auto", extend_vocab=True),
        raised(to_config, mode="dpo", base="new:auto", weights="lora", corpus="nope"),
        raised(train.stop, ctx, None), raised(ctx.jobs.resume, "r1"),
        raised(compare.chosen_runs, ctx, []), raised(compare.chosen_runs, ctx, ["r1"] * 9),
        raised(compare.chosen_runs, ctx, ["nope"]),
        raised(corpus.stored_files, ctx, [], None), raised(corpus.stored_files, ctx, [], "nope"),
        raised(corpus.save, ctx, "x", [], "auto", "", "paragraph", False, False, 6400),
        raised(corpus.save, ctx, 5, ["f"], "auto", "", "paragraph", False, False, 6400),
        raised(ctx.workspace.save_corpus, "!!!", [ROOT / "samples" / "tang_chat_sample.jsonl"], {}, {}),
        raised(ctx.workspace.store_uploads, [(ROOT / "README.md", "tool.exe")]),
        raised(ctx.workspace.run_dir, "nope"),
        raised(chat.respond, ctx, "", [], [], BASE, BASE, False, "", 0.7, 0.9, 0, 16, 1.0),
        raised(chat.regenerate, ctx, [], [], BASE, BASE, False, "", 0.7, 0.9, 0, 16, 1.0),
        raised(chat.try_classifier, ctx, "", None), raised(chat.try_classifier, ctx, "床前明月光", None),
        raised(export.run_export, ctx, BASE, [], None),
        raised(grpo.grpo_section, [], 4, 0.04, 64),
        raised(ctx.uploads.accept, "/etc/passwd"),
        raised(SamplingParams, temperature=9.0), raised(SamplingParams, top_k=-1),
        "something went wrong on the server; its log has the details (please report it)",
    ]


def corpus_messages(tmp_path) -> list[str]:
    """What minimind.data says of the corpus files a newcomer gets wrong (strict: the first problem,
    as the Inspect button shows it; lenient: each skipped record)."""
    files = {"bad.jsonl": '{"text": "fine"}\n{"text": broken\n', "empty.txt": "", "blank.txt": "  \n\n",
             "mixed.jsonl": '{"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", '
                            '"content": "yo"}]}\n{"text": "plain"}\n',
             "nofield.jsonl": '{"title": "x"}\n', "object.json": '{"data": [{"text": "a"}]}',
             "nocolumn.csv": "a,b\n1,2\n", "same.jsonl": '{"prompt": "p", "chosen": "a", "rejected": "a"}\n',
             "scalar.jsonl": '{"text": "fine"}\n42\n'}
    for name, text in files.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    (tmp_path / "binary.txt").write_bytes(b"MZ\x00\x00program")
    said = []
    for name in [*files, "binary.txt", "missing.jsonl", "tool.exe"]:
        for strict in (True, False):
            try:
                stats = inspect_corpus([name], DataConfig(strict=strict, root=str(tmp_path)))
                said += [str(s) for s in stats.skipped]
            except MiniMindError as err:
                said.append(str(err))
    return list(dict.fromkeys(said))


def test_every_error_a_newcomer_meets_is_said_in_chinese(ctx, tmp_path):
    messages = page_messages(ctx) + corpus_messages(tmp_path)
    untold = [m for m in messages if ERRORS.say(m) is None]
    assert not untold, "\n".join(untold)
    for message in messages:
        said = error_zh(message)
        assert re.search(r"[\u4e00-\u9fff]", said), (message, said)
        assert not english_left(said), (message, said, english_left(said))


def test_the_corpus_errors_name_file_and_place_in_chinese(tmp_path):
    said = error_zh("bad.jsonl: line 2: malformed JSON (Expecting value at column 10): found '{\"text\": broken'; "
                    "expected one JSON object per line")
    assert said == "bad.jsonl：第 2 行：JSON 格式错误（第 10 列，缺少值）：读到 '{\"text\": broken'；每行应是一个 JSON 对象"
    kind = error_zh("mode dpo learns from preference pairs (prompt, chosen, rejected); corpus 'chats' is chat: save a "
                    "preference corpus on the Corpus tab")
    assert kind == ("dpo 模式从偏好对（prompt、chosen、rejected）中学习；语料 'chats' 是对话语料：请在“语料”页保存一份偏好"
                    "语料")


def test_an_unknown_message_keeps_a_chinese_lead_in():
    assert error_zh("the moon is made of cheese") == LEAD + "the moon is made of cheese"
    assert error_zh("the moon is made of cheese", lead=None) == "the moon is made of cheese"
    # a known reason at an unknown place, or an unknown reason at a known place: not half translated
    assert error_zh("a.jsonl: line 3: the moon is made of cheese").startswith(LEAD)


def test_the_pop_up_says_it_in_the_requests_language(monkeypatch):
    def fails():
        raise gr.Error("choose at least one format", print_exception=False)

    def breaks():
        raise KeyError("/srv/secret/path")

    with pytest.raises(gr.Error) as english:
        user_errors(fails)()
    assert english.value.message == "choose at least one format"
    monkeypatch.setattr("webapp.context.language", lambda *a: "zh")
    with pytest.raises(gr.Error) as chinese:
        user_errors(fails)()
    assert chinese.value.message == "请至少选择一种格式"
    with pytest.raises(gr.Error) as bug:
        user_errors(breaks)()
    assert bug.value.message == "服务器出了问题；详情在服务器日志里（请报告此问题）"
    with pytest.raises(gr.Error) as streamed:
        list(user_errors_gen(lambda: (yield from chat.respond(None, " ", [], [], BASE, BASE, False, "", 0.7, 0.9, 0, 16,
                                                            1.0)))())
    assert streamed.value.message == "请先输入消息"


# ---- the trainer's log ---------------------------------------------------------------------------

TRAINING = ROOT / "minimind" / "training"
NOT_SAID = {"reporting.py": "a tracker's own lines name the tracker and its error: left as written"}
SAMPLES = {  # an expression in a log f-string -> a value it may take
    "describe(device, cfg.precision)": "CPU (2 threads, bf16), bf16", "cfg.mode": "lora", "source": "the timed sizes",
    "memory.describe()": "about 1.2 GB (weights 0.1, activations 0.4 GB)", "found.describe()": "about 9.0 GB",
    "choice.preset": "nano", "type(err).__name__": "RuntimeError", "cfg.optim.name": "adamw",
    "message": "the training split is empty: the corpus is too small for data.seq_len = 256; add text or lower "
               "data.seq_len",
}


def _value(node: ast.FormattedValue) -> str:
    source = ast.unparse(node.value)
    spec = "".join(part.value for part in node.format_spec.values) if node.format_spec else ""
    if source in SAMPLES:
        return SAMPLES[source]
    if "name" in source:
        return "step-12"
    if any(word in source for word in ("err", "said")):
        return "boom"
    return format(12.5 if any(c in spec for c in "fge") else 1234, spec) if spec else "12"


def rendered(node) -> list[str]:
    """The lines a log call's argument can write, with sample values."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, ast.JoinedStr):
        lines = [""]
        for part in node.values:
            pieces = [part.value] if isinstance(part, ast.Constant) else [_value(part)]
            lines = [line + piece for line in lines for piece in pieces]
        return lines
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return [a + b for a in rendered(node.left) for b in rendered(node.right)]
    if isinstance(node, ast.IfExp):
        return rendered(node.body) + rendered(node.orelse)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "join":
        return ["loss 3.512 ppl 33.5 bpc 5.1"]  # the figures of an evaluation
    if isinstance(node, ast.Name):
        return [SAMPLES.get(node.id, "boom")]
    raise AssertionError(f"cannot render {ast.unparse(node)}")


def log_calls() -> list[tuple[str, int, ast.expr]]:
    """Every `log(...)` / `run.log(...)` with a text of its own in minimind/training."""
    calls = []
    for file in sorted(TRAINING.glob("*.py")):
        for node in ast.walk(ast.parse(file.read_text(encoding="utf-8"))):
            if not (isinstance(node, ast.Call) and node.args and len(node.args) == 1 and not node.keywords):
                continue
            func = node.func
            named = (isinstance(func, ast.Name) and func.id == "log") or (
                isinstance(func, ast.Attribute) and func.attr == "log" and isinstance(func.value, ast.Name)
                and func.value.id in ("run", "run_dir"))
            if named and isinstance(node.args[0], (ast.JoinedStr, ast.Constant, ast.BinOp, ast.IfExp)):
                calls.append((file.name, node.lineno, node.args[0]))
    return calls


def test_every_line_the_trainer_logs_is_said_in_chinese():
    calls = log_calls()
    assert sum(file == "loop.py" for file, _, _ in calls) >= 10  # the renderer still finds the trainer's lines
    untold = []
    for file, line, node in calls:
        if file in NOT_SAID:
            continue
        for text in rendered(node):
            said = LOG.say(text)
            if said is None or english_left(said):
                untold.append(f"minimind/training/{file}:{line}: {text!r} -> {said!r}")
    assert not untold, ("add a Said(...) for each to webapp/log_zh.py's LOG:\n" + "\n".join(untold))
    # a line logged through another's words: the size a run chose
    choice = SizeChoice("nano", 1_234_567, 25_000_000.0)
    assert LOG.say(choice.describe()) is not None


def test_log_lines_keep_their_time_and_unknown_lines_stay_as_written():
    assert log_text_zh("2026-01-01 10:00:00 eval step 40: loss 3.512 ppl 33.5 bpc 5.1") == \
        "2026-01-01 10:00:00 第 40 步评估：损失 3.512 困惑度 33.5 BPC 5.1"
    assert log_text_zh("2026-01-01 10:00:00 saved step-40") == "2026-01-01 10:00:00 已保存 step-40"
    assert log_line_zh("Traceback (most recent call last):") == "Traceback (most recent call last):"
    assert log_line_zh("finished: 600 steps in 75s of wall time in all, 21s of it in the training loop (this "
                       "process resumed at step 581)") == "完成：600 步，墙钟时间共 75 秒，其中训练循环 21 秒（本进程从第 581 步继续）"
    # lines of runs from before the trainer's current words
    assert log_line_zh("speed probe: 0.25s/step -> 120 steps in 30s") == "速度探测：每步 0.25 秒 → 30 秒内 120 步"
    assert log_line_zh("finished: 120 steps in 31s") == "完成：120 步，用时 31 秒"


def test_the_tables_are_tables():
    """Each entry's Chinese names only the parts its pattern captures (a typo fails at once)."""
    for table in (ERRORS, LOG, errors_zh.REASONS, errors_zh.POSITIONS, errors_zh.MODE_KIND):
        for entry in table:
            if isinstance(entry.zh, str):
                names = set(re.findall(r"(?<!\{)\{(\w+)\}", entry.zh))
                assert names <= set(entry.pattern.groupindex), (entry.pattern.pattern, names)


def test_a_runs_memory_need_is_said_in_chinese():
    from minimind.training.memory import MemoryPlan

    plan = MemoryPlan(device="cpu", parameters=1, trainable=1, weights=2**30, gradients=2**29, optimizer=2**29,
                      activations=2**30, frozen_copies=0, available=8 * 2**30, loading=2**28, process=2**28)
    said = errors_zh.memory_zh(plan.describe())
    assert said == "约 3.5 GB（权重 1.0、梯度和优化器 1.0、激活 1.0、加载与进程 0.5 GB），这台机器的 CPU 上可用 8.0 GB", said
    assert LOG.say("memory: this run needs " + plan.describe()).startswith("内存：本次训练需要约 3.5 GB")
    hints = "QLoRA (a 4-bit base) or a smaller batch or sequence length"
    needs = error_zh(f"this run needs {plan.describe()}, even with gradient checkpointing: it would not fit. Try "
                     f"{hints} (MINIMIND_SKIP_MEMORY_CHECK=1 starts it anyway)")
    assert "QLoRA（4 位基础模型），或更小的批或序列长度" in needs and not english_left(needs), needs


def test_every_built_in_reward_has_chinese_words():
    """The GRPO rewards' descriptions and parameters (the library's list) have their Chinese in grpo.REWARDS_ZH:
    a reward added to the library without it fails here."""
    from minimind.training.rewards import describe_rewards

    wanted = [kind["name"] for kind in describe_rewards()]
    wanted += [(kind["name"], param["name"]) for kind in describe_rewards() for param in kind["params"]]
    assert [key for key in wanted if key not in grpo.REWARDS_ZH] == []
