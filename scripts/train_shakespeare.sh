#!/usr/bin/env bash
# Rebuild checkpoints/minimind-shakespeare from ../shared/corpora/shakespeare.txt (four plays held out).
set -euo pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} HF_HUB_OFFLINE=1
. scripts/_run.sh
W=work/shakespeare
python -c "from pathlib import Path; from scripts.corpora import write_shakespeare_split; write_shakespeare_split(Path('$W'))"
[ -f $W/tokenizer/tokenizer.json ] || \
  python -m minimind tokenizer train $W/train.txt --vocab-size 6400 --out $W/tokenizer
model=$(train_or_resume scripts/shakespeare_pretrain.yaml $W/pretrain --set time_budget_s=${PRETRAIN_S:-3000})
python -m scripts.finalize shakespeare --model "$model" --pretrain-run $W/pretrain \
  --out checkpoints/minimind-shakespeare
