#!/usr/bin/env bash
# The checks that need the GPU machine, run there in one call (see README).
# Before the call, on the development machine:
#   /usr/bin/python3 scripts/hf_reference_prepare.py build/bin/mlc devicecheck
# then run this with `devicecheck` carried. Results go to $OUT (or ./device-out).
set -uo pipefail
out=${OUT:-device-out}
mkdir -p "$out"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv | tee "$out/gpu.txt"
# mlc's GPT-2 and BERT against HuggingFace transformers on the same weights.
if [ -d devicecheck ]; then
  timeout 300 python3 scripts/hf_reference_check.py devicecheck 2>&1 | tee "$out/hf_reference.txt"
fi
# The GPU peer of mlc's future CUDA backend: PyTorch eager and torch.compile.
timeout 420 python3 bench/torch_gpu_baseline.py --steps 10 2>&1 | grep -v Warning | tee "$out/gpu_baseline.txt"
