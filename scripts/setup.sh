#!/usr/bin/env bash
# Sets up a fresh Debian 12 machine for trident and builds it: installs the Debian packages
# the project needs (only those missing, so a second run is quick), then configures and
# builds into build/. Safe to run again at any time.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(
  cmake g++ make pkg-config
  libgtest-dev googletest    # tests
  libcli11-dev               # command line
  nlohmann-json3-dev         # JSON output
  zlib1g-dev                 # gzip-compressed IDX files
  libdnnl-dev                # oneDNN: the fast CPU backend
  dataset-fashion-mnist      # the default training data, in /usr/share/datasets/fashion-mnist
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  sudo_cmd=()
  [ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

build_dir=${TRIDENT_BUILD_DIR:-build}
cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE=Release ${TRIDENT_CMAKE_ARGS:-} >/dev/null
cmake --build "$build_dir" -j"$(nproc)"
echo "setup: built $build_dir/trident"
