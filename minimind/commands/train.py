"""Train a model: pretrain from scratch, full fine-tune, LoRA or QLoRA, DPO, distillation or GRPO.

  python -m minimind train --config run.yaml --set optim.lr=3e-4 --set max_steps=500
  python -m minimind train --set mode=pretrain --set data.files=[corpus.txt] --set model.preset=nano
  python -m minimind train --set mode=dpo --set model.init_from=checkpoints/minimind-tang \\
      --set data.files=[samples/tang_preference.jsonl] --set adapter=lora --set max_steps=200
  python -m minimind train --set mode=distill --set distill.teacher=checkpoints/minimind-shakespeare \\
      --set data.files=[corpus.txt] --set model.preset=nano --set time_budget_s=600
  python -m minimind train --set task=classify --set mode=lora --set model.init_from=checkpoints/minimind-tang \
      --set data.files=[reviews.csv]    # a classifier of a labelled corpus (text + label columns)
  python -m minimind train --config grpo.yaml         # mode: grpo, grpo: {rewards: [{name: form}, {name: rhyme}]}
  python -m minimind train --set mode=grpo --set model.init_from=checkpoints/minimind-tang \
      --set data.files=[samples/tang_prompts.jsonl] --set 'grpo.rewards=[{name: form}, {name: rhyme}]'
  python -m minimind train --run-dir runs/20261130-101500-1234 --resume
  torchrun --nproc_per_node=2 -m minimind train --config run.yaml

A run is a folder (config.yaml, status.json, metrics.jsonl, train.log,
checkpoints/step-N/). SIGTERM or Ctrl-C saves a checkpoint and stops;
--resume continues from the newest complete checkpoint exactly.
"""

from __future__ import annotations

import argparse
import os
import time

HELP = "train (pretrain / sft / lora / qlora / dpo / distill / grpo) into a run folder; --resume continues one"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", help="YAML or JSON TrainConfig (see minimind/training/config.py)")
    p.add_argument("--set", dest="assignments", action="append", default=[], metavar="KEY=VALUE",
                   help="override a config value, dotted keys and YAML values (repeatable)")
    p.add_argument("--run-dir", help="run folder (default: runs/<timestamp>; required with --resume)")
    p.add_argument("--resume", action="store_true", help="continue the run in --run-dir from its newest checkpoint")
    p.add_argument("--no-progress", action="store_true", help="no progress bar (log lines only)")
    p.add_argument("--print-config", action="store_true", help="print the resolved config and exit")


def run(args) -> int:
    from ..errors import ConfigError
    from ..training import RunDir, TrainConfig, train
    from ..training.budget import process_age

    if args.resume:
        if not args.run_dir:
            raise ConfigError("--resume needs --run-dir RUN_FOLDER")
        config = TrainConfig.load(RunDir(args.run_dir).config_file)
    elif args.config:
        config = TrainConfig.load(args.config)
    else:
        config = TrainConfig()
    config = config.with_overrides(args.assignments)
    if args.run_dir:
        config.run_dir = args.run_dir
    if args.print_config:
        print(config.to_yaml())
        return 0
    main_process = int(os.environ.get("RANK", "0")) == 0
    bar = None
    progress = None
    if main_process and not args.no_progress:
        from tqdm import tqdm

        def progress(step, total, info):
            nonlocal bar
            if bar is None:
                bar = tqdm(total=total, initial=step - 1, unit="step", dynamic_ncols=True)
            bar.total = total
            bar.set_postfix(loss=f"{info['loss']:.3f}", tok_s=f"{info['tokens_per_s']:.0f}",
                            lr=f"{info['lr']:.1e}", refresh=False)
            bar.update(step - bar.n)

    try:
        # a time budget counts from this process's start, as the user's clock does (imports included)
        status = train(config, resume=args.resume, progress=progress, started=time.perf_counter() - process_age())
    finally:
        if bar is not None:
            bar.close()
    if main_process and status:
        msg = f"{status['state']} at step {status.get('step')}/{status.get('total')}: {status.get('run_dir')}"
        if status.get("val_loss") is not None:
            msg += f"  val loss {status['val_loss']:.4f}"
            if status.get("val_bpc") is not None:
                msg += f", bpc {status['val_bpc']:.3f}"
            if status.get("val_macro_f1") is not None:  # task classify: every validation row
                msg += (f", accuracy {status['val_accuracy']:.3f}, macro-F1 {status['val_macro_f1']:.3f} "
                        f"(confusion matrix: {status.get('confusion')})")
            elif status.get("val_accuracy") is not None:  # DPO: held-out preference accuracy
                msg += f", preference accuracy {status['val_accuracy']:.2f}"
        if status.get("val_reward") is not None:  # GRPO: mean reward of held-out answers, and each reward's
            parts = [f"{k[11:]} {v:.3f}" for k, v in status.items() if k.startswith("val_reward_")]
            msg += f"  held-out reward {status['val_reward']:.3f}" + (f" ({', '.join(parts)})" if parts else "")
        print(msg)
        if status.get("final_checkpoint"):
            print(f"model: {status['final_checkpoint']}")
    return 0 if not status or status.get("state") in ("finished", "stopped") else 1
