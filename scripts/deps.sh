#!/usr/bin/env bash
# Installs the Debian packages a build profile needs (CMakePresets.json); skips what is present.
#   deps.sh [cli|cuda|dev]    default dev (scripts/run, scripts/test)
#     cli   the CPU-only tool: compiler, CMake and the libraries ssmcheck links (no tests, no GPU)
#     cuda  the same (nvcc itself comes from NVIDIA's CUDA installation at /usr/local/cuda)
#     dev   everything scripts/test builds and runs: tests, Python, the browser test, libFuzzer
set -euo pipefail
profile=${1:-dev}
# the tool: compiler, CMake, the libraries it links (headers and static libraries included)
cli=(cmake g++ make libeigen3-dev libhdf5-dev librapidcheck-dev libcli11-dev libxxhash-dev nlohmann-json3-dev libfmt-dev)
case "$profile" in
  cli | cuda) pkgs=("${cli[@]}") ;;
  dev)
    pkgs=("${cli[@]}" hdf5-tools libgtest-dev libgmock-dev python3-h5py python3-numpy ccache
          python3-venv python3-setuptools python3-wheel   # ctest python_install: pip install ./python, offline
          dpkg-dev pkgconf python3-yaml   # tests/install.cmake: the .deb's dependencies, ssmcheck.pc, docs/ci.md's recipes
          clang libclang-rt-dev   # clang + libFuzzer: scripts/fuzz.sh
          clang-format   # scripts/format_check.sh: the changed lines against .clang-format
          chromium-headless-shell fonts-dejavu-core)  # the HTML report's browser test
    ;;
  *) echo "usage: deps.sh [cli|cuda|dev]" >&2; exit 2 ;;
esac
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "ssmcheck: installing ${missing[*]}"
  sudo=""; [ "$(id -u)" = 0 ] || sudo=sudo
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
if [ "$profile" = cuda ] && [ ! -x /usr/local/cuda/bin/nvcc ]; then
  echo "ssmcheck: the cuda profile needs nvcc at /usr/local/cuda/bin/nvcc (NVIDIA's CUDA toolkit; not a Debian package here)" >&2
  exit 1
fi
