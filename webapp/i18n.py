"""The page's fixed text in English and Chinese. Gradio picks the language from the
browser's locale; messages computed on the server (stats, errors) stay English."""

import gradio as gr

EN = {
    "title": "MiniMind Studio",
    "subtitle": "Train a small language model from nothing, fine-tune it, chat with it, export it.",
    "tab_corpus": "Corpus", "tab_train": "Train", "tab_chat": "Chat", "tab_export": "Export",
    "upload": "Upload corpus files (.txt .md .jsonl .json .csv .parquet)",
    "sample": "…or use a bundled sample", "use_sample": "Use sample",
    "kind": "Kind", "text_field": "Text field (records)", "split": "Documents in .txt/.md",
    "strict": "Strict (stop at the first bad record)", "inspect": "Inspect",
    "stats": "Statistics", "histogram": "Document lengths", "samples": "Samples", "problems": "Errors and skipped records",
    "train_tokenizer": "Also train a tokenizer on it", "vocab": "Vocabulary size",
    "corpus_name": "Corpus name", "save_corpus": "Save corpus", "saved_corpora": "Saved corpora",
    "device": "Device", "base": "Start from", "mode": "Mode", "corpus": "Corpus",
    "max_steps": "Steps", "stop_after": "Stop after", "stop_steps": "steps", "stop_minutes": "minutes",
    "minutes": "Minutes", "minutes_info": "wall-clock time; the run is sized from its measured steps",
    "batch_size": "Batch size", "seq_len": "Sequence length", "lr": "Learning rate",
    "grad_accum": "Gradient accumulation", "precision": "Precision", "lora_rank": "LoRA rank",
    "lora_alpha": "LoRA alpha", "eval_every": "Evaluate every (steps, 0 = auto)",
    "estimate": "Estimate size and time", "start": "Start training", "stop": "Stop", "resume": "Resume",
    "mode_pretrain": "pretrain", "mode_sft": "sft", "mode_lora": "lora", "mode_qlora": "qlora",
    "mode_dpo": "dpo", "mode_distill": "distill", "mode_grpo": "Reinforce (GRPO)",
    "mode_info": "pretrain: a new model from text · sft, lora, qlora: fine-tune an existing model · "
                 "dpo: learn from preference pairs · distill: a student learns from a teacher · "
                 "GRPO: the model answers prompts and learns from the rewards you choose",
    "weights": "Weights that train", "weights_full": "full model",
    "dpo_beta": "DPO beta", "dpo_beta_info": "how far the model may move from where it started (smaller = further)",
    "teacher": "Teacher", "distill_temperature": "Distillation temperature",
    "kl_weight": "KL weight", "kl_weight_info": "share of the loss from the teacher; the rest is the data's next token",
    "objective_curve": "Objective metrics (train and validation)",
    "group_size": "Group size", "group_size_info": "answers sampled per prompt, compared with each other (2-16)",
    "grpo_beta": "KL beta", "grpo_beta_info": "how strongly the model is held near where it started (0-1, 0 = free)",
    "grpo_max_new_info": "longest answer a rollout may write (1-256 tokens)",
    "rewards": "Rewards (the run maximizes their weighted mean)", "reward_weight": "Weight",
    "rollouts": "Held-out answers at each evaluation, with their rewards (newest first)",
    "progress": "Progress", "loss_curve": "Loss (train and validation)", "log": "Log", "runs": "Runs",
    "run": "Run", "queue": "Queue", "refresh": "Refresh",
    "model": "Model", "model_b": "Second model", "system": "System prompt", "temperature": "Temperature",
    "top_p": "Top-p", "top_k": "Top-k", "max_new_tokens": "Max new tokens",
    "repetition_penalty": "Repetition penalty", "message": "Message", "send": "Send",
    "system_optional": "System prompt (optional)",
    "system_placeholder": "Instructions the model follows in every answer, e.g.: Answer as a Tang poet, in classical Chinese.",
    "chat_settings": "Settings: system prompt and sampling",
    "message_placeholder": "Type a request and press Enter, e.g. 以《春夜》为题写一首五言绝句",
    "regenerate": "Regenerate", "clear": "Clear", "side_by_side": "Side by side (two models)",
    "formats": "Formats", "eval_file": "Held-out text for perplexity (optional)", "export": "Export",
    "eval_file_info": "Held-out text for perplexity (optional; default: the model's own held-out text, "
                      "its run's validation split or the sample a shipped model carries)",
    "results": "Results", "downloads": "Downloads", "api": "OpenAI-compatible API",
}

ZH = {
    "title": "MiniMind 工作室",
    "subtitle": "从零训练一个小语言模型，微调它，与它对话，导出它。",
    "tab_corpus": "语料", "tab_train": "训练", "tab_chat": "对话", "tab_export": "导出",
    "upload": "上传语料文件（.txt .md .jsonl .json .csv .parquet）",
    "sample": "……或使用内置示例", "use_sample": "使用示例",
    "kind": "类型", "text_field": "文本字段（记录）", "split": ".txt/.md 文档划分",
    "strict": "严格模式（遇到第一条错误记录即停止）", "inspect": "检查",
    "stats": "统计", "histogram": "文档长度", "samples": "样例", "problems": "错误与跳过的记录",
    "train_tokenizer": "同时训练分词器", "vocab": "词表大小",
    "corpus_name": "语料名称", "save_corpus": "保存语料", "saved_corpora": "已保存的语料",
    "device": "设备", "base": "起点模型", "mode": "模式", "corpus": "语料",
    "max_steps": "步数", "stop_after": "训练长度", "stop_steps": "按步数", "stop_minutes": "按分钟",
    "minutes": "分钟", "minutes_info": "墙钟时间；按实测每步耗时确定步数",
    "batch_size": "批大小", "seq_len": "序列长度", "lr": "学习率",
    "grad_accum": "梯度累积", "precision": "精度", "lora_rank": "LoRA 秩",
    "lora_alpha": "LoRA alpha", "eval_every": "每隔多少步评估（0 = 自动）",
    "estimate": "估算规模与时间", "start": "开始训练", "stop": "停止", "resume": "继续",
    "mode_pretrain": "预训练 pretrain", "mode_sft": "全量微调 sft", "mode_lora": "lora", "mode_qlora": "qlora",
    "mode_dpo": "偏好优化 dpo", "mode_distill": "蒸馏 distill", "mode_grpo": "强化学习 (GRPO)",
    "mode_info": "pretrain：从文本训练新模型 · sft、lora、qlora：微调已有模型 · "
                 "dpo：从偏好对中学习 · distill：学生模型向教师模型学习 · "
                 "GRPO：模型回答提示，并从你选择的奖励中学习",
    "weights": "训练哪些权重", "weights_full": "完整模型",
    "dpo_beta": "DPO beta", "dpo_beta_info": "模型可偏离起点的程度（越小偏离越远）",
    "teacher": "教师模型", "distill_temperature": "蒸馏温度",
    "kl_weight": "KL 权重", "kl_weight_info": "损失中来自教师的比例；其余来自数据的下一个词元",
    "objective_curve": "目标指标（训练与验证）",
    "group_size": "组大小", "group_size_info": "每个提示采样的回答数，彼此比较（2-16）",
    "grpo_beta": "KL beta", "grpo_beta_info": "把模型拉向起点的强度（0-1，0 = 不约束）",
    "grpo_max_new_info": "每次采样回答的最大长度（1-256 个词元）",
    "rewards": "奖励（训练最大化其加权平均）", "reward_weight": "权重",
    "rollouts": "每次评估时的留出回答及其奖励（最新在前）",
    "progress": "进度", "loss_curve": "损失（训练与验证）", "log": "日志", "runs": "训练记录",
    "run": "训练", "queue": "队列", "refresh": "刷新",
    "model": "模型", "model_b": "第二个模型", "system": "系统提示", "temperature": "温度",
    "top_p": "Top-p", "top_k": "Top-k", "max_new_tokens": "最多生成词元数",
    "repetition_penalty": "重复惩罚", "message": "消息", "send": "发送",
    "system_optional": "系统提示（可选）",
    "system_placeholder": "模型在每次回答中都遵循的指示，例如：请以唐代诗人的身份用文言回答。",
    "chat_settings": "设置：系统提示与采样",
    "message_placeholder": "输入请求后按回车发送，例如：以《春夜》为题写一首五言绝句",
    "regenerate": "重新生成", "clear": "清空", "side_by_side": "并排对比（两个模型）",
    "formats": "格式", "eval_file": "用于困惑度的留出文本（可选）", "export": "导出",
    "eval_file_info": "用于困惑度的留出文本（可选；默认用模型自己的留出文本：训练运行的验证集，或随模型附带的样本）",
    "results": "结果", "downloads": "下载", "api": "OpenAI 兼容接口",
}

I18N = gr.I18n(en=EN, zh=ZH, **{"zh-CN": ZH, "zh-TW": ZH})


def t(key: str):
    """A label translated in the browser."""
    return I18N(key)
