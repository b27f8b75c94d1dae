#!/usr/bin/env bash
# The checks that need the GPU machine, in one call (at most 10 minutes).
#
# Before the call, on the development machine (which has LLVM):
#   scripts/device-prepare.sh        packages, batches and CPU results -> devicecheck/
# then run `scripts/device-check.sh` there with devicecheck carried. Results go
# to $OUT (else ./device-out); summary.txt holds the numbers.
#
# DEVICE=cuda-emulator runs the parity part on a machine without a GPU (the
# CUDA kernels emulated on the CPU: a dry run of this script); the speed part
# needs DEVICE=cuda.
#
# 1. builds the runtime alone (scripts/build-runtime.sh: no LLVM there);
# 2. parity: GPT-2 (also with bucket-wise clipping, and in bf16), BERT padded
#    and BERT unpadded (also in bf16; bf16 attention runs on tensor cores)
#    (tiny, dropout on) train 10 steps on the device;
#    losses within 1e-4 of the CPU's computed here (bf16: 1e-2; its f32
#    losses within 2e-2), weights within 1e-3 (f32; but the attention key
#    bias, whose gradient is rounding noise), and the CUDA graph and step-by-step
#    launches agree; the bucket case also through NCCL at one rank; GPT-2
#    bf16 also with the biases added by a kernel (MLC_CUBLASLT_EPILOGUE=0)
#    instead of cuBLASLt's bias epilogue;
# 3. speed: GPT-2 124M, seq 1024, micro-batch 8 and 16, f32 and bf16:
#    ms/step, tokens/s and MFU, with and without the CUDA graph, bf16 B8
#    without the bias epilogue, and the NCCL path's cost at one rank; the
#    per-kernel time table (MLC_PROFILE=1);
#    PyTorch eager and torch.compile on the same model, batch and optimizer
#    in fp32 and bf16 (bench/torch_gpu_baseline.py).
set -uo pipefail
src="$(cd "$(dirname "$0")/.." && pwd)"
out=$(mkdir -p "${OUT:-$src/device-out}" && cd "${OUT:-$src/device-out}" && pwd)
device=${DEVICE:-cuda}
summary="$out/summary.txt"
: > "$summary"
say() { echo "$*" | tee -a "$summary"; }
python=${PYTHON:-$(command -v python3)}
start=$(date +%s)

if [ ! -d "$src/devicecheck" ]; then
  say "FAIL: no devicecheck/ (run scripts/device-prepare.sh and carry devicecheck)"
  exit 1
fi
command -v nvidia-smi > /dev/null &&
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee -a "$summary"

# 1. The runtime, built here.
t0=$(date +%s)
if ! runtime=$("$src/scripts/build-runtime.sh" "${MLC_RUNTIME_BUILD:-/tmp/mlc-runtime-build}" | tail -1); then
  say "FAIL: the runtime-only build failed"
  exit 1
fi
say "runtime built in $(( $(date +%s) - t0 )) s: $runtime"
grep -h "^-- mlc:" "${MLC_RUNTIME_BUILD:-/tmp/mlc-runtime-build}.configure.log" | tee -a "$summary"
export MLC_CACHE_DIR=${MLC_CACHE_DIR:-/tmp/mlc-cache}

# 2. Parity with the CPU.
cd "$src/devicecheck"
while read -r name args; do
  skip=c_attn.bias tol=1e-4 wtol=1e-3
  [[ "$name" == bert* ]] && skip=attention.self.key.bias
  [[ "$name" == *bf16 ]] && tol=1e-2
  t0=$(date +%s)
  timeout 240 "$runtime" train "$name/pkg" $args --steps 10 --device "$device" --progress plain \
    --log-json "$out/$name.jsonl" --save "$out/$name.safetensors" 2> "$out/$name.err"
  rc=$?
  if [ $rc -ne 0 ]; then
    say "$name: FAIL (exit $rc): $(tail -3 "$out/$name.err" | tr '\n' ' ')"
    continue
  fi
  say "$name ($device, $(( $(date +%s) - t0 )) s): losses $("$python" compare_logs.py "$out/$name.jsonl" "$name/cpu.jsonl" $tol | tr '\n' ' ')"
  # (bf16: losses only. AdamW moves every weight by about the learning rate
  # whatever its gradient's size, so zero-initialized biases whose updates
  # differ by bf16 rounding differ relative to their own small size.)
  [[ "$name" != *bf16 ]] &&
    say "$name: weights $("$python" compare_safetensors.py "$out/$name.safetensors" "$name/cpu.safetensors" $wtol "$skip")"
  [[ "$name" == *bf16 ]] &&
    say "$name: against f32: $("$python" compare_logs.py "$out/$name.jsonl" "${name%-bf16}/cpu.jsonl" 2e-2 | tr '\n' ' ')"
  if [ "$name" = gpt2-bf16 ]; then # the biases added by a kernel instead of cuBLASLt's epilogue
    MLC_CUBLASLT_EPILOGUE=0 timeout 120 "$runtime" train "$name/pkg" $args --steps 10 --device "$device" \
      --log-json "$out/$name.biaskernel.jsonl" > /dev/null 2>&1
    say "$name: bias kernels vs cuBLASLt bias epilogue: $("$python" compare_logs.py "$out/$name.biaskernel.jsonl" "$out/$name.jsonl" 1e-4 | tr '\n' ' ')"
  fi
  if [ "$device" = cuda ] || [ "$name" = gpt2-bucket ]; then
    MLC_CUDA_GRAPH=0 timeout 120 "$runtime" train "$name/pkg" $args --steps 10 --device "$device" \
      --log-json "$out/$name.nograph.jsonl" > /dev/null 2>&1
    say "$name: CUDA graph vs step by step: $("$python" compare_logs.py "$out/$name.nograph.jsonl" "$out/$name.jsonl" 1e-12 | tr '\n' ' ')"
    if [[ "$name" == *bucket ]]; then
      MLC_NCCL=1 timeout 120 "$runtime" train "$name/pkg" $args --steps 10 --device "$device" \
        --log-json "$out/$name.nccl.jsonl" > "$out/$name.nccl.err" 2>&1
      say "$name: NCCL at one rank vs none: $("$python" compare_logs.py "$out/$name.nccl.jsonl" "$out/$name.jsonl" 1e-12 | tr '\n' ' ') $(tail -1 "$out/$name.nccl.err")"
    fi
  fi
done < cases.txt

if [ "$device" != cuda ]; then
  say "speed: skipped (DEVICE=$device)"
  exit 0
fi

# 3. Speed: GPT-2 124M.
steady() { # JSONL: the median ms/step past the first 3 steps, tokens/s, MFU
  "$python" - "$1" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])][3:]
ms = statistics.median(r["ms"] for r in rows)
tps = statistics.median(r["tokens_per_s"] for r in rows)
mfu = statistics.median(r["mfu"] for r in rows)
print(f"{ms:.1f} ms/step, {tps:.0f} tokens/s, MFU {mfu:.3f} (of the device's peak for the GEMMs' type)")
PY
}
for mb in 8 16; do
  for type in f32 bf16; do
    pkg="small-b$mb/pkg" && [ $type = bf16 ] && pkg="small-b$mb/pkg-bf16"
    name="small-b$mb-$type"
    timeout 200 "$runtime" train "$pkg" --batches "small-b$mb" --steps 20 --device cuda --progress plain \
      --log-json "$out/$name.jsonl" 2> "$out/$name.err" ||
      { say "gpt2 small b$mb $type: FAIL: $(tail -3 "$out/$name.err" | tr '\n' ' ')"; continue; }
    say "mlc gpt2 small (124M) B$mb S1024 $type, CUDA graph: $(steady "$out/$name.jsonl")"
    MLC_CUDA_GRAPH=0 timeout 120 "$runtime" train "$pkg" --batches "small-b$mb" --steps 10 --device cuda \
      --log-json "$out/$name.nograph.jsonl" > /dev/null 2>&1 &&
      say "mlc gpt2 small (124M) B$mb S1024 $type, step by step: $(steady "$out/$name.nograph.jsonl")"
  done
done
MLC_CUBLASLT_EPILOGUE=0 timeout 120 "$runtime" train small-b8/pkg-bf16 --batches small-b8 --steps 12 --device cuda \
  --log-json "$out/small-b8-bf16.biaskernel.jsonl" > /dev/null 2>&1 &&
  say "mlc gpt2 small (124M) B8 S1024 bf16, biases by a kernel, not cuBLASLt's epilogue: $(steady "$out/small-b8-bf16.biaskernel.jsonl")"
for nccl in 0 1; do
  MLC_NCCL=$nccl timeout 120 "$runtime" train small-b8/pkg-buckets --batches small-b8 --clip bucket --steps 12 \
    --device cuda --log-json "$out/buckets-nccl$nccl.jsonl" > "$out/buckets-nccl$nccl.err" 2>&1 &&
    say "mlc gpt2 small B8 f32, 25 MB buckets, NCCL at one rank $nccl: $(steady "$out/buckets-nccl$nccl.jsonl")"
done
MLC_PROFILE=all timeout 120 "$runtime" train small-b8/pkg-bf16 --batches small-b8 --steps 4 --device cuda \
  --progress plain > "$out/profile.txt" 2>&1
grep "mlc profile" "$out/profile.txt" | head -60 | tee -a "$summary"

cd "$src"
left=$(( 560 - ($(date +%s) - start) ))
if [ $left -gt 60 ]; then
  timeout $(( left / 2 )) "$python" bench/torch_gpu_baseline.py --steps 10 --dtype fp32 2>&1 |
    grep -E "gpt2|NVIDIA" | tee -a "$summary"
  left=$(( 560 - ($(date +%s) - start) ))
  [ $left -gt 30 ] && timeout $left "$python" bench/torch_gpu_baseline.py --steps 10 --dtype bf16 2>&1 |
    grep -E "gpt2" | tee -a "$summary"
fi
say "device-check done in $(( $(date +%s) - start )) s"
