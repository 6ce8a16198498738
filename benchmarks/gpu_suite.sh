#!/usr/bin/env bash
# Record the benchmark table on a CUDA GPU, beside the CPU one:
#   bash benchmarks/gpu_suite.sh            # full settings (about 40 min on one GPU)
#   QUICK=1 bash benchmarks/gpu_suite.sh    # short settings (about 10 min)
# Writes benchmarks/gpu/RESULTS.md and results.json; the next CPU `python -m minimind bench`
# run includes them in benchmarks/RESULTS.md as the GPU section.
#
# What the GPU rows use, all picked by the trainer's own defaults for a CUDA device:
# bf16 autocast, fused AdamW, flash attention through SDPA (bf16, causal), regional
# torch.compile of the decoder layers; QLoRA loads the base through bitsandbytes'
# CUDA NF4 kernels. Benchmarks that are CPU-specific (data preparation, the
# step profile, export quality through llama.cpp) are left out.
set -euo pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1

python - <<'EOF'
import sys, torch
if not torch.cuda.is_available():
    sys.exit("gpu_suite.sh: no CUDA device visible to PyTorch")
print("GPU:", torch.cuda.get_device_name(0), "| bf16:", torch.cuda.is_bf16_supported(),
      "| flash SDPA:", torch.backends.cuda.flash_sdp_enabled())
try:
    import bitsandbytes  # noqa: F401  (QLoRA's 4-bit kernels)
except ImportError:
    print("warning: bitsandbytes is not installed: the QLoRA row will fail")
EOF

python -m minimind bench --device cuda --out benchmarks/gpu ${QUICK:+--quick} \
  --only train_throughput,finetune,byom,slices,decode_throughput,attention,quality "$@"
