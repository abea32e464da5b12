#!/usr/bin/env bash
# libFuzzer targets (fuzz/targets/*_fuzz.cpp), built with clang and ASan/UBSan into
# $BUILD_DIR/libfuzzer and run for SECONDS each (default 60) from their seed corpus
# (fuzz/targets/corpus/<target>/, which also keeps every input that ever found a bug).
#   scripts/fuzz.sh [SECONDS] [SEED]     exit 0: no finding; 1: a finding (its input is written
#                                        next to the binary: add it to the corpus once fixed)
#   FUZZ_RUNS=N scripts/fuzz.sh 0 SEED   N inputs instead of a time bound: the same inputs on any
#                                        machine (what ctest's libfuzzer.* tests run)
#   FUZZ_TARGET=NAME scripts/fuzz.sh ... one target only (op_script, file_reader)
#   exit 77: no clang with libFuzzer here (ctest reports the test as skipped)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
seconds=${1:-60}
seed=${2:-$(date +%s)}
out=${BUILD_DIR:-$root/build}/libfuzzer
mkdir -p "$out"
if ! command -v clang++ >/dev/null || ! echo 'extern "C" int LLVMFuzzerTestOneInput(const char*, unsigned long) { return 0; }' |
     clang++ -x c++ -fsanitize=fuzzer - -o "$out/probe" 2>/dev/null; then
  echo "scripts/fuzz.sh: no clang++ with libFuzzer (Debian: clang libclang-rt-dev): skipped"
  exit 77
fi
flags=(-std=c++17 -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -I "$root")
# target name -> the sources it needs besides itself, and what it links
declare -A sources=(
  [op_script]="core/op.cpp"
  [file_reader]="$(cd "$root" && ls core/*.cpp formats/*.cpp | grep -v core/mutant.cpp | tr "\n" " ")"
)
declare -A links=(
  [op_script]=""
  [file_reader]="-I/usr/include/hdf5/serial -L/usr/lib/x86_64-linux-gnu/hdf5/serial -lhdf5 -lfmt -DSSMCHECK_VERSION=\"fuzz\""
)
# per-target options: the file reader's inputs are whole HDF5 files, and each read forks a probe
declare -A options=([op_script]="" [file_reader]="-max_len=65536 -timeout=20")
status=0
for target in $(printf '%s\n' "${!sources[@]}" | sort); do
  [[ -n ${FUZZ_TARGET:-} && $target != "$FUZZ_TARGET" ]] && continue
  bin="$out/${target}_fuzz"
  srcs=()
  for s in ${sources[$target]}; do srcs+=("$root/$s"); done
  # shellcheck disable=SC2086
  clang++ "${flags[@]}" "$root/fuzz/targets/${target}_fuzz.cpp" "${srcs[@]}" ${links[$target]} -o "$bin"
  corpus="$out/corpus_$target"
  rm -rf "$corpus" && mkdir -p "$corpus" && cp "$root/fuzz/targets/corpus/$target/"* "$corpus/"
  bound=(-max_total_time="$seconds")
  [[ -n ${FUZZ_RUNS:-} ]] && bound=(-runs="$FUZZ_RUNS")
  bound_text="$seconds s"
  [[ -n ${FUZZ_RUNS:-} ]] && bound_text="$FUZZ_RUNS runs"
  echo "scripts/fuzz.sh: $target, $bound_text, seed $seed" \
       "(rerun: ${FUZZ_TARGET:+FUZZ_TARGET=$FUZZ_TARGET }${FUZZ_RUNS:+FUZZ_RUNS=$FUZZ_RUNS }scripts/fuzz.sh $seconds $seed)"
  # shellcheck disable=SC2086
  if ! (cd "$out" && LSAN_OPTIONS="suppressions=$root/fuzz/targets/lsan_suppressions.txt" "$bin" "${bound[@]}" -seed="$seed" ${options[$target]} -print_final_stats=1 "$corpus" 2>&1 | tail -12); then
    status=1
  fi
done
exit $status
