#!/usr/bin/env bash
# Shared set-up of scripts/run and scripts/test: Debian packages, configure, build.
#   build.sh [TARGET...]   builds the named targets only (scripts/run: ssmcheck), else everything.
# BUILD_DIR (default build) and SSMCHECK_CUDA (AUTO|ON|OFF) may be set by the caller.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bash "$root/scripts/deps.sh"
build=${BUILD_DIR:-$root/build}
jobs=${JOBS:-$(nproc)}
mkdir -p "$build"
cmake -S "$root" -B "$build" -DSSMCHECK_CUDA="${SSMCHECK_CUDA:-AUTO}" >"$build/configure.log" 2>&1 ||
  { cat "$build/configure.log"; exit 1; }
# say whether the CUDA implementation is part of this build, and why not
grep -m1 "ssmcheck: CUDA implementation" "$build/configure.log" | sed 's/^-- //' >&2 || true
if (($#)); then
  for target in "$@"; do cmake --build "$build" -j"$jobs" --target "$target"; done
else
  cmake --build "$build" -j"$jobs"
fi
