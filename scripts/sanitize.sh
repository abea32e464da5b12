#!/usr/bin/env bash
# The CPU code under AddressSanitizer and UndefinedBehaviorSanitizer (SSMCHECK_SANITIZE=ON, no
# CUDA) in build-sanitize/: the tests that exercise the readers (HDF5 dumps and traces, corrupted
# files included, libhdf5's crashes contained by the probe child), the judge, the campaigns and
# the plug-in host. Any report fails its test (no recovery). scripts/test runs it after the main
# suite; alone: scripts/sanitize.sh [extra ctest arguments].
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${SANITIZE_BUILD_DIR:-$root/build-sanitize}
jobs=${JOBS:-$(nproc)}
targets=(ssmcheck ssmcheck-plugin-host compare_tensor_test compare_state_test compare_dump_test trace_test
         hostile_input_test hosted_plugin_test plugin_test capabilities_test failure_report_test verdict_text_test
         property_test trace_capture_c)
mkdir -p "$build"
cmake -S "$root" -B "$build" -DSSMCHECK_SANITIZE=ON -DSSMCHECK_CUDA=OFF >"$build/configure.log" 2>&1 ||
  { cat "$build/configure.log"; exit 1; }
for t in "${targets[@]}"; do cmake --build "$build" -j"$jobs" --target "$t"; done
# leaks: the pinned and freed-memory caches are process-lifetime by design (docs/cuda.md); what
# the sanitizers are here for is memory errors and undefined behaviour. The fatal signals stay
# ssmcheck's own (its crash verdicts name the step that crashed: tests check them).
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0:halt_on_error=1:allow_user_segv_handler=1:handle_segv=0:handle_sigbus=0:handle_abort=0:handle_sigfpe=0:handle_sigill=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
cd "$build"
# every test the built executables hold (tests of executables not built here are not discovered);
# the script tests of the main build stay out, and so do the tests that cannot run under ASan:
# those that cap the address space with `ulimit -v` (ASan reserves terabytes of it for its shadow
# memory), one that loads the sanitized capture library into an unsanitized python (ctypes), and
# one that kills a replay once its first trace finished (its crash handler under ASan is not yet checked)
exec ctest --no-tests=error --output-on-failure -j"$jobs" -L cpu \
  -E '^(install|mutants|report|libfuzzer|python|bench_ab|speed_targets)|^Replay\.(HugeOpsAndPoolsAreErrorsBeforeAllocation|PythonExampleTraceReplays|ACrashLeavesAVerdictNamingTheTraceAndBackend)$|^HostileInput\.(PoolFlagsAndHugeModelsAreRefusedBeforeAllocating|ADumpDeclaringAHugeLayerIsRefusedBeforeReadingIt)$' "$@"
