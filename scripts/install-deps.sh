#!/usr/bin/env bash
# Installs what building and testing need on Debian 12 (run as root). Idempotent.
set -euo pipefail
# libcpp-httplib-dev: the HTTP server of `dsv4 serve`. Open MPI: pipeline stages across processes
# and machines (`mpirun -np N dsv4 ... --stages N`).
packages=(g++ cmake ninja-build pkg-config ca-certificates
          libgtest-dev libgmock-dev libbenchmark-dev nlohmann-json3-dev libcli11-dev libpcre2-dev
          libcpp-httplib-dev openmpi-bin libopenmpi-dev)
# Node.js and npm fetch the reference tokenizer for the conformance tests and the `openai`
# client for the server tests; any recent
# Node.js already on the machine will do.
command -v node >/dev/null && command -v npm >/dev/null || packages+=(nodejs npm)
# The sanitized runs (scripts/test.sh --sanitize): clang, libFuzzer and the symbolizer (llvm).
if [[ "${DSV4_SANITIZERS:-0}" == 1 ]]; then
  packages+=(clang libfuzzer-14-dev llvm)
fi
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
