"""A run's log lines (train.log, as the trainer writes them) in Chinese, for the zh page.

The trainer writes its log in English for every face (the CLI prints it as it is); the Train tab's
log on a zh request passes each line through `log_line_zh`: the first entry of LOG whose pattern
matches the whole line (after its time) gives its Chinese; a line no entry knows is shown as
written. To word a new line: add a `Said(english_regex, chinese_template)` below (see errors_zh);
tests/studio/test_errors_zh.py renders each `log(f"...")` of minimind/training/loop.py with sample
values and checks that an entry answers it.
"""

from __future__ import annotations

import re

from .errors_zh import Said, Table, device_zh, error_zh, memory_zh, words

METRICS = {  # metrics.jsonl's figures, as the log, the facts and the plots name them
    "loss": "损失", "ppl": "困惑度", "bpc": "BPC", "accuracy": "准确率", "reward_margin": "奖励差值", "kl": "KL",
    "ce": "交叉熵", "reward": "奖励", "answer_tokens": "回答词元数", "macro_f1": "宏平均 F1",
    "val_loss": "验证损失", "val_accuracy": "验证准确率", "val_reward_margin": "验证奖励差值", "val_kl": "验证 KL",
    "val_reward": "验证奖励", "val_macro_f1": "验证宏平均 F1", "val_ppl": "验证困惑度", "val_bpc": "验证 BPC",
    "val_answer_tokens": "验证回答词元数",
}


def metric_zh(name: str) -> str:
    """A metric's Chinese name; a reward's own figure (reward_<name>) keeps the reward's name."""
    if name in METRICS:
        return METRICS[name]
    for prefix in ("val_reward_", "reward_"):
        if name.startswith(prefix):
            return f"{METRICS[prefix[:-1]]}·{name[len(prefix):]}"
    return name


def figures_zh(text: str) -> str:
    """"loss 3.5 ppl 33.1" -> "损失 3.5 困惑度 33.1" (each name followed by its value)."""
    parts = text.split(" ")
    return " ".join(metric_zh(p) if i % 2 == 0 else p for i, p in enumerate(parts))


SKIPPED = {"evaluation": "评估", "save": "保存", "evaluation and save": "评估和保存"}  # loop.py's skipped ones
SOURCES = {"the timed sizes": "各规模的计时", "an earlier run of this shape on this machine": "本机上同样形状的一次早先训练"}

LOG = Table([
    # minimind/training/loop.py
    Said(r"CPU memory: freed blocks up to (?P<mb>\d+) MB stay in the process \(glibc mmap/trim thresholds\)",
         "CPU 内存：不超过 {mb} MB 的已释放内存块留在进程内（glibc mmap/trim 阈值）"),
    Said(r"resumed from (?P<checkpoint>\S+) \(step (?P<step>\d+)\)", "从 {checkpoint} 继续（第 {step} 步）"),
    Said(r"no complete checkpoint yet: starting from step 0", "还没有完整的检查点：从第 0 步开始"),
    Said(r"evaluations and checkpoints hold a moving average of the weights \(optim\.ema (?P<decay>\S+)\) from "
         r"step (?P<step>[\d,]+) on",
         "从第 {step} 步起，评估和检查点使用权重的滑动平均（optim.ema {decay}）"),
    Said(r"(?P<checkpoint>\S+) holds no weight average: the average starts from its weights",
         "{checkpoint} 没有权重的滑动平均：平均从它的权重开始"),
    Said(r"planned from (?P<source>.+?): (?P<s>[\d.]+)s/step -> (?P<n>\d+) steps in (?P<t>\d+)s",
         "按{source}规划：每步 {s} 秒 → {t} 秒内 {n} 步", source=words(SOURCES)),
    Said(r"the first step is timed to plan the run", "先为第一步计时，再规划训练"),
    Said(r"(?P<mode>\w+): (?P<params>[\d,]+) parameters \((?P<trainable>[\d,]+) trainable\) on (?P<device>.+?); "
         r"(?P<train>[\d,]+) train rows, (?P<val>[\d,]+) validation rows; (?:(?P<steps>\d+) )?steps of "
         r"(?:(?P<rows>\d+) rows x (?P<seq>\d+) tokens|(?P<prompts>\d+) prompts x (?P<group>\d+) answers)",
         lambda v: f"{v['mode']}：{v['params']} 个参数（{v['trainable']} 个可训练），运行于 {device_zh(v['device'])}；"
                   f"训练 {v['train']} 行，验证 {v['val']} 行；"
                   + (f"{v['steps']} 步，" if v["steps"] else "")
                   + (f"每步 {v['rows']} 行 × {v['seq']} 个词元" if v["rows"]
                      else f"每步 {v['prompts']} 个提示 × {v['group']} 个回答")),
    Said(r"eval step (?P<step>\d+): (?P<figures>.*)", "第 {step} 步评估：{figures}", figures=figures_zh),
    Said(r"saved (?P<checkpoint>step-\d+)", "已保存 {checkpoint}"),
    Said(r"step (?P<step>\d+): non-finite loss or gradient, step skipped \((?P<n>\d+) in a row\)",
         "第 {step} 步：损失或梯度不是有限值，已跳过这一步（连续 {n} 次）"),
    Said(r"first step took (?P<s>[\d.]+)s -> (?P<n>\d+) steps planned in (?P<t>\d+)s",
         "第一步用时 {s} 秒 → {t} 秒内规划 {n} 步"),
    Said(r"measured (?P<s>[\d.]+)s/step: run re-sized to (?P<n>\d+) steps to end within (?P<t>\d+)s "
         r"\((?P<left>\d+)s left\)", "实测每步 {s} 秒：训练调整为 {n} 步，在 {t} 秒内结束（还剩 {left} 秒）"),
    Said(r"the (?P<what>.+?) due at step (?P<step>\d+) skipped: it would leave no time for another step",
         "第 {step} 步该做的{what}已跳过：做了就没有时间再训练一步", what=lambda w: SKIPPED.get(w, w)),
    Said(r"GPU slice spent at step (?P<step>\d+) of (?P<n>\d+); the next slice resumes here",
         "GPU 时间片在第 {step}/{n} 步用完；下一片从这里继续"),
    Said(r"finished: (?P<n>\d+) steps in (?P<wall>\d+)s of wall time \((?P<loop>\d+)s of it in the training loop, "
         r"the rest loading and preparing\)", "完成：{n} 步，墙钟时间 {wall} 秒（其中训练循环 {loop} 秒，其余是加载和准备）"),
    Said(r"finished: (?P<n>\d+) steps in (?P<wall>\d+)s of wall time in all, (?P<loop>\d+)s of it in the training "
         r"loop \(this process resumed at step (?P<k>\d+)\)",
         "完成：{n} 步，墙钟时间共 {wall} 秒，其中训练循环 {loop} 秒（本进程从第 {k} 步继续）"),
    Said(r"finished: (?P<n>\d+) steps in (?P<s>\d+)s", "完成：{n} 步，用时 {s} 秒"),  # runs before the wall time
    Said(r"final evaluation on all (?P<rows>[\d,]+) validation rows: (?P<figures>.*?); confusion matrix in "
         r"(?P<file>\S+)",
         "在全部 {rows} 行验证数据上的最终评估：{figures}；混淆矩阵在 {file}", figures=figures_zh),
    Said(r"other processes keep (?P<o>[\d.]+) of (?P<n>\d+) cores busy: a step took (?P<a>[\d.e-]+)s on (?P<f>\d+) "
         r"of (?P<m>\d+) threads, (?P<b>[\d.e-]+)s on all; training on (?P<t>\d+)",
         "其他进程占着 {n} 个核心中的 {o} 个：一步在 {m} 个线程中的 {f} 个上用时 {a} 秒，在全部线程上用时 {b} 秒；"
         "用 {t} 个线程训练"),
    Said(r"the cores are free again: training on (?P<t>\d+) threads", "核心又空出来了：用 {t} 个线程训练"),
    Said(r"speed probe: (?P<s>[\d.]+)s/step -> (?P<n>\d+) steps in (?P<t>\d+)s",  # runs before "planned from"
         "速度探测：每步 {s} 秒 → {t} 秒内 {n} 步"),
    # minimind/training: compiling, setup, sizing, memory, slices
    Said(r"compiling (?P<n>\d+) decoder layers \(torch\.compile\)", "编译 {n} 个解码器层（torch.compile）"),
    Said(r"compiled layers kept: (?P<c>[\d.]+)s a step against (?P<e>[\d.]+)s eager",
         "保留编译后的层：每步 {c} 秒，未编译时 {e} 秒"),
    Said(r"compiled layers dropped: (?P<c>[\d.]+)s a step against (?P<e>[\d.]+)s eager \(less than (?P<g>\d+) % "
         r"faster\); running eager", "放弃编译后的层：每步 {c} 秒，未编译时 {e} 秒（快不到 {g} %）；改为不编译运行"),
    Said(r"optimizer (?P<name>\w+): a Muon update would cost (?P<share>\d+) % of a step's FLOPs "
         r"\(Muon at (?P<max>\d+) % or less\)",
         "优化器 {name}：一次 Muon 更新约为一步计算量（FLOPs）的 {share} %（不超过 {max} % 时用 Muon）"),
    Said(r"torch\.compile failed \((?P<why>.*)\); running eager", "torch.compile 失败（{why}）；改为不编译运行"),
    Said(r"compile: off \(each GPU slice is a fresh process, which would compile the model again\)",
         "编译：关闭（每个 GPU 时间片都是新进程，会重新编译模型）"),
    Said(r"model size (?P<preset>\w+): (?P<params>[\d.]+)M parameters for ~(?P<tokens>[\d.]+)M planned tokens "
         r"\((?P<ratio>[\d.]+) per parameter; the largest size with at least (?P<least>[\d.]+)\)",
         "模型规模 {preset}：{params}M 个参数，计划训练约 {tokens}M 个词元（每个参数 {ratio} 个；"
         "取每个参数至少 {least} 个词元的最大规模）"),
    Said(r"size probe: (?P<preset>\w+) timed (?P<a>[\d.]+)s/step, then (?P<b>[\d.]+)s/step: the machine's speed "
         r"changed while the sizes were timed, so they are timed again",
         "规模探测：{preset} 先测得每步 {a} 秒，又测得每步 {b} 秒：计时期间机器速度变了，因此重新计时"),
    Said(r"(?P<passes>[\d.]+) planned passes over the training split: residual dropout (?P<p>\S+) against "
         r"overfitting \(model\.overrides\.dropout sets it\)",
         "计划遍历训练集 {passes} 遍：残差 dropout 设为 {p} 以防过拟合（可用 model.overrides.dropout 设定）"),
    Said(r"batches hold texts of similar length \(less padding\)", "每批放长度相近的文本（填充更少）"),
    Said(r"batches are drawn at random: grouped by length, they would hold one class each",
         "每批随机抽取：按长度分组的话，每批只会有一个类别"),
    Said(r"training a (?P<n>\d+)-token tokenizer on the corpus", "在语料上训练一个 {n} 词元的分词器"),
    Said(r"tokenizer: (?P<n>\d+) tokens, (?P<cpt>[\d.]+) chars/token, byte-fallback share (?P<share>[\d.]+) %, "
         r"trained in (?P<s>[\d.]+)s", "分词器：{n} 个词元，每词元 {cpt} 个字符，字节回退占 {share} %，训练用时 {s} 秒"),
    Said(r"vocabulary: (?P<n>\d+) of the corpus's characters added as tokens \((?P<total>\d+) tokens\); "
         r"byte-fallback share (?P<before>[\d.]+) % -> (?P<after>[\d.]+) %, (?P<cpt0>[\d.]+) -> (?P<cpt1>[\d.]+) "
         r"chars/token", "词表：语料中的 {n} 个字符加为词元（共 {total} 个词元）；字节回退占比 {before} % → {after} %，"
                         "每词元字符数 {cpt0} → {cpt1}"),
    Said(r"memory: this run needs (?P<what>.+)", "内存：本次训练需要{what}", what=memory_zh),
    Said(r"gradient checkpointing on: without it this run would need (?P<what>.+)",
         "已开启梯度检查点：不开启的话本次训练需要{what}", what=memory_zh),
    Said(r"GPU slice (?P<k>\d+) was aborted \((?P<why>.+)\); resuming from the last save",
         "第 {k} 个 GPU 时间片中止（{why}）；从上次保存处继续"),
    Said(r"FAILED: (?P<error>.+)", "失败：{error}", error=lambda e: error_zh(e, lead=None)),
])


def log_line_zh(text: str) -> str:
    """One log line's message (its time cut off) in Chinese, or as written when LOG does not know it."""
    return LOG.say(text) or text


TIME = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d ")


def log_text_zh(line: str) -> str:
    """A whole train.log line ("<date> <time> <message>"): the time kept, the message in Chinese."""
    found = TIME.match(line)
    return line[:found.end()] + log_line_zh(line[found.end():]) if found else log_line_zh(line)
