#!/usr/bin/env bash
# The runtime-only build a GPU machine makes (scripts/build-runtime.sh
# --bare: no LLVM, MLIR, BLAS, ICU, MPI or protobuf) builds, links none of
# LLVM, MLIR, CUDA or protobuf, trains a package compiled by the full build
# with the losses of the full build's runtime, and refuses --tensorboard-dir.
#
#   scripts/check-runtime-only.sh BUILD_DIR
set -euo pipefail
src="$(cd "$(dirname "$0")/.." && pwd)"
build="$(cd "$1" && pwd)"
work="$build/runtime-only-check"
rm -rf "$work" && mkdir -p "$work"
runtime=$("$src/scripts/build-runtime.sh" "$work/build" --bare | tail -1)
if ldd "$runtime" | grep -E "libLLVM|libMLIR|libcuda|libnvrtc|libcublas|libopenblas|libicu|libprotobuf"; then
  echo "FAIL: the runtime-only build links the libraries above"
  exit 1
fi
python=${MLC_TEST_PYTHON:-/usr/bin/python3}
"$python" -c "import numpy as np; ids = np.random.default_rng(0).integers(0, 256, (4, 2, 16)); np.save('$work/input_ids.npy', ids); np.save('$work/labels.npy', ids)"
"$build/bin/mlc" compile gpt2 --config tiny,n_layer=1 --micro-batch 2 --seq-len 16 -o "$work/pkg" > /dev/null
export MLC_CACHE_DIR="$build/mlc-cache"
"$build/bin/mlc-runtime" train "$work/pkg" --batches "$work" --steps 4 --log-json "$work/full.jsonl" > /dev/null 2>&1
"$runtime" train "$work/pkg" --batches "$work" --steps 4 --log-json "$work/bare.jsonl" > /dev/null 2>&1
"$python" "$src/test/integration/Inputs/compare_logs.py" "$work/bare.jsonl" "$work/full.jsonl" 1e-5
# Without protobuf there is no TensorBoard writer: --tensorboard-dir says so
# before the run starts.
if "$runtime" train "$work/pkg" --batches "$work" --steps 1 --tensorboard-dir "$work/tb" \
    > /dev/null 2> "$work/tb.err" || ! grep -q "no TensorBoard writer" "$work/tb.err"; then
  echo "FAIL: --tensorboard-dir in the runtime-only build:"; cat "$work/tb.err"; exit 1
fi
