#!/usr/bin/env bash
# Installs dependencies, builds, and runs every test (ctest prints the closing summary).
#   bash scripts/test.sh [ctest args]              the suite (Release build in ./build)
#   bash scripts/test.sh --sanitize [ctest args]   then the safety nets (scripts/sanitize.sh): the suite
#                                                  under ASan + UBSan, TSan on the threaded code, fuzzing
set -euo pipefail
cd "$(dirname "$0")/.."
sanitize=0
if [[ "${1:-}" == "--sanitize" ]]; then
  sanitize=1
  shift
fi
DSV4_SANITIZERS=$sanitize bash scripts/install-deps.sh
bash scripts/build.sh
(cd build && ctest --output-on-failure -j"$(nproc)" "$@")
if ((sanitize)); then
  bash scripts/sanitize.sh "$@"
fi
