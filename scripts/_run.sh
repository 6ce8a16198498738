# Shared by the recipes: run or resume one training run folder, print its final checkpoint.
train_or_resume() {  # CONFIG RUN_DIR [--set k=v ...]
  local config=$1 run=$2; shift 2
  local state
  state=$(python -c "import json,sys; print(json.load(open(sys.argv[1])).get('state',''))" "$run/status.json" 2>/dev/null || true)
  if [ "$state" = "finished" ]; then
    echo "$run already finished" >&2
  elif [ -f "$run/config.yaml" ] && ls "$run/checkpoints" 2>/dev/null | grep -q '^step-'; then
    python -m minimind train --run-dir "$run" --resume --no-progress >&2
  else
    python -m minimind train --config "$config" --run-dir "$run" --no-progress "$@" >&2
  fi
  python -c "import json,sys; print(json.load(open(sys.argv[1]))['final_checkpoint'])" "$run/status.json"
}
