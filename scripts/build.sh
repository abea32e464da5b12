#!/usr/bin/env bash
# Shared set-up of scripts/run and scripts/test: Debian packages, configure, build.
# BUILD_DIR (default build) and SSMCHECK_CUDA (AUTO|ON|OFF) may be set by the caller.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bash "$root/scripts/deps.sh"
build=${BUILD_DIR:-$root/build}
jobs=${JOBS:-$(nproc)}
mkdir -p "$build"
cmake -S "$root" -B "$build" -DSSMCHECK_CUDA="${SSMCHECK_CUDA:-AUTO}" >"$build/configure.log" 2>&1 ||
  { cat "$build/configure.log"; exit 1; }
cmake --build "$build" -j"$jobs"
