#!/usr/bin/env bash
# CPU seconds (user + system, children included) and wall seconds of each
# test of the suite, one test per run, so that a test's cost is measured even
# on a loaded machine (CPU seconds barely move with the load; wall seconds do).
#
#   scripts/test-times.sh BUILD_DIR [-P N] [--cold] [--isolated] [--src DIR]
#                         [lit|ctest|all] [LIT_PATHS...]
#
# lit:   each lit file under BUILD_DIR/test, or the LIT_PATHS given (relative
#        to BUILD_DIR, e.g. test/cuda/emulator.test), as its own lit run;
# ctest: each CTest entry but `lit`, as its own ctest run; all: both.
# -P N:        N runs at once (CPU seconds stay per test).
# --cold:      empty BUILD_DIR's kernel cache first (a fresh CI build has none;
#              later tests then reuse what earlier ones compiled, as in CI).
# --isolated:  each lit file with its own empty kernel cache (its cost when it
#              runs alone; for comparing two versions of a file). The file
#              runs from a scratch object root whose bin/, venv/ and runtime/
#              are BUILD_DIR's.
# --src DIR:   with --isolated, take the tests from the source tree DIR (e.g.
#              an older checkout: `git worktree add /tmp/base main`) instead
#              of BUILD_DIR's, so that the same binaries time both versions.
# --lit-times FILE: merge the lit files' CPU seconds into FILE, in the form
#              of lit's .lit_test_times.txt (test/.lit_test_times.txt orders
#              a fresh build's lit run, the longest first); the entries of
#              the files not measured this time stay.
# Prints "cpu wall status name" lines as they finish (stderr), then all of
# them, the most expensive first, and the totals (stdout). lit's own start
# (~0.3 CPU s) is in every lit line.
set -euo pipefail
build="$(cd "$1" && pwd)"; shift
jobs=1; cold=0; isolated=0; src=""; what=all; times_file=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    -P) jobs="$2"; shift 2 ;;
    --cold) cold=1; shift ;;
    --isolated) isolated=1; shift ;;
    --src) src="$(cd "$2" && pwd)"; shift 2 ;;
    --lit-times) times_file="$(realpath "$2")"; shift 2 ;;
    lit|ctest|all) what="$1"; shift ;;
    *) break ;;
  esac
done
lit=/usr/lib/llvm-19/build/utils/lit/lit.py
out="$(mktemp -d /tmp/test-times.XXXXXX)"
trap 'rm -rf "$out"' EXIT
cd "$build"
[[ $cold == 1 ]] && rm -rf "$build/mlc-cache"
: > "$out/times"

# One lit file: `time` it, in BUILD_DIR or in a scratch object root.
cat > "$out/one-lit.sh" <<'EOF'
#!/usr/bin/env bash
set -u
t="$(mktemp)"; s=PASS; f="$1"; root="$BUILD"
if [[ $ISOLATED == 1 ]]; then
  root="$(mktemp -d "$OUT/root.XXXXXX")"
  ln -s "$BUILD/bin" "$BUILD/venv" "$BUILD/runtime" "$root/"
  mkdir -p "$root/test"
  args=(-e "s|^config.mlc_obj_root = .*|config.mlc_obj_root = \"$root\"|")
  if [[ -n $SRC ]]; then
    args+=(-e "s|^config.mlc_src_root = .*|config.mlc_src_root = \"$SRC\"|"
           -e "s|\"[^\"]*/test/lit.cfg.py\"|\"$SRC/test/lit.cfg.py\"|")
  fi
  sed "${args[@]}" "$BUILD/test/lit.site.cfg.py" > "$root/test/lit.site.cfg.py"
fi
cd "$root"
/usr/bin/time -o "$t" -f "%U %S %e" /usr/bin/python3 "$LIT" -q "$f" \
  > "$OUT/$(echo "$f" | tr / _).log" 2>&1 || s=FAIL
read -r u k e < "$t"; rm -f "$t"
[[ $ISOLATED == 1 ]] && rm -rf "$root"
printf "%.1f %.1f %s lit:%s\n" "$(echo "$u + $k" | bc)" "$e" "$s" "$f"
EOF
chmod +x "$out/one-lit.sh"
export BUILD="$build" OUT="$out" LIT="$lit" ISOLATED="$isolated" SRC="$src"

if [[ $what != ctest ]]; then
  if [[ $# -gt 0 ]]; then printf '%s\n' "$@"; else
    /usr/bin/python3 "$lit" --show-tests test | sed -n 's/^ *MLC :: /test\//p'
  fi > "$out/lit.list"
  xargs -a "$out/lit.list" -P "$jobs" -n 1 "$out/one-lit.sh" | tee -a "$out/times" >&2
fi
if [[ $what != lit ]]; then
  ctest -N | sed -n 's/^ *Test *#[0-9]*: //p' | grep -vx lit > "$out/ctest.list"
  # shellcheck disable=SC2016
  xargs -a "$out/ctest.list" -P "$jobs" -I{} bash -c '
    t=$(mktemp); s=PASS
    /usr/bin/time -o "$t" -f "%U %S %e" ctest -R "^{}\$" >/dev/null 2>&1 || s=FAIL
    read -r u k e < "$t"; rm -f "$t"
    printf "%.1f %.1f %s ctest:%s\n" "$(echo "$u + $k" | bc)" "$e" "$s" "{}"' \
    | tee -a "$out/times" >&2
fi
sort -rn "$out/times"
awk '{c += $1; w += $2; n++} END {printf "total: %d tests, %.1f CPU s, %.1f wall s (summed)\n", n, c, w}' \
  "$out/times"
if [[ -n $times_file ]]; then
  touch "$times_file"
  # "CPU NAME" per lit file, NAME relative to test/; new numbers replace old.
  { sed -n 's|^\([0-9.]*\) [0-9.]* PASS lit:test/\(.*\)$|new \1 \2|p' "$out/times"
    sed 's/^/old /' "$times_file"; } |
    awk '{ if (!($3 in t)) t[$3] = $2 } END { for (n in t) printf "%e %s\n", t[n], n }' |
    sort -k1,1gr > "$out/merged" && mv "$out/merged" "$times_file"
fi
