#!/usr/bin/env bash
# Rebuild checkpoints/minimind-tang from ../shared/corpora/tang_poems.jsonl with the product's CLI.
# Re-running continues where it stopped (finished steps are skipped, a run resumes). The runs
# are step counts on one pinned thread (scripts/tang_*.yaml), and scripts.finalize copies each
# run's config.yaml and this command into checkpoints/minimind-tang/training/.
#   bash scripts/train_tang.sh
set -euo pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} HF_HUB_OFFLINE=1
. scripts/_run.sh
W=work/tang
[ -f $W/tokenizer/tokenizer.json ] || \
  python -m minimind tokenizer train ../shared/corpora/tang_poems.jsonl --vocab-size 6400 --out $W/tokenizer
base=$(train_or_resume scripts/tang_pretrain.yaml $W/pretrain)
[ -f $W/chat.jsonl ] || python -m scripts.make_tang_chat --out $W/chat.jsonl
chat=$(train_or_resume scripts/tang_sft.yaml $W/sft --set model.init_from=$base)
poet=$(train_or_resume scripts/tang_grpo.yaml $W/grpo --set model.init_from=$chat)
python -m scripts.finalize tang --model "$poet" --pretrain-run $W/pretrain --sft-run $W/sft --grpo-run $W/grpo \
  --before "$chat" --out checkpoints/minimind-tang --command "bash scripts/train_tang.sh"
