"""The page's text in English and Chinese.

Fixed labels go through `t()`: Gradio translates them in the browser from its locale. What a
handler composes at run time (the Device line, run status, corpus statistics, export messages)
goes through `tr()`, which answers in the language of the request being served (its
Accept-Language, the same preference the browser's locale follows); without a request (an API
client sends none, tests call handlers directly) it answers in English. A `tr()` made while the
page is being built (no request yet: a dropdown's first choices) answers with a text the browser
translates, as `t()` does.

Errors, the trainer's log and the library's words stay English where they are raised (the CLI,
the API and the logs say them as written); the zh page shows them in Chinese: an error pop-up
through errors_zh (context.user_errors), a corpus's problems through errors_zh, the log through
log_zh (run_view.log_text). Names stay as they are (MiniMind, LoRA, GRPO, model and file names)."""

import hashlib
import json
import re
import string

import gradio as gr
from gradio.i18n import I18nData

EN = {
    # the Train tab's two layers and run names (train.py)
    "advanced": "Advanced settings",
    "run_name": "Run name",
    "run_name_info": "optional: names the run in the Runs table, the comparison and the API (default: <mode>-<n>)",
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
    "processes": "Processes", "processes_info": "data-parallel processes (torchrun): one per GPU, or CPU cores; "
    "the batch size is per process",
    "parallelism": "Parallelism", "parallelism_info": "DDP: each process holds the whole model; FSDP2: shards it",
    "report_to": "Also report to", "report_to_info": "the same metrics, in the run folder (no account)",
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
    "message_placeholder_en": "Type a request and press Enter, e.g. Write a short speech about the sea",
    "regenerate": "Regenerate", "clear": "Clear", "side_by_side": "Side by side (two models)",
    "formats": "Formats", "eval_file": "Held-out text for perplexity (optional)", "export": "Export",
    "eval_file_info": "Held-out text for perplexity (optional; default: the model's own held-out text, "
                      "its run's validation split or the sample a shipped model carries; a labelled file, "
                      "text + label, scores a classifier's accuracy)",
    "results": "Results", "downloads": "Downloads", "api": "OpenAI-compatible API",
    "split_section": "sections (running text)", "split_paragraph": "paragraphs (independent snippets)",
    "split_line": "lines", "chars_per_doc": "characters per document",
    "split_info": "Sections keep paragraphs and the blank lines between them together (up to about 16,000 "
                  "characters, cut at a scene or chapter break where there is one), so a model learns what "
                  "follows a paragraph; validation then holds out whole sections, not paragraphs from beside "
                  "the ones it trains on. Paragraphs suit a file of unrelated snippets.",
    "docs_per_bar": "documents",
    # composed at run time (tr): keep every {placeholder} in both languages
    "device_line": "**Device:** {device}",
    "storage_note": ("**This Space has no persistent storage:** runs, imported models and exports vanish when it "
                     "restarts. Download what you want to keep (Export tab), or mount a storage bucket at /data in "
                     "the Space's settings and restart it."),
    "new_model_auto": "new model: auto (sized to the number of steps)", "new_model": "new model: {name}",
    "hub_model": "a Hugging Face model: id or folder…",
    "hub_source": "Hugging Face model id or folder",
    "hub_source_info": "Llama, Mistral, Qwen2 or Qwen3 with safetensors weights, e.g. HuggingFaceTB/SmolLM2-135M-Instruct",
    "import_model": "Import",
    "corpus_unusable": "**This corpus cannot be used yet.**",
    "c_kind": "**Kind:** {kind}", "c_documents": "**Documents:** {n}", "c_records": "**Records:** {n}",
    "c_pairs": "**Pairs:** {n}", "c_prompts": "**Prompts:** {n}", "c_conversations": "**Conversations:** {n}",
    "c_characters": "**Characters:** {n}",
    "c_tokens": "**Tokens** ({model}'s tokenizer, the shipped one that writes it shortest): {n}", "c_chars_per_token": "**Chars/token:** {v}",
    "c_reward_fields": "**With reward fields:** {asks}", "none": "none", "binary": "binary",
    "c_skipped": "Skipped {n} bad records:", "c_empty": "- {n} empty documents dropped",
    "c_no_problems": "No problems found.",
    "extend_vocab": "Add the corpus's characters to the vocabulary",
    "extend_vocab_info": "fine-tuning: characters the model's tokenizer writes in byte pieces become tokens of their own",
    "e_coverage": "The starting model's tokenizer writes {share} % of this corpus's characters in byte pieces "
                  "({cpt} characters per token).",
    "e_coverage_extend": "The starting model's tokenizer writes {share} % of this corpus's characters in byte pieces "
                         "({cpt} characters per token): tick “Add the corpus's characters to the vocabulary” to "
                         "give {n} frequent ones a token of their own.",
    "e_coverage_extended": "The starting model's tokenizer writes {share} % of this corpus's characters in byte "
                           "pieces ({cpt} characters per token); the run adds {n} of them as tokens of their own.",
    "c_coverage_head": "**Tokenizer coverage** (how each shipped model's tokenizer writes these characters):",
    "c_coverage": "- {model}: {share} % of the characters in byte pieces, {cpt} characters per token",
    "c_coverage_missing": "; {n} characters seen {k}+ times have no token of their own: "
                          "tick “Add the corpus's characters to the vocabulary” when you fine-tune it",
    "c_saved": "Saved corpus **{name}** ({n} {units}).",
    "c_tokenizer": " Tokenizer: {vocab} tokens, {cpt} chars/token, trained in {seconds}s.",
    "e_estimate": "**{params}** parameters ({size}{trainable} trainable) on {device}  \n"
                  "**{tokens}** tokens per epoch in {rows} training rows  \n"
                  "**{steps}** steps × {sps}s ≈ **{eta}** ({source}; {how})",
    "e_memory": "  \nMemory: {memory}",
    "e_how_minutes": "the run fits its steps to the minutes from its measured steps",
    "e_how_steps": "the ETA while it trains comes from its measured steps",
    "e_buys": "  \nThis budget buys about **{steps}** steps: **{tokens}** tokens, {passes} passes over the training "
              "data (set-up {setup}).",
    "e_too_short": "  \n⚠ Fewer than {min} steps show little (no validation curve, a loss that barely moves): "
                   "give it at least **{minutes}** minutes.",
    "e_measured_before": "an earlier run of this shape on this machine",
    "e_probe": "speed probe",
    "queued": "Queued **{run_id}**.",
    "p_line": "{state}: step {step}/{total} ({pct}%) · ETA {eta}",
    "f_state": "**State:** {v}", "f_device": "**Device:** {v}", "f_tokens_s": "**Tokens/s:** {v}",
    "f_slice": "**GPU slice:** {k} (up to {s} s each)", "state_paused": "between GPU slices",
    "f_wall": "**Wall time:** {v}",
    "f_wall_loop": "**Wall time:** {v} ({loop} of it in the training loop)",
    "f_lr": "**LR:** {v}", "f_loss": "**Loss:** {v}", "f_val_loss": "**Val loss:** {v}", "f_bpc": " · **BPC:** {v}",
    "f_error": "❌ **Error:** {v}", "f_model": "**Model:** {v}",
    "f_val_accuracy": "**Preference accuracy:** {v}", "f_val_reward_margin": "**Reward margin:** {v}",
    "f_val_kl_dpo": "**KL to reference:** {v}", "f_val_kl_distill": "**KL to teacher:** {v}",
    "f_val_ppl": "**Val perplexity:** {v}", "f_val_reward": "**Held-out reward:** {v}",
    "f_val_answer_tokens": "**Answer tokens:** {v}",
    "queue_line": "**Queue:** {v}", "empty": "empty",
    "state_queued": "queued", "state_running": "running", "state_stopping": "stopping", "state_stopped": "stopped",
    "state_finished": "finished", "state_failed": "failed",
    # what a running run is doing (status.json's phase): the page shows it while the steps cannot say
    "state_phase": "{state} ({phase})",
    "phase_starting": "starting", "phase_preparing_data": "preparing data", "phase_measuring_speed": "measuring speed",
    "phase_building_model": "building the model", "phase_compiling": "compiling", "phase_training": "training",
    "phase_evaluating": "evaluating", "phase_saving": "saving a checkpoint", "phase_finishing": "final evaluation",
    "m_queued": "Queued **{run_id}**; {ahead}", "m_queued_resume": "Queued **{run_id}** to resume from step {step}; {ahead}",
    "m_ahead": "{n} run(s) ahead of it.", "m_next": "it starts when the device is free.",
    "m_running": "**{run_id}** is training.", "m_running_resumed": "**{run_id}** is training (resumed).",
    "m_stopping": "**{run_id}** is saving a checkpoint and stopping…",
    "m_stopped_at": "**{run_id}**: stopped at step {step} — press Resume to continue.",
    "m_stopped_early": "**{run_id}**: stopped before its first step — press Resume to start it again.",
    "m_finished": "**{run_id}** finished: {step} steps. Chat with it on the Chat tab or export it on the Export tab.",
    "m_failed_from": "**{run_id}** failed (see the error above) — press Resume to continue from step {step}.",
    "m_failed_restart": "**{run_id}** failed (see the error above) — press Resume to start it again.",
    # a run's events (minimind/training/events.py) in the page's words: ev_<kind>
    "ev_stopped": "stopped at step {step} (checkpoint saved) — press Resume to continue",
    "ev_ended": "the training process ended unexpectedly (see the log below)",
    "ev_ended_kept": "the training process ended unexpectedly (see the log below); its last checkpoint "
                     "({checkpoint}) is kept and it can be resumed",
    "x_written": "Exports written to `{folder}`.", "x_measured": " Perplexity measured on {text}.",
    "x_accuracy_source": " Accuracy measured on {text}; the source classifier scores {source} on it.",
    "x_labels_only": " Labels compared with the source's on {text} (it has no labels: no accuracy).",
    "formats_info": "each export is reloaded and scored against the source before it is offered",
    "formats_classifier": "a classifier exports as ONNX only (onnx, onnx-int8)",
    "x_measured_source": " Perplexity measured on {text}; the source model scores {source} on it.",
    "x_verified": "verified", "x_failed": "failed: {error}",
    "dropped_turns": "_(the {n} oldest turns were left out to fit the context)_",
    "architecture": "Architecture",
    "architecture_info": "a new model's design: how a transformer sees word order, or a recurrent LSTM",
    "arch_rope": "Transformer · rotary (RoPE)", "arch_alibi": "Transformer · ALiBi",
    "arch_sinusoidal": "Transformer · sinusoidal", "arch_learned": "Transformer · learned positions",
    "arch_none": "Transformer · no positions (NoPE)", "arch_lstm": "LSTM", "arch_lstm_attention": "LSTM + attention",
    "f_architecture": "**Architecture:** {v}",
    "compare_runs": "Compare runs", "compare_pick": "Runs to compare", "compare_axis": "X axis",
    "compare": "Compare", "compare_curve": "Loss of the compared runs (train and validation)",
    "compare_table": "Final metrics of the compared runs",
    "cmp_x_step": "step", "cmp_x_time": "wall-clock time (s)", "cmp_x_tokens": "tokens trained on",
    "cmp_legend": "run · loss on", "cmp_train": "train", "cmp_validation": "validation",
    # table headers (the column names an API client gets; the zh page shows the translation)
    "col_architecture": "architecture",
    "col_parameters": "parameters",
    "col_steps": "steps",
    "col_train_loss": "train_loss",
    "col_tokens_per_s": "tokens_per_s",
    "col_elapsed": "elapsed",
    "col_run": "run",
    "col_state": "state",
    "col_mode": "mode",
    "col_step": "step",
    "col_val_loss": "val_loss",
    "col_val_bpc": "val_bpc",
    "col_error": "error",
    "col_corpus": "corpus",
    "col_kind": "kind",
    "col_documents": "documents",
    "col_tokenizer": "tokenizer",
    "col_format": "format",
    "col_file": "file",
    "col_size MB": "size MB",
    "col_perplexity": "perplexity",
    "col_source perplexity": "source perplexity",
    "col_delta %": "delta %",
    "col_greedy match": "greedy match",
    "col_accuracy %": "accuracy %",
    "col_source accuracy %": "source accuracy %",
    "col_delta pt": "delta pt",
    "col_labels as source": "labels as source",
    "col_status": "status",
    # classification (labelled corpora, classifier runs, the Try panel)
    "label_field": "Label field (labelled records)",
    "label_field_info": "the class of each record, for a classifier (default: label, class, category, ...)",
    "c_classes": "**Classes ({n}):**", "c_classes_more": "- … and {n} more classes",
    "task": "Task", "task_classify": "classify (a classifier of the corpus's labels)",
    "task_generate": "generate (a language model)",
    "task_info": "a labelled corpus trains a classifier: sft fine-tunes every weight, lora / qlora adapters + the head",
    "class_weights": "Class weights", "class_weights_none": "none", "class_weights_balanced": "balanced",
    "class_weights_info": "balanced: every class weighs as much in the loss, however few its examples",
    "f_val_class_accuracy": "**Val accuracy:** {v}", "f_val_macro_f1": "**Val macro-F1:** {v}",
    "confusion": "Confusion matrix (rows: true class, columns: predicted class)",
    "confusion_line": "**Confusion matrix** on all {rows} validation rows: accuracy {accuracy}, macro-F1 {f1}",
    "confusion_corner": "true \\ predicted",
    "try_title": "Try a classifier", "try_text": "Text to classify",
    "try_placeholder": "Type a text and press the button, e.g. 床前明月光，疑是地上霜",
    "try_button": "Classify", "try_probabilities": "Label probabilities",
    "classifier": "Classifier", "classifier_b": "Second classifier",
    "classifier_info": "a finished classifier run (train one on a labelled corpus on the Train tab)",
    "try_side_by_side": "Side by side (two classifiers)",
    # the zh page throughout (issue 44): corpus kinds, model and sample names, plots, the API panel
    "kind_auto": "auto", "kind_text": "text", "kind_chat": "chat", "kind_instruction": "instruction",
    "kind_preference": "preference", "kind_prompts": "prompts", "kind_labelled": "labelled",
    "sample_tang_poems_sample": "Tang poems (2,016 poems, JSONL)",
    "sample_shakespeare_sample": "Shakespeare: The Comedy of Errors (txt)",
    "sample_tang_chat_sample": "Tang poem requests (314 chats, JSONL)",
    "sample_tang_preference": "Tang poem preferences (720 pairs for DPO, JSONL)",
    "sample_tang_prompts": "Tang poem prompts (2,000 requests for GRPO, JSONL)",
    "sample_songci_sample": "Song ci (1,200 ci, simplified characters, JSONL)",
    "model_shipped": "shipped: {name}", "model_imported": "imported: {name}",
    "model_run": "run {run} ({mode}, step {step})",
    "c_part": "**{name}:** mean {mean} {unit}, longest {longest}", "unit_characters": "characters",
    "unit_tokens": "tokens", "yes": "yes",
    "col_sample": "sample", "col_prompt": "prompt", "col_chosen": "chosen", "col_rejected": "rejected",
    "col_answer": "answer", "col_reward": "reward",
    "loss_legend": "loss on", "axis_loss": "loss", "axis_value": "value", "metric_legend": "metric",
    # the Export tab's Publish section (tabs/publish.py)
    "pub_title": "Publish to the Hugging Face Hub", "pub_folder": "Export to publish",
    "pub_folder_info": "one format's folder of an export in this workspace, newest first",
    "pub_repo": "Hub repo (owner/name)", "pub_private": "Private", "pub_button": "Publish",
    "pub_private_info": "a private repo is seen only by you (and your organization); a private upload to an "
                        "existing public repo is refused",
    "pub_token": "Hugging Face token",
    "pub_token_info_env": "optional: empty, this server's HF_TOKEN is used; a token typed here is used instead, "
                          "for this upload only, never stored",
    "pub_token_info_none": "a write token from huggingface.co/settings/tokens, needed because HF_TOKEN is not set "
                           "on this server: used for this upload only, never stored or logged",
    "pub_token_info_public": "your write token from huggingface.co/settings/tokens: this public page never uses "
                             "its server's HF_TOKEN; yours is used for this upload only, never stored or logged",
    "pub_done_private": "Published `{folder}` to the private repo {url}.",
    "pub_done_public": "Published `{folder}` to the public repo {url}.",
    "api_help": """The same models answer at `/v1` (OpenAI-compatible: `GET /v1/models`,
`POST /v1/chat/completions`, `POST /v1/completions`, streaming with `"stream": true`).

```bash
curl -s localhost:7860/v1/chat/completions -H 'Content-Type: application/json' \\
  -d '{"model": "minimind-tang", "messages": [{"role": "user", "content": "續寫：床前明月光"}]}'
```
Classifier runs answer at `/api/classify` (not an OpenAI endpoint): `GET` lists them with their
labels; `POST` gives the label probabilities of up to 64 texts.

```bash
curl -s localhost:7860/api/classify -H 'Content-Type: application/json' \\
  -d '{"model": "run-<run id>", "texts": ["床前明月光，疑是地上霜"]}'
```
Set `MINIMIND_API_KEY` to require `Authorization: Bearer <key>`; with a login (`MINIMIND_AUTH`),
`/v1` and `/api/classify` take that key, the page's user and password as HTTP Basic (`curl -u user:password`), or
this page's session.

Everything the page does is also a named Gradio endpoint (`/chat`, `/classify`, `/export`, `/publish`,
`/start_training`, ...; *Use via API* at the foot of the page lists them with their parameters):

```python
from gradio_client import Client
_, conversation, _ = Client("http://localhost:7860").predict(message="續寫：床前明月光", api_name="/chat")
print(conversation[-1]["content"][0]["text"])  # the answer
```""",
}

ZH = {
    # the Train tab's two layers and run names (train.py)
    "advanced": "高级设置",
    "run_name": "训练名称",
    "run_name_info": "可选：在训练列表、对比和 API 中用这个名字称呼这次训练（默认：<模式>-<序号>）",
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
    "processes": "进程数", "processes_info": "数据并行进程（torchrun）：每块 GPU 或每个 CPU 核一个；批大小按每个进程计",
    "parallelism": "并行方式", "parallelism_info": "DDP：每个进程持有完整模型；FSDP2：把模型切分到各进程",
    "report_to": "同时记录到", "report_to_info": "同样的指标，写在运行文件夹里（无需账号）",
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
    "message_placeholder_en": "输入请求后按回车发送，例如：Write a short speech about the sea",
    "regenerate": "重新生成", "clear": "清空", "side_by_side": "并排对比（两个模型）",
    "formats": "格式", "eval_file": "用于困惑度的留出文本（可选）", "export": "导出",
    "eval_file_info": "用于困惑度的留出文本（可选；默认用模型自己的留出文本：训练运行的验证集，或随模型附带的样本；"
                      "带标签的文件（文本 + 标签）可测分类器的准确率）",
    "results": "结果", "downloads": "下载", "api": "OpenAI 兼容接口",
    "split_section": "按章节（连续文本）", "split_paragraph": "按段落（互不相关的片段）",
    "split_line": "按行", "chars_per_doc": "每篇文档的字符数",
    "split_info": "按章节时，段落和段落间的空行保留在一起（每节约 16,000 个字符，遇到场次或章节的分隔就在那里切开），"
                  "模型能学到一段之后接什么；验证集也留出整节，而不是训练段落旁边的段落。按段落适合由互不相关的片段组成的文件。",
    "docs_per_bar": "文档数",
    "device_line": "**设备：** {device}",
    "storage_note": ("**此 Space 没有持久存储：** 重启后，训练记录、导入的模型和导出文件都会消失。"
                     "请下载需要保留的文件（导出页），或在 Space 设置中把存储桶挂载到 /data 后重启。"),
    "new_model_auto": "新模型：自动（按步数确定规模）", "new_model": "新模型：{name}",
    "hub_model": "Hugging Face 模型：ID 或文件夹…",
    "hub_source": "Hugging Face 模型 ID 或文件夹",
    "hub_source_info": "Llama、Mistral、Qwen2 或 Qwen3（safetensors 权重），例如 HuggingFaceTB/SmolLM2-135M-Instruct",
    "import_model": "导入",
    "corpus_unusable": "**这份语料暂时无法使用。**",
    "c_kind": "**类型：** {kind}", "c_documents": "**文档数：** {n}", "c_records": "**记录数：** {n}",
    "c_pairs": "**偏好对数：** {n}", "c_prompts": "**提示数：** {n}", "c_conversations": "**对话数：** {n}",
    "c_characters": "**字符数：** {n}",
    "c_tokens": "**词元数**（用 {model} 的分词器，内置分词器中写得最短的）：{n}", "c_chars_per_token": "**每词元字符数：** {v}",
    "c_reward_fields": "**含奖励字段：** {asks}", "none": "无", "binary": "二进制",
    "c_skipped": "跳过了 {n} 条错误记录：", "c_empty": "- 丢弃了 {n} 篇空文档",
    "c_no_problems": "未发现问题。",
    "extend_vocab": "把语料的字符加入词表",
    "extend_vocab_info": "微调时：模型分词器拆成字节片段的字符成为独立词元",
    "e_coverage": "起始模型的分词器把该语料 {share} % 的字符拆成字节片段（每词元 {cpt} 个字符）。",
    "e_coverage_extend": "起始模型的分词器把该语料 {share} % 的字符拆成字节片段（每词元 {cpt} 个字符）："
                         "勾选“把语料的字符加入词表”可让 {n} 个常见字符拥有独立词元。",
    "e_coverage_extended": "起始模型的分词器把该语料 {share} % 的字符拆成字节片段（每词元 {cpt} 个字符）；"
                           "本次训练会把其中 {n} 个加入词表。",
    "c_coverage_head": "**分词器覆盖**（各内置模型的分词器如何书写这些字符）：",
    "c_coverage": "- {model}：{share} % 的字符被拆成字节片段，每词元 {cpt} 个字符",
    "c_coverage_missing": "；{n} 个出现 {k} 次以上的字符没有自己的词元：微调该模型时请勾选“把语料的字符加入词表”",
    "c_saved": "已保存语料 **{name}**（{n} {units}）。",
    "c_tokenizer": " 分词器：{vocab} 个词元，每词元 {cpt} 个字符，训练用时 {seconds} 秒。",
    "e_estimate": "**{params}** 个参数（{size}其中 {trainable} 个可训练），运行于 {device}  \n"
                  "每轮 **{tokens}** 个词元，共 {rows} 行训练数据  \n"
                  "**{steps}** 步 × 每步 {sps} 秒 ≈ **{eta}**（{source}；{how}）",
    "e_memory": "  \n内存：{memory}",
    "e_how_minutes": "训练会按实测每步耗时在给定分钟内确定步数",
    "e_how_steps": "训练中的剩余时间按实测每步耗时估算",
    "e_buys": "  \n这个时长约可训练 **{steps}** 步：**{tokens}** 个词元，约 {passes} 遍训练数据（准备用时 {setup}）。",
    "e_too_short": "  \n⚠ 少于 {min} 步几乎看不出效果（没有验证曲线，损失几乎不动）：请至少给 **{minutes}** 分钟。",
    "e_measured_before": "本机此前同样规模的训练",
    "e_probe": "速度探测",
    "queued": "已排队 **{run_id}**。",
    "p_line": "{state}：第 {step}/{total} 步（{pct}%）· 剩余 {eta}",
    "f_state": "**状态：** {v}", "f_device": "**设备：** {v}", "f_tokens_s": "**词元/秒：** {v}",
    "f_slice": "**GPU 时间片：** 第 {k} 片（每片最多 {s} 秒）", "state_paused": "GPU 时间片之间",
    "f_wall": "**用时：** {v}",
    "f_wall_loop": "**用时：** {v}（其中训练循环 {loop}）",
    "f_lr": "**学习率：** {v}", "f_loss": "**损失：** {v}", "f_val_loss": "**验证损失：** {v}",
    "f_bpc": " · **每字符比特（BPC）：** {v}",
    "f_error": "❌ **错误：** {v}", "f_model": "**模型：** {v}",
    "f_val_accuracy": "**偏好准确率：** {v}", "f_val_reward_margin": "**奖励差值：** {v}",
    "f_val_kl_dpo": "**与参考模型的 KL：** {v}", "f_val_kl_distill": "**与教师模型的 KL：** {v}",
    "f_val_ppl": "**验证困惑度：** {v}", "f_val_reward": "**留出奖励：** {v}",
    "f_val_answer_tokens": "**回答词元数：** {v}",
    "queue_line": "**队列：** {v}", "empty": "空",
    "state_queued": "排队中", "state_running": "训练中", "state_stopping": "正在停止", "state_stopped": "已停止",
    "state_finished": "已完成", "state_failed": "失败",
    "state_phase": "{state}（{phase}）",
    "phase_starting": "正在启动", "phase_preparing_data": "正在准备数据", "phase_measuring_speed": "正在测速",
    "phase_building_model": "正在构建模型", "phase_compiling": "正在编译", "phase_training": "正在训练",
    "phase_evaluating": "正在评估", "phase_saving": "正在保存检查点", "phase_finishing": "最终评估",
    "m_queued": "已排队 **{run_id}**；{ahead}", "m_queued_resume": "已排队 **{run_id}**，将从第 {step} 步继续；{ahead}",
    "m_ahead": "前面还有 {n} 个训练。", "m_next": "设备空闲时即开始。",
    "m_running": "**{run_id}** 正在训练。", "m_running_resumed": "**{run_id}** 正在训练（已继续）。",
    "m_stopping": "**{run_id}** 正在保存检查点并停止……",
    "m_stopped_at": "**{run_id}**：停在第 {step} 步——按“继续”接着训练。",
    "m_stopped_early": "**{run_id}**：在第一步之前停止——按“继续”重新开始。",
    "m_finished": "**{run_id}** 已完成：{step} 步。可在“对话”页与它对话，或在“导出”页导出。",
    "m_failed_from": "**{run_id}** 失败（见上方错误）——按“继续”从第 {step} 步接着训练。",
    "m_failed_restart": "**{run_id}** 失败（见上方错误）——按“继续”重新开始。",
    "ev_stopped": "停在第 {step} 步（检查点已保存）——按“继续”接着训练",
    "ev_ended": "训练进程意外结束（见下方日志）",
    "ev_ended_kept": "训练进程意外结束（见下方日志）；它的最后一个检查点（{checkpoint}）已保留，可以继续训练",
    "x_written": "导出文件已写入 `{folder}`。", "x_measured": " 困惑度在 {text} 上测得。",
    "x_accuracy_source": " 准确率在 {text} 上测得；源分类器在其上的准确率为 {source}。",
    "x_labels_only": " 在 {text} 上与源模型的标签比较（该文本没有标签，无法计算准确率）。",
    "formats_info": "每个导出都会重新加载并与源模型比较，验证通过后才提供下载",
    "formats_classifier": "分类器只能导出为 ONNX（onnx、onnx-int8）",
    "x_measured_source": " 困惑度在 {text} 上测得；源模型在其上的困惑度为 {source}。",
    "x_verified": "已验证", "x_failed": "失败：{error}",
    "dropped_turns": "_（为适应上下文长度，省略了最早的 {n} 轮对话）_",
    "architecture": "模型架构",
    "architecture_info": "新模型的结构：Transformer 如何感知词序，或循环网络 LSTM",
    "arch_rope": "Transformer · 旋转位置编码 (RoPE)", "arch_alibi": "Transformer · ALiBi 线性偏置",
    "arch_sinusoidal": "Transformer · 正弦位置编码", "arch_learned": "Transformer · 可学习位置编码",
    "arch_none": "Transformer · 无位置编码 (NoPE)", "arch_lstm": "LSTM 循环网络", "arch_lstm_attention": "LSTM + 注意力",
    "f_architecture": "**架构：** {v}",
    "compare_runs": "对比训练", "compare_pick": "要对比的训练", "compare_axis": "横轴",
    "compare": "对比", "compare_curve": "所选训练的损失（训练与验证）",
    "compare_table": "所选训练的最终指标",
    "cmp_x_step": "步数", "cmp_x_time": "墙钟时间（秒）", "cmp_x_tokens": "已训练词元数",
    "cmp_legend": "训练 · 损失", "cmp_train": "训练集", "cmp_validation": "验证集",
    "col_architecture": "架构",
    "col_parameters": "参数量",
    "col_steps": "步数",
    "col_train_loss": "训练损失",
    "col_tokens_per_s": "词元/秒",
    "col_elapsed": "用时",
    "col_run": "训练",
    "col_state": "状态",
    "col_mode": "模式",
    "col_step": "步数",
    "col_val_loss": "验证损失",
    "col_val_bpc": "验证 BPC",
    "col_error": "错误",
    "col_corpus": "语料",
    "col_kind": "类型",
    "col_documents": "文档数",
    "col_tokenizer": "分词器",
    "col_format": "格式",
    "col_file": "文件",
    "col_size MB": "大小 MB",
    "col_perplexity": "困惑度",
    "col_source perplexity": "源模型困惑度",
    "col_delta %": "差异 %",
    "col_greedy match": "贪心解码一致",
    "col_accuracy %": "准确率 %",
    "col_source accuracy %": "源模型准确率 %",
    "col_delta pt": "差异（百分点）",
    "col_labels as source": "与源模型标签一致",
    "col_status": "状态",
    "label_field": "标签字段（带标签的记录）",
    "label_field_info": "每条记录的类别，用于训练分类器（默认：label、class、category 等）",
    "c_classes": "**类别（{n} 个）：**", "c_classes_more": "- ……以及另外 {n} 个类别",
    "task": "任务", "task_classify": "分类（按语料的标签训练分类器）",
    "task_generate": "生成（语言模型）",
    "task_info": "带标签的语料训练分类器：sft 微调全部权重，lora / qlora 训练适配器和分类头",
    "class_weights": "类别权重", "class_weights_none": "无", "class_weights_balanced": "均衡",
    "class_weights_info": "均衡：无论样本多少，每个类别在损失中的分量相同",
    "f_val_class_accuracy": "**验证准确率：** {v}", "f_val_macro_f1": "**验证宏平均 F1：** {v}",
    "confusion": "混淆矩阵（行：真实类别，列：预测类别）",
    "confusion_line": "**混淆矩阵**（全部 {rows} 条验证数据）：准确率 {accuracy}，宏平均 F1 {f1}",
    "confusion_corner": "真实 \\ 预测",
    "try_title": "试用分类器", "try_text": "要分类的文本",
    "try_placeholder": "输入一段文本后按按钮，例如：床前明月光，疑是地上霜",
    "try_button": "分类", "try_probabilities": "各标签的概率",
    "classifier": "分类器", "classifier_b": "第二个分类器",
    "classifier_info": "已完成的分类器训练（在“训练”页用带标签的语料训练一个）",
    "try_side_by_side": "并排对比（两个分类器）",
    "kind_auto": "自动 auto", "kind_text": "纯文本 text", "kind_chat": "对话 chat", "kind_instruction": "指令 instruction",
    "kind_preference": "偏好对 preference", "kind_prompts": "提示 prompts", "kind_labelled": "带标签 labelled",
    "sample_tang_poems_sample": "唐诗（2,016 首，JSONL）",
    "sample_shakespeare_sample": "莎士比亚：《错误的喜剧》（txt）",
    "sample_tang_chat_sample": "唐诗请求（314 段对话，JSONL）",
    "sample_tang_preference": "唐诗偏好（720 对，用于 DPO，JSONL）",
    "sample_tang_prompts": "唐诗提示（2,000 条请求，用于 GRPO，JSONL）",
    "sample_songci_sample": "宋词（1,200 首，简体字，JSONL）",
    "model_shipped": "内置：{name}", "model_imported": "已导入：{name}",
    "model_run": "训练 {run}（{mode}，第 {step} 步）",
    "c_part": "**{name}：** 平均 {mean} {unit}，最长 {longest}", "unit_characters": "个字符",
    "unit_tokens": "个词元", "yes": "有",
    "col_sample": "样例", "col_prompt": "提示", "col_chosen": "较好的回答", "col_rejected": "被拒绝的回答",
    "col_answer": "回答", "col_reward": "奖励",
    "loss_legend": "数据集", "axis_loss": "损失", "axis_value": "数值", "metric_legend": "指标",
    # 导出页的发布区（tabs/publish.py）
    "pub_title": "发布到 Hugging Face Hub", "pub_folder": "要发布的导出",
    "pub_folder_info": "本工作区中某次导出的一个格式文件夹，最新的在前",
    "pub_repo": "Hub 仓库（所有者/名称）", "pub_private": "私有", "pub_button": "发布",
    "pub_private_info": "私有仓库只有你（和你的组织）能看到；不会以私有方式上传到已存在的公开仓库",
    "pub_token": "Hugging Face 令牌",
    "pub_token_info_env": "可选：留空时使用本服务器的 HF_TOKEN；在这里输入的令牌会优先使用，只用于这次上传，不会保存",
    "pub_token_info_none": "来自 huggingface.co/settings/tokens 的写入令牌；因为本服务器没有设置 HF_TOKEN 才需要填写："
                           "只用于这次上传，不会保存或写入日志",
    "pub_token_info_public": "你自己的写入令牌（来自 huggingface.co/settings/tokens）：这个公开页面从不使用服务器的 "
                             "HF_TOKEN；你的令牌只用于这次上传，不会保存或写入日志",
    "pub_done_private": "已把 `{folder}` 发布到私有仓库 {url}。",
    "pub_done_public": "已把 `{folder}` 发布到公开仓库 {url}。",
    "api_help": """同样的模型也在 `/v1` 回答（兼容 OpenAI：`GET /v1/models`、`POST /v1/chat/completions`、
`POST /v1/completions`，用 `"stream": true` 流式输出）。

```bash
curl -s localhost:7860/v1/chat/completions -H 'Content-Type: application/json' \\
  -d '{"model": "minimind-tang", "messages": [{"role": "user", "content": "續寫：床前明月光"}]}'
```
分类器训练在 `/api/classify` 回答（不是 OpenAI 的接口）：`GET` 列出它们及其标签；`POST` 给出最多 64 段文本的
各标签概率。

```bash
curl -s localhost:7860/api/classify -H 'Content-Type: application/json' \\
  -d '{"model": "run-<run id>", "texts": ["床前明月光，疑是地上霜"]}'
```
设置 `MINIMIND_API_KEY` 后需要 `Authorization: Bearer <key>`；设了登录（`MINIMIND_AUTH`）时，`/v1` 和
`/api/classify` 接受这个密钥、本页面的用户名和密码（HTTP Basic：`curl -u user:password`），或本页面的会话。

页面上的每项操作也是一个有名字的 Gradio 接口（`/chat`、`/classify`、`/export`、`/publish`、`/start_training` 等；
页面底部的“通过 API 使用”列出它们及其参数）：

```python
from gradio_client import Client
_, conversation, _ = Client("http://localhost:7860").predict(message="續寫：床前明月光", api_name="/chat")
print(conversation[-1]["content"][0]["text"])  # the answer
```""",
}

# what the browser translates: the tables above, and the texts `tr()` made while the page was built
PAGE_EN, PAGE_ZH = dict(EN), dict(ZH)
I18N = gr.I18n(en=PAGE_EN, zh=PAGE_ZH, **{"zh-CN": PAGE_ZH, "zh-TW": PAGE_ZH})


def t(key: str):
    """A label translated in the browser."""
    return I18N(key)


I18N_MARK = re.compile(r"__i18n__(\{[^{}]*\})")  # a text the browser translates, as Gradio writes it into a string


def english(label):
    """A label as an API client reads it (the Gradio API's docs, gradio_client's view_api): the
    English of a text the browser translates (an i18n key, or Gradio's marker of one inside a
    string), any other label unchanged. The page itself keeps the key, so it still speaks Chinese."""
    if isinstance(label, I18nData):
        return PAGE_EN.get(label.key, label.key)
    if isinstance(label, dict) and "translation_metadata" in (label.get("_type"), label.get("__type__")):
        return PAGE_EN.get(label.get("key"), label.get("key"))
    if isinstance(label, str):
        return I18N_MARK.sub(lambda mark: english(json.loads(mark.group(1))), label)
    return label


def placeholders(text: str) -> list[str]:
    """The {names} a message fills in."""
    return sorted({name for _, name, _, _ in string.Formatter().parse(text) if name})


def language(accept_language: str | None = None) -> str:
    """"zh" or "en": from `accept_language` when given, else from the request being served
    (its Accept-Language header); English when there is none."""
    if accept_language is None:
        from gradio.context import LocalContext

        request = LocalContext.request.get(None)
        headers = getattr(request, "headers", None)
        accept_language = headers.get("accept-language", "") if headers is not None else ""
    first = (accept_language or "").split(",")[0].split(";")[0].strip().lower()
    return "zh" if first.startswith("zh") else "en"


def building() -> bool:
    """Whether the page is being built (inside its gr.Blocks, no request being served)."""
    from gradio.context import Context, LocalContext

    return LocalContext.request.get(None) is None and Context.root_block is not None


def both(en: str, zh: str) -> str:
    """A text given in both languages: in the request's language; while the page is built, a text
    the browser translates (registered for it under a key of its own, as `t()`'s are)."""
    if building():
        key = "built:" + hashlib.sha1(f"{en}\0{zh}".encode()).hexdigest()[:16]
        PAGE_EN[key], PAGE_ZH[key] = en, zh
        return str(I18N(key))
    return zh if language() == "zh" else en


def _filled(key: str, lang: str, values: dict) -> str:
    if lang != "zh":
        return EN[key].format(**values) if values else EN[key]
    from .errors_zh import KINDS, device_zh, memory_zh  # a device's, a memory need's, a corpus kind's words too

    said = {"device": device_zh, "memory": memory_zh, "kind": lambda kind: KINDS.get(kind, kind)}
    values = {name: said[name](value) if name in said else value for name, value in values.items()}
    return ZH[key].format(**values) if values else ZH[key]


def tr(key: str, lang: str | None = None, **values) -> str:
    """A message composed on the server, in the language of the request being served (while the
    page is built: in the browser's, see `both`)."""
    if lang is None and building():
        return both(_filled(key, "en", values), _filled(key, "zh", values))
    return _filled(key, lang or language(), values)


def headed(frame):
    """A table for the page: its column names in the request's language (English, unchanged,
    for an API client or a test)."""
    if language() != "zh":
        return frame
    return frame.rename(columns={c: ZH[f"col_{c}"] for c in frame.columns if f"col_{c}" in ZH})
