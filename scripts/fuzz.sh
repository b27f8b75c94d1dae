#!/usr/bin/env bash
# libFuzzer targets for the readers of untrusted input (JSON, safetensors,
# .npy, plan.txt, indexed datasets, ONNX models), built with clang, ASan and
# UBSan. The ONNX target instruments the importer and links the build's MLIR
# dialect library (BUILD_DIR must hold a build).
#   scripts/fuzz.sh [BUILD_DIR] [SECONDS_PER_TARGET | -runs=N] [TARGET...]
# `make test` runs each target briefly on the seed corpus (fuzz/corpus/); a
# campaign passes seconds. New inputs go to BUILD_DIR/fuzz/corpus-TARGET, a
# crash to BUILD_DIR/fuzz/crash-* (the input that reproduces it). TARGETs
# (json safetensors npy plan indexed onnx) pick some; all by default. A
# campaign's record: fuzz/CAMPAIGNS.md.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
budget=${2:--runs=2000}
[[ "$budget" == -* ]] || budget="-max_total_time=$budget"
shift $(($# < 2 ? $# : 2))
targets=" ${*:-json safetensors npy plan indexed onnx} "
cxx=${FUZZ_CXX:-clang++}
out="$build/fuzz"
mkdir -p "$out"
if ! echo 'extern "C" int LLVMFuzzerTestOneInput(const unsigned char *, unsigned long) { return 0; }' |
    "$cxx" -x c++ -fsanitize=fuzzer - -o "$out/probe" 2> /dev/null; then
  echo "fuzz: $cxx cannot build libFuzzer targets; skipped"
  exit 0
fi
common=(support/Json.cpp support/TensorIO.cpp runtime/core/PlanFormat.cpp runtime/core/PlanWrite.cpp
        runtime/data/IndexedDataset.cpp)
flags=(-std=c++17 -O1 -g -I. -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined)
run_target() {
  local target=$1 bin=$2
  shift 2
  mkdir -p "$out/corpus-$target"
  echo "fuzz: $target ($budget)"
  ASAN_OPTIONS=detect_leaks=0 "$bin" "$budget" -timeout=10 -rss_limit_mb=2048 "$@" \
    -artifact_prefix="$out/crash-$target-" -print_final_stats=0 \
    "$out/corpus-$target" "fuzz/corpus/$target" 2>&1 | grep -E "Done [0-9]+ runs|DONE|ERROR|SUMMARY|crash-" || true
  if ls "$out"/crash-"$target"-* > /dev/null 2>&1; then
    echo "fuzz: $target found a crash: $(ls "$out"/crash-"$target"-* | head -1)"
    exit 1
  fi
}
# The sources every reader's target links, compiled (instrumented) once per
# run that rebuilds a target, not once per target.
common_objs=()
compile_common() {
  [[ ${#common_objs[@]} -gt 0 ]] && return
  mkdir -p "$out/obj"
  local src obj
  for src in "${common[@]}"; do
    obj="$out/obj/$(echo "$src" | tr / _).o"
    "$cxx" "${flags[@]}" -c "$src" -o "$obj"
    common_objs+=("$obj")
  done
}
for target in json safetensors npy plan indexed; do
  [[ "$targets" == *" $target "* ]] || continue
  bin="$out/fuzz_$target"
  if [[ ! -x "$bin" || "fuzz/fuzz_$target.cpp" -nt "$bin" ]] ||
     [[ -n "$(find "${common[@]}" runtime/core runtime/data/IndexedDataset.h -newer "$bin" 2> /dev/null)" ]]; then
    compile_common
    "$cxx" "${flags[@]}" "fuzz/fuzz_$target.cpp" "${common_objs[@]}" -o "$bin"
  fi
  run_target "$target" "$bin"
done
# The ONNX importer: instrumented itself, linked with the build's dialect.
if [[ "$targets" == *" onnx "* && -f "$build/lib/libMLCDialect.a" ]]; then
  bin="$out/fuzz_onnx"
  if [[ ! -x "$bin" || -n "$(find fuzz/fuzz_onnx.cpp frontend/onnx "$build/lib/libMLCDialect.a" -newer "$bin" 2> /dev/null)" ]]; then
    llvm=/usr/lib/llvm-19
    "$cxx" "${flags[@]}" -I"$build" -isystem "$llvm/include" -DONNX_NAMESPACE=onnx -DONNX_ML=1 \
      fuzz/fuzz_onnx.cpp frontend/onnx/*.cpp support/TensorIO.cpp \
      support/Json.cpp "$build/lib/libMLCDialect.a" -L"$llvm/lib" -lMLIR -lLLVM \
      -lonnx_proto -lprotobuf -Wl,-rpath,"$llvm/lib" -o "$bin"
  fi
  run_target onnx "$bin" -max_len=65536
fi
echo "fuzz: all targets clean"
