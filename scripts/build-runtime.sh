#!/usr/bin/env bash
# Builds mlc's runtime alone (-DMLC_RUNTIME_ONLY=ON: no LLVM or MLIR), as a
# GPU machine does to run packages compiled elsewhere.
#
#   scripts/build-runtime.sh DIR [--bare]
#
# --bare builds as if the CPU BLAS, oneDNN, ICU, Open MPI and protobuf were
# absent (what a bare CUDA machine may have): the CPU backend then multiplies
# with a plain loop, the tokenizers know ASCII only and there is no
# --tensorboard-dir.
set -euo pipefail
src="$(cd "$(dirname "$0")/.." && pwd)"
dir="$1"
shift || true
extra=()
if [[ "${1:-}" == "--bare" ]]; then
  extra=(-DCMAKE_DISABLE_FIND_PACKAGE_BLAS=ON -DCMAKE_DISABLE_FIND_PACKAGE_ICU=ON
         -DCMAKE_DISABLE_FIND_PACKAGE_MPI=ON -DCMAKE_DISABLE_FIND_PACKAGE_Protobuf=ON -DMLC_DNNL_INCLUDE=MLC_DNNL_INCLUDE-NOTFOUND
         -DMLC_DNNL_LIBRARY=MLC_DNNL_LIBRARY-NOTFOUND)
fi
generator=()
command -v ninja > /dev/null && generator=(-G Ninja)
cmake -S "$src" -B "$dir" "${generator[@]}" -DMLC_RUNTIME_ONLY=ON -DCMAKE_BUILD_TYPE=Release \
  "${extra[@]}" > "$dir.configure.log" 2>&1 || { cat "$dir.configure.log"; exit 1; }
cmake --build "$dir" --target mlc-runtime -j "$(nproc)" > "$dir.build.log" 2>&1 || {
  tail -50 "$dir.build.log"; exit 1; }
echo "$dir/bin/mlc-runtime"
