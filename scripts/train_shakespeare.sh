#!/usr/bin/env bash
# Rebuild checkpoints/minimind-shakespeare from ../shared/corpora/shakespeare.txt (four plays held out).
# A step count on one pinned thread (scripts/shakespeare_pretrain.yaml); scripts.finalize copies the
# run's config.yaml and this command into checkpoints/minimind-shakespeare/training/.
set -euo pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} HF_HUB_OFFLINE=1
. scripts/_run.sh
W=work/shakespeare
python -c "from pathlib import Path; from scripts.corpora import write_shakespeare_split; write_shakespeare_split(Path('$W'))"
[ -f $W/tokenizer/tokenizer.json ] || \
  python -m minimind tokenizer train $W/train.txt --vocab-size 6400 --out $W/tokenizer
model=$(train_or_resume scripts/shakespeare_pretrain.yaml $W/pretrain)
python -m scripts.finalize shakespeare --model "$model" --pretrain-run $W/pretrain \
  --out checkpoints/minimind-shakespeare --command "bash scripts/train_shakespeare.sh"
