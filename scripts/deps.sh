#!/usr/bin/env bash
# Installs the Debian packages ssmcheck builds and tests with; skips what is present.
set -euo pipefail
pkgs=(cmake g++ make libeigen3-dev libhdf5-dev hdf5-tools libgtest-dev libgmock-dev
      librapidcheck-dev libcli11-dev libxxhash-dev nlohmann-json3-dev libfmt-dev python3-h5py python3-numpy ccache
      python3-venv python3-setuptools python3-wheel   # ctest python_install: pip install ./python, offline
      clang libclang-rt-dev   # clang + libFuzzer: scripts/fuzz.sh
      chromium-headless-shell fonts-dejavu-core)  # the HTML report's browser test
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
