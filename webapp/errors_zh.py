"""The page's error messages in Chinese, for a visitor whose browser asks for Chinese.

Errors keep their English message (the CLI, the API and the logs say it as raised); what the zh
page shows passes through `error_zh`: the first entry of ERRORS whose English pattern matches the
whole message gives its Chinese, built from the parts the pattern captured (a part may go through
a table of its own: a corpus error's position and reason, a field's name, a corpus kind). A
message no entry knows is shown after a Chinese lead-in, so nothing is blank or silently English.

An entry is `Said(english_regex, chinese_template, part=translator, ...)`: the template names the
regex's groups ({name}); a part's translator returns its Chinese, or None when it does not know it
(the entry then does not apply). tests/studio/test_errors_zh.py builds each message with the code
that raises it and checks that its entry (and no lead-in) answers it.
"""

from __future__ import annotations

import re
from collections.abc import Callable

LEAD = "出错了："  # before a message no entry translates
NOTE = "注意："    # before a warning no entry translates


class Said:
    """One English message (a regex matched against the whole text) and its Chinese."""

    def __init__(self, english: str, zh: str | Callable[[dict], str], **parts: Callable[[str], str | None]):
        self.pattern = re.compile(english, re.DOTALL)
        self.zh = zh
        self.parts = parts

    def say(self, text: str) -> str | None:
        found = self.pattern.fullmatch(text)
        if not found:
            return None
        values = {}
        for name, value in found.groupdict().items():
            if value is not None and name in self.parts:
                value = self.parts[name](value)
                if value is None:
                    return None
            values[name] = value if value is not None else ""
        return self.zh(values) if callable(self.zh) else self.zh.format(**values)


class Table(list):
    """Entries tried in order; `say` gives the first one's Chinese, or None."""

    def say(self, text: str) -> str | None:
        for entry in self:
            said = entry.say(text)
            if said is not None:
                return said
        return None


def words(table: dict[str, str], keep: bool = False) -> Callable[[str], str | None]:
    """A part translated word for word from `table`; unknown: kept as is (`keep`) or None."""
    return lambda text: table.get(text, text if keep else None)


def either(table: Table) -> Callable[[str], str]:
    """A part translated by `table` when it knows it, else kept as written."""
    return lambda text: table.say(text) or text


# ---- words the messages share -------------------------------------------------------------------

KINDS = {"text": "纯文本", "plain text": "纯文本", "chat": "对话", "instruction": "指令", "preference": "偏好",
         "prompts": "提示", "prompt-only": "仅含提示", "labelled": "带标签", "auto": "自动"}
STATES = {"queued": "排队中", "running": "训练中", "stopping": "正在停止", "stopped": "已停止",
          "finished": "已完成", "failed": "失败", "paused": "在 GPU 时间片之间"}
FIELDS = {  # the names a form's number checks give a field (form_number, train_form, grpo)
    "the tokenizer's vocabulary": "分词器的词表大小", "minutes": "分钟数", "processes": "进程数", "steps": "步数",
    "batch size": "批大小", "gradient accumulation": "梯度累积", "evaluate every": "评估间隔",
    "learning rate": "学习率", "LoRA rank": "LoRA 秩", "LoRA alpha": "LoRA alpha", "sequence length": "序列长度",
    "beta": "DPO beta", "KL weight": "KL 权重", "temperature": "温度", "group size": "组大小",
    "max new tokens": "最多生成词元数", "KL beta": "KL beta",
    # sampling parameters (minimind.sampling_params)
    "top_p": "Top-p", "top_k": "Top-k", "max_new_tokens": "最多生成词元数", "repetition_penalty": "重复惩罚",
    "seed": "随机种子",
}
NUMBER_KINDS = {"a number": "数", "a whole number": "整数"}

_MEMORY_PARTS = {"weights": "权重", "gradients and optimizer": "梯度和优化器", "activations": "激活",
                 "frozen reference/teacher": "冻结的参考/教师模型", "loading and the process": "加载与进程"}


def memory_zh(text: str) -> str:
    """A run's memory need as minimind.training.memory words it ("about 1.2 GB (weights 0.1, ... GB) of
    the 8.0 GB free on this cpu") in Chinese; as written when it is worded otherwise."""
    found = re.fullmatch(r"about (?P<total>[\d.,]+) GB \((?P<parts>.+) GB\)(?: of the (?P<free>[\d.,]+) GB free on "
                         r"this (?P<device>\w+))?", str(text))
    if not found:
        return text
    parts = []
    for part in found["parts"].split(", "):
        name, _, size = part.rpartition(" ")
        if name not in _MEMORY_PARTS:
            return text
        parts.append(f"{_MEMORY_PARTS[name]} {size}")
    free = (f"，这台机器的 {'CPU' if found['device'] == 'cpu' else 'GPU'} 上可用 {found['free']} GB"
            if found["free"] else "")
    return f"约 {found['total']} GB（{'、'.join(parts)} GB）{free}"


def device_zh(text: str) -> str:
    """A device as minimind describes it ("CPU (2 threads, bf16), bf16", "NVIDIA H100, fp16 with loss
    scaling") in Chinese words; names stay as they are."""
    text = re.sub(r"\b(\d+) threads?\b", r"\1 线程", str(text))
    return text.replace("fp16 with loss scaling", "fp16（损失缩放）")

POSITIONS = Table([  # where in a corpus file (minimind.data: CorpusError's position, a skipped record's)
    Said(r"line (?P<n>[\d,]+)", "第 {n} 行"),
    Said(r"record (?P<n>[\d,]+) \(line (?P<line>[\d,]+)\)", "第 {n} 条记录（第 {line} 行）"),
    Said(r"byte (?P<n>[\d,]+)", "第 {n} 字节"),
    Said(r"byte (?P<n>[\d,]+) \(line (?P<line>[\d,]+)\)", "第 {n} 字节（第 {line} 行）"),
    Said(r"row (?P<n>[\d,]+)", "第 {n} 行数据"),
    Said(r"row (?P<n>[\d,]+) \(line (?P<line>[\d,]+)\)", "第 {n} 行数据（文件第 {line} 行）"),
    Said(r"row group (?P<g>[\d,]+) \(after row (?P<n>[\d,]+)\)", "第 {g} 个行组（第 {n} 行数据之后）"),
    Said("file name", "文件名"), Said("whole file", "整个文件"), Said(r"header \(line 1\)", "表头（第 1 行）"),
    Said("schema", "表结构"), Said("file footer", "文件尾"),
])
_POSITION = (r"(?:line|record|byte|row|row group) [\d,]+(?: \([^)]*\))?|file name|whole file|header \(line 1\)|schema|"
             r"file footer")

FOUND = Table([  # minimind.data.validate.describe: what a record held
    Said(r"an object with fields \[(?P<keys>.*)\]", "含字段 [{keys}] 的对象"),
    Said(r"a string (?P<s>.+)", "字符串 {s}"),
    Said(r"a list of (?P<n>[\d,]+) items", "含 {n} 项的列表"),
    Said(r"a number \((?P<v>.*)\)", "数字（{v}）"),
    Said(r"a boolean \((?P<v>.*)\)", "布尔值（{v}）"),
    Said("null", "null"), Said("an object", "对象"), Said("a list", "列表"),
])

JSON_SAYS = {"Expecting value": "缺少值", "Expecting ',' delimiter": "缺少逗号",
             "Expecting ':' delimiter": "缺少冒号", "Expecting property name enclosed in double quotes":
             "属性名应放在双引号中", "Unterminated string starting at": "字符串没有结束", "Extra data": "多余的数据",
             "Invalid control character at": "无效的控制字符"}

EXPECTED_FIELDS = Table([  # minimind.data.kinds.expected_fields
    Said(r"a text field \((?P<text>'text' or 'content'|'[^']*'); name another with text_field / --text-field\), "
         r"'messages' or 'conversations' \(chat\), 'instruction' \+ 'output' \(instruction\), 'prompt' \+ 'chosen' "
         r"\+ 'rejected' \(preference\), 'prompt' alone \(prompts, for GRPO\), or text \+ 'label' \(labelled\)",
         "文本字段（{text}；其他名称用“文本字段”指定）、'messages' 或 'conversations'（对话）、"
         "'instruction' + 'output'（指令）、'prompt' + 'chosen' + 'rejected'（偏好）、单独的 'prompt'"
         "（提示，用于 GRPO），或文本 + 'label'（带标签）",
         text=lambda s: "'text' 或 'content'" if s == "'text' or 'content'" else s),
])

BINARY_LOOKS = {"a Windows program": "Windows 程序", "a PNG image": "PNG 图片", "a JPEG image": "JPEG 图片",
                "a GIF image": "GIF 图片", "a PDF document": "PDF 文档", "a ZIP archive": "ZIP 压缩包",
                "a gzip archive": "gzip 压缩包"}

REASONS = Table([  # why a corpus file (or one record of it) cannot be used: minimind.data
    Said(r"malformed JSON \((?P<why>.+?) at column (?P<col>\d+)\): found (?P<found>.+); "
         r"expected one JSON object per line",
         "JSON 格式错误（第 {col} 列，{why}）：读到 {found}；每行应是一个 JSON 对象", why=words(JSON_SAYS, keep=True)),
    Said(r"malformed JSON \((?P<why>.+?)\): found (?P<found>.+); expected a valid JSON array of records",
         "JSON 格式错误（{why}）：读到 {found}；应为有效的 JSON 记录数组", why=words(JSON_SAYS, keep=True)),
    Said(r"JSON nested too deeply; expected (?:a )?flat records?", "JSON 嵌套太深；应为扁平的记录"),
    Said(r"the file is empty \(0 bytes\); expected text or records", "文件是空的（0 字节）；应包含文本或记录"),
    Said(r"the file holds only whitespace; expected text or records", "文件里只有空白；应包含文本或记录"),
    Said(r"this is binary data \(it looks like (?P<what>.+)\); expected UTF-8 text",
         "这是二进制数据（看起来像 {what}）；应为 UTF-8 文本", what=words(BINARY_LOOKS, keep=True)),
    Said(r"found a NUL byte: this is binary data, not text; expected UTF-8 text",
         "发现 NUL 字节：这是二进制数据，不是文本；应为 UTF-8 文本"),
    Said(r"no such file", "没有这个文件"),
    Said(r"this is a folder; expected a file", "这是一个文件夹；应为文件"),
    Said(r"unsupported file type (?P<suffix>'[^']*'); expected one of (?P<formats>.+)",
         "不支持的文件类型 {suffix}；应为 {formats} 之一"),
    Said(r"mixed kinds: found an? (?P<kind>.+?) record \((?P<found>.+)\), but this file's first record is "
         r"(?P<first>.+?); expected one kind per file",
         "类型混杂：读到一条{kind}记录（{found}），而此文件的第一条记录是{first}；一个文件应只有一种类型",
         kind=words(KINDS), found=either(FOUND), first=words(KINDS)),
    Said(r"this file holds (?P<kind>.+?) records but (?P<first>.+?) holds (?P<other>.+?); expected one kind per "
         r"corpus \(prepare them separately, or set the kind\)",
         "此文件是{kind}记录，而 {first} 是{other}记录；一份语料应只有一种类型（请分开准备，或设定类型）",
         kind=words(KINDS), other=words(KINDS)),
    Said(r"found (?P<found>.+?); expected (?P<expected>a text field \(.+)",
         "读到{found}；应有{expected}", found=either(FOUND), expected=EXPECTED_FIELDS.say),
    Said(r"found (?P<found>.+?); expected a JSON object \(one record\)",
         "读到{found}；应为一个 JSON 对象（一条记录）", found=either(FOUND)),
    Said(r"no text-like column: found columns \[(?P<columns>.*)\]; expected (?P<expected>.+)",
         "没有像文本的列：读到列 [{columns}]；应有{expected}", expected=EXPECTED_FIELDS.say),
    Said(r"missing field (?P<field>'[^']*'): found (?P<found>.+?); expected a (?P=field) field holding the text",
         "缺少字段 {field}：读到{found}；应有保存文本的 {field} 字段", found=either(FOUND)),
    Said(r"missing field 'messages': found (?P<found>.+?); expected 'messages' or 'conversations' holding a list "
         r"of \{role, content\}",
         "缺少字段 'messages'：读到{found}；应有 'messages' 或 'conversations'，其中是 {{role, content}} 列表",
         found=either(FOUND)),
    Said(r"missing field (?P<field>'[^']*'): found (?P<found>.+?); expected 'prompt', 'chosen' and 'rejected' "
         r"\(a request, the preferred answer and the rejected one\)",
         "缺少字段 {field}：读到{found}；应有 'prompt'、'chosen' 和 'rejected'（请求、较好的回答和被拒绝的回答）",
         found=either(FOUND)),
    Said(r"field (?P<field>'[^']*') is (?P<found>.+?); expected a string",
         "字段 {field} 是{found}；应为字符串", found=either(FOUND)),
    Said(r"'chosen' and 'rejected' are identical \((?P<text>.+)\); expected two different answers, the preferred "
         r"one in 'chosen'",
         "'chosen' 与 'rejected' 相同（{text}）；应为两个不同的回答，较好的放在 'chosen'"),
    Said(r"found one JSON object whose field (?P<field>'[^']*') holds the records; expected an array of records "
         r"at the top level — save that list on its own",
         "读到一个 JSON 对象，它的字段 {field} 里是记录；顶层应为记录数组——请把这个列表单独保存"),
    Said(r"found (?P<found>.+?) at the top level; expected an array of records \[\{\.\.\.\}, \{\.\.\.\}\]",
         "顶层读到{found}；应为记录数组 [{{...}}, {{...}}]", found=either(FOUND)),
    Said(r"no usable documents in this file \(every record was empty or skipped\); expected at least one",
         "此文件没有可用的文档（每条记录都是空的或被跳过）；至少应有一条"),
    Said(r"a (?P<suffix>\.\w+) file holds plain text; kind (?P<kind>'\w+') needs records \(\.jsonl, \.json, \.csv "
         r"or \.parquet; kind 'prompts' also reads one prompt a line\)",
         "{suffix} 文件是纯文本；类型 {kind} 需要记录（.jsonl、.json、.csv 或 .parquet；类型 'prompts' 也可以每行读一个提示）"),
    Said(r"no files given; expected at least one corpus file", "没有给出文件；至少需要一个语料文件"),
    Said(r"(?P<reason>.+) — that is more than (?P<n>[\d,]+) bad records \(the lenient limit\), so the corpus is "
         r"refused \(the first were at (?P<first>.+)\)",
         "{reason}——错误记录超过 {n} 条（宽松模式的上限），语料被拒绝（最早的几条在 {first}）",
         reason=lambda text: REASONS.say(text),
         first=lambda text: re.sub(r"\bline ([\d,]+)", r"第 \1 行", text)),
])

SAVE_EXAMPLES = {"the Tang poem prompts sample": "内置的唐诗提示示例", "a CSV with text and label columns":
                 "含 text 和 label 两列的 CSV"}


def _save_hint(text: str) -> str | None:
    """webapp.tabs.train_form: ": save a <kind> corpus on the Corpus tab (e.g. ...)"."""
    said = Said(r": save an? (?P<kind>\w+) corpus on the Corpus tab(?: \(e\.g\. (?P<example>.+)\))?",
                lambda v: f"：请在“语料”页保存一份{v['kind']}语料" + (f"（例如{v['example']}）" if v["example"] else ""),
                kind=words(KINDS), example=words(SAVE_EXAMPLES, keep=True))
    return "" if not text else said.say(text)


_CORPUS = r"(?P<corpus>corpus '[^']*'|this corpus)"


def _corpus(text: str) -> str:
    return "这份语料" if text == "this corpus" else "语料 " + text[len("corpus "):] + " "


MODE_KIND = Table([  # minimind.training.config.check_mode_kind (+ the page's hint where to get such a corpus)
    Said(r"mode dpo learns from preference pairs \(prompt, chosen, rejected\); " + _CORPUS
         + r" is (?P<kind>\w+)(?P<save>.*)",
         "dpo 模式从偏好对（prompt、chosen、rejected）中学习；{corpus}是{kind}语料{save}",
         corpus=_corpus, kind=words(KINDS), save=_save_hint),
    Said(r"mode grpo learns from prompts \(the model writes the answers\); " + _CORPUS
         + r" is (?P<kind>\w+)(?P<save>.*)",
         "grpo 模式从提示中学习（回答由模型自己写）；{corpus}是{kind}语料{save}",
         corpus=_corpus, kind=words(KINDS), save=_save_hint),
    Said(_CORPUS + r" holds preference pairs: train on it with mode dpo \(not (?P<mode>\w+)\)",
         "{corpus}是偏好对：请用 dpo 模式训练（而不是 {mode}）", corpus=_corpus),
    Said(_CORPUS + r" holds prompts without answers: train on it with mode grpo \(not (?P<mode>\w+)\)",
         "{corpus}是没有回答的提示：请用 grpo 模式训练（而不是 {mode}）", corpus=_corpus),
    Said(r"a classifier learns from labelled text \(a text field and a label field: label, class, category, \.\.\. "
         r"or data\.label_field\); " + _CORPUS + r" is (?P<kind>\w+)(?P<save>.*)",
         "分类器从带标签的文本中学习（一个文本字段和一个标签字段：label、class、category 等）；{corpus}是{kind}语料{save}",
         corpus=_corpus, kind=words(KINDS), save=_save_hint),
    Said(_CORPUS + r" holds labelled text: train a classifier on it \(task classify, with mode sft, lora or qlora\), "
         r"not mode (?P<mode>\w+) alone; to train on its text only, read it as plain text \(data\.kind text\)",
         "{corpus}是带标签的文本：请用它训练分类器（任务选“分类”，模式 sft、lora 或 qlora），而不是单独的 {mode} 模式；"
         "若只想训练它的文本，请按纯文本读取（类型 text）", corpus=_corpus),
])


def _number_rule(v: dict) -> str:
    """train_form._number: "between a and b" or "above a"."""
    return f"{v['what']}必须是" + (f" {v['low']} 到 {v['high']} 之间的数" if v["low"] else f"大于 {v['above']} 的数") \
        + f"（收到 {v['got']}）"


ERRORS = Table([
    # the page's own (webapp: WorkspaceError, gr.Error, the bounded work's limits)
    Said(r"choose a model", "请选择一个模型"),
    Said(r"(?P<id>.+) is not one of the shipped models, imported models or finished runs",
         "{id} 不是内置模型、已导入的模型或已完成的训练"),
    Said(r"(?P<what>.+?) must be (?P<kind>a number|a whole number) between (?P<low>\S+) and (?P<high>\S+) "
         r"\(got (?P<got>.*)\)",
         "{what}必须是 {low} 到 {high} 之间的{kind}（收到 {got}）", what=words(FIELDS), kind=words(NUMBER_KINDS)),
    Said(r"(?P<what>.+?) must be a number (?:between (?P<low>\S+) and (?P<high>\S+)|above (?P<above>\S+)) "
         r"\(got (?P<got>.*)\)", _number_rule, what=words(FIELDS)),
    Said(r"(?P<what>.+?) must be a whole number \(got (?P<got>.*)\)", "{what}必须是整数（收到 {got}）",
         what=words(FIELDS)),
    Said(r"(?P<what>.+?) must be one of the page's choices \(got (?P<got>.*)\)",
         "{what}必须是页面提供的选项之一（收到 {got}）",
         what=words({"start from": "起点模型", "mode": "模式", "corpus": "语料", "precision": "精度", "weights": "训练的权重",
                     "teacher": "教师模型", "stop after": "训练长度", "parallelism": "并行方式", "task": "任务",
                     "class weights": "类别权重"})),
    Said(r"choose a corpus \(save one on the Corpus tab first\)", "请选择语料（先在“语料”页保存一份）"),
    Said(r"choose what to start from: a new model, the shipped model or a finished run",
         "请选择起点模型：新模型、内置模型或已完成的训练"),
    Said(r"type a Hugging Face model id \(or a folder\) beside 'Start from' and press Import first; the imported "
         r"model then becomes the starting point",
         "请先在“起点模型”旁输入 Hugging Face 模型 ID（或文件夹）并按“导入”；导入的模型随后成为起点"),
    Said(r"a classifier fine-tunes an existing model: start from the shipped model or a finished run",
         "分类器在已有模型上微调：请从内置模型或已完成的训练开始"),
    Said(r"(?P<mode>\w+) fine-tunes an existing model: start from the shipped model or a finished run, or choose "
         r"pretrain", "{mode} 用于微调已有模型：请从内置模型或已完成的训练开始，或选择 pretrain"),
    Said(r"(?P<adapter>\w+) weights adapt an existing model: start the student from the shipped model or a "
         r"finished run, or train full weights for a new student",
         "{adapter} 权重用于适配已有模型：请让学生模型从内置模型或已完成的训练开始，或为新的学生模型训练完整权重"),
    Said(r"choose a teacher: the shipped model or a finished full-model run",
         "请选择教师模型：内置模型或已完成的完整模型训练"),
    Said(r"a classifier trains with mode sft \(every weight\), lora or qlora \(got (?P<mode>\w+)\)",
         "分类器用 sft（全部权重）、lora 或 qlora 模式训练（收到 {mode}）"),
    Said(r"adding the corpus's characters to the vocabulary is for fine-tuning an existing model \(modes pretrain, "
         r"sft, lora, qlora\); a new model learns its own tokenizer",
         "“把语料的字符加入词表”用于微调已有模型（pretrain、sft、lora、qlora 模式）；新模型会学习自己的分词器"),
    Said(r"tick at least one reward: the run makes the answers its rewards score well more likely",
         "请至少勾选一项奖励：训练会让得分高的回答更可能出现"),
    Said(r"choose a run", "请选择一个训练"),
    Said(r"(?P<run>\S+) is (?P<state>\w+); only a stopped or failed run can be resumed",
         "{run} {state}；只有已停止或失败的训练可以继续", state=words(STATES)),
    Said(r"choose one or more runs to compare", "请选择一个或多个要对比的训练"),
    Said(r"compare at most (?P<n>\d+) runs at a time \(got (?P<got>\d+)\)", "一次最多对比 {n} 个训练（收到 {got} 个）"),
    Said(r"no run named (?P<name>.+) in this workspace: choose runs from the list",
         "此工作区没有名为 {name} 的训练：请从列表中选择"),
    Said(r"no run named (?P<name>.+)", "没有名为 {name} 的训练"),
    Said(r"upload at least one file or pick a sample \(an upload counts once the file shows its size\)",
         "请至少上传一个文件，或选择一个内置示例（文件显示出大小后才算上传完成）"),
    Said(r"inspect a corpus first, then save it", "请先检查语料，再保存"),
    Said(r"inspect the corpus again, then save it", "请重新检查语料，再保存"),
    Said(r"unknown sample (?P<sample>.+)", "没有这个示例：{sample}"),
    Said(r"the corpus name must be text \(got (?P<got>.*)\)", "语料名称必须是文本（收到 {got}）"),
    Said(r"(?P<name>.+) is not a usable name: use letters, digits, '\.', '-' or '_'",
         "{name} 不能用作名称：请只用字母、数字、'.'、'-' 或 '_'"),
    Said(r"(?P<file>.+?): file type (?P<suffix>\S+) is not accepted; upload one of (?P<types>.+)",
         "{file}：不接受 {suffix} 类型的文件；请上传 {types} 之一"),
    Said(r"(?P<file>.+?): (?P<mb>[\d.,]+) MB is over the upload limit of (?P<limit>[\d.,]+) MB",
         "{file}：{mb} MB 超过了 {limit} MB 的上传上限"),
    Said(r"no corpus named (?P<name>.+); save one on the Corpus tab first", "没有名为 {name} 的语料；请先在“语料”页保存一份"),
    Said(r"too many exports at once; try again in a second", "同时进行的导出太多；请稍后再试"),
    Said(r"that file was not uploaded to this server: upload it with the file box \(or by the API's upload route\) "
         r"and send what the upload returned",
         "这个文件不是上传到本服务器的：请用文件框（或 API 的上传接口）上传，再发送上传返回的内容"),
    Said(r"type a message first", "请先输入消息"),
    Said(r"nothing to regenerate yet", "还没有可以重新生成的回答"),
    Said(r"type a text to classify first", "请先输入要分类的文本"),
    Said(r"choose a classifier \(train one on a labelled corpus on the Train tab\)",
         "请选择一个分类器（在“训练”页用带标签的语料训练一个）"),
    Said(r"choose at least one format", "请至少选择一种格式"),
    Said(r"type a Hugging Face model id \(owner/name, e\.g\. (?P<example>\S+)\)(?P<folder> or a model folder on this "
         r"machine)?", lambda v: f"请输入 Hugging Face 模型 ID（所有者/名称，例如 {v['example']}）"
                             + ("或本机上的模型文件夹" if v["folder"] else "")),
    Said(r"(?P<source>.+) is not a Hugging Face model id \(owner/name\); this public page imports from the Hub only",
         "{source} 不是 Hugging Face 模型 ID（所有者/名称）；这个公开页面只从 Hub 导入"),
    Said(r"the server is busy with other visitors' work and could not start (?P<what>.+) within (?P<s>\S+) s; "
         r"try again in a minute", "服务器正忙于其他访客的任务，没能在 {s} 秒内开始{what}；请一分钟后再试",
         what=lambda w: WORK.get(w)),
    Said(r"(?P<what>.+) took longer than (?P<s>\S+) s and was stopped; ask for less \(fewer or smaller files, a "
         r"shorter sequence, a smaller batch\) or raise MINIMIND_WORK_SECONDS on the server",
         "{what}超过 {s} 秒，已被停止；请减少工作量（更少或更小的文件、更短的序列、更小的批），"
         "或在服务器上调高 MINIMIND_WORK_SECONDS", what=lambda w: WORK.get(w)),
    Said(r"(?P<what>.+) needed more than the (?P<mb>[\d,]+) MB of memory this server allows for it and was stopped; "
         r"ask for less \(a smaller batch or sequence length, fewer or smaller files\) or raise "
         r"MINIMIND_WORK_MEMORY_MB on the server",
         "{what}需要的内存超过服务器允许的 {mb} MB，已被停止；请减少工作量（更小的批或序列长度、更少或更小的文件），"
         "或在服务器上调高 MINIMIND_WORK_MEMORY_MB", what=lambda w: WORK.get(w)),
    # publishing an export (minimind.hub.publish, tabs/publish.py)
    Said(r"type the Hub repo to publish to \(owner/name, e\.g\. (?P<example>\S+)\)",
         "请输入要发布到的 Hub 仓库（所有者/名称，例如 {example}）"),
    Said(r"(?P<repo>.+) is not a Hugging Face repo id: use owner/name \(letters, digits, '-', '_' or '\.', at most "
         r"96 characters, no '--' or '\.\.'\), e\.g\. (?P<example>\S+)",
         "{repo} 不是 Hugging Face 仓库 ID：请用 所有者/名称（字母、数字、'-'、'_' 或 '.'，最多 96 个字符，不能有 '--' "
         "或 '..'），例如 {example}"),
    Said(r"(?P<name>.+): no such export folder", "{name}：没有这个导出文件夹"),
    Said(r"(?P<name>.+): not an export folder \(it needs a README\.md card and config\.json or a \.gguf file\): "
         r"export a model first and publish the folder of one format",
         "{name}：不是导出文件夹（需要 README.md 模型卡，以及 config.json 或 .gguf 文件）：请先导出模型，再发布其中一个格式的"
         "文件夹"),
    Said(r"publishing needs a Hugging Face token with write access \(from (?P<page>\S+)\): set HF_TOKEN in the "
         r"environment, or type it in the page's token field or at the terminal's prompt",
         "发布需要一个有写入权限的 Hugging Face 令牌（在 {page} 创建）：请在环境变量中设置 HF_TOKEN，或在页面的令牌框、"
         "终端提示中输入"),
    Said(r"this public page never publishes with its server's token: type your own Hugging Face token \(write "
         r"access, from (?P<page>\S+)\); it is used for this upload only",
         "这个公开页面从不用服务器的令牌发布：请输入你自己的 Hugging Face 令牌（写入权限，在 {page} 创建）；它只用于这次上传"),
    Said(r"(?P<repo>\S+): cannot publish: offline mode is on \(HF_HUB_OFFLINE=1\), so the Hugging Face Hub is not "
         r"contacted; unset HF_HUB_OFFLINE on a machine with a network and publish again",
         "{repo}：无法发布：离线模式已开启（HF_HUB_OFFLINE=1），不会连接 Hugging Face Hub；请在有网络的机器上取消 "
         "HF_HUB_OFFLINE 后再发布"),
    Said(r"(?P<repo>\S+): cannot publish: the connection to the Hugging Face Hub failed \((?P<kind>\w+)\); check "
         r"this machine's network \(and HF_ENDPOINT if set\), then publish again",
         "{repo}：无法发布：连接 Hugging Face Hub 失败（{kind}）；请检查本机的网络（以及设置了的 HF_ENDPOINT），再重新发布"),
    Said(r"(?P<repo>\S+): the Hub refused the token \(401: invalid or expired\); create a write token at "
         r"(?P<page>\S+) and publish again",
         "{repo}：Hub 拒绝了这个令牌（401：无效或已过期）；请在 {page} 创建一个写入令牌，再重新发布"),
    Said(r"(?P<repo>\S+): the token may not write there \(403\); use a token with write access to (?P<owner>.+), "
         r"or publish under your own name", "{repo}：这个令牌无权写入那里（403）；请使用对 {owner} 有写入权限的令牌，"
         "或发布到你自己的名下", owner=lambda owner: "该账户" if owner == "that account" else owner),
    Said(r"(?P<repo>\S+): the Hub reported a conflict \(409\): another upload to that repo is under way, or the name "
         r"is taken by a dataset or Space; wait and publish again, or pick another name",
         "{repo}：Hub 报告了冲突（409）：该仓库正有另一个上传，或这个名称已被数据集或 Space 占用；请稍后再发布，或换一个名称"),
    Said(r"(?P<repo>\S+): the Hub shows this token no such repo \(404\); check the owner's name and that the token "
         r"may write to it", "{repo}：Hub 对这个令牌显示没有这个仓库（404）；请检查所有者的名称，以及令牌能否写入它"),
    Said(r"(?P<repo>\S+): the Hub refused the upload \((?P<detail>.+)\)", "{repo}：Hub 拒绝了这次上传（{detail}）"),
    Said(r"(?P<repo>\S+): publishing failed \((?P<detail>.+)\)", "{repo}：发布失败（{detail}）"),
    Said(r"(?P<repo>\S+) already exists and is public: publishing there would make this export public; pick another "
         r"name, make that repo private on the Hub, or publish it as public",
         "{repo} 已存在且是公开的：发布到那里会让这个导出公开；请换一个名称、在 Hub 上把该仓库设为私有，或以公开方式发布"),
    Said(r"choose an export to publish \(export a model above first\)", "请选择要发布的导出（先在上面导出一个模型）"),
    Said(r"no export named (?P<name>.+): choose one from the list", "没有名为 {name} 的导出：请从列表中选择"),
    Said(r"something went wrong on the server; its log has the details \(please report it\)",
         "服务器出了问题；详情在服务器日志里（请报告此问题）"),
    # the library's (minimind): sampling, a run's mode against its corpus's kind, a corpus file
    Said(r"the system message must be text", "系统提示必须是文本"),
    Said(r"(?P<what>\w+) must be a number, got (?P<got>.*)", "{what}必须是数（收到 {got}）", what=words(FIELDS)),
    Said(r"(?P<what>\w+) must be a whole number, got (?P<got>.*)", "{what}必须是整数（收到 {got}）",
         what=words(FIELDS)),
    Said(r"(?P<what>\w+) must be in (?P<span>[\[(]\S+, \S+\]), got (?P<got>.*)", "{what}必须在 {span} 之内（收到 {got}）",
         what=words(FIELDS)),
    Said(r"(?P<what>\w+) must be between (?P<low>\S+) and (?P<high>\S+), got (?P<got>.*)",
         "{what}必须在 {low} 到 {high} 之间（收到 {got}）", what=words(FIELDS)),
    Said(r"(?P<what>\w+) must be at least (?P<low>\S+), got (?P<got>.*)", "{what}至少为 {low}（收到 {got}）",
         what=words(FIELDS)),
    Said(r"the loss or gradients were NaN/Inf for (?P<n>\d+) steps in a row \(at step (?P<step>\d+)\); the run "
         r"stopped\. Lower optim\.lr, use precision fp32, or check the data; the last checkpoint is kept",
         "损失或梯度连续 {n} 步是 NaN/Inf（在第 {step} 步）；训练已停止。请调低学习率、改用 fp32 精度或检查数据；"
         "最后一个检查点已保留"),
    Said(r"the training split is empty: the corpus is too small for data\.seq_len = (?P<n>\d+); add text or lower "
         r"data\.seq_len", "训练集是空的：语料对序列长度 {n} 来说太小；请增加文本或调低序列长度"),
    Said(r"seq_len=(?P<n>\d+) is too short for this corpus: (?P<why>no training example keeps an assistant token|"
         r"no training pair keeps an answer token on both sides|every training prompt is longer than (?P<most>\d+) "
         r"tokens \(seq_len less (?P<room>\d+) for the answer\)); raise seq_len or shorten the prompts",
         lambda v: f"序列长度 {v['n']} 对这份语料太短："
                   + {"no training example keeps an assistant token": "没有一条训练样例留下助手的词元",
                      "no training pair keeps an answer token on both sides": "没有一个训练偏好对的两个回答都留下词元"
                      }.get(v["why"], f"每个训练提示都超过 {v['most']} 个词元（序列长度减去留给回答的 {v['room']} 个）")
                   + "；请调高序列长度或缩短提示"),
    Said(r"this run needs (?P<what>.+), even with gradient checkpointing: it would not fit\. Try (?P<hints>.+) "
         r"\(MINIMIND_SKIP_MEMORY_CHECK=1 starts it anyway\)",
         "本次训练即使开启梯度检查点也需要{what}：放不下。请尝试 {hints}（MINIMIND_SKIP_MEMORY_CHECK=1 可强制开始）",
         what=lambda text: memory_zh(text),
         hints=lambda text: text.replace("LoRA or QLoRA (only the adapters train)", "LoRA 或 QLoRA（只训练适配器）")
         .replace("QLoRA (a 4-bit base)", "QLoRA（4 位基础模型）").replace(" or a smaller batch or sequence length",
                                                                       "，或更小的批或序列长度")
         .replace("a smaller batch or sequence length", "更小的批或序列长度")),
    *MODE_KIND,
    Said(r"(?P<file>[^\n]+?): (?P<position>" + _POSITION + r"): (?P<reason>.+)", "{file}：{position}：{reason}",
         position=POSITIONS.say, reason=REASONS.say),
    *REASONS,
])

HELD_OUT = Table([  # minimind.export.heldout: the text an export was scored on
    Said(r"the validation split of run (?P<run>\S+) \((?P<n>[\d,]+) held-out texts\)",
         "训练 {run} 的验证集（{n} 段留出文本）"),
    Said(r"(?P<file>.+), the held-out sample shipped with (?P<model>\S+)", "{file}（随 {model} 附带的留出样本）"),
])

WORK = {  # what a bounded child was doing (webapp.bounded's `what`)
    "reading the corpus": "读取语料", "training the tokenizer": "训练分词器", "the estimate": "估算",
    "reading the held-out file": "读取留出文本",
}


def error_zh(message: str, lead: str | None = LEAD) -> str:
    """`message` in Chinese: its entry's translation, else the English after `lead` (or as it is,
    when `lead` is None)."""
    said = ERRORS.say(message.strip())
    if said is not None:
        return said
    return message if lead is None else lead + message
