#!/usr/bin/env bash
# Structured-output fuzz: ~1000 cases (25 random JSON schemas × random-weight and partial-
# acceptance checkpoints × k = 0..4 × greedy and sampled × 2 prompts) generated under each
# schema's grammar by build/tests/dsv4_structured_output_fuzz, which checks the engine's own
# invariants (no token the matcher rejects, greedy with drafts == greedy without, drafts made
# and partly accepted, rollbacks). Then every completed output is parsed and validated against
# its schema by Ajv (npm `ajv` + `ajv-formats`, JSON Schema 2020-12) — a validator that shares
# no code with ours. Without registry access the npm half prints SKIP and exits 77 (skipped,
# never passed).
#
# usage: bash structured_output_fuzz.sh <dsv4 binary> <tests/data dir> <scratch dir>
set -euo pipefail
DSV4=$1
mkdir -p "$3"
SCRATCH=$(cd "$3" && pwd)
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
DRIVER=$(dirname "$DSV4")/tests/dsv4_structured_output_fuzz
NPM_DIR=$SCRATCH/npm-ajv
WORK=$SCRATCH/structured_output_fuzz
mkdir -p "$WORK"

[[ -x $DRIVER ]] || { echo "FAIL: $DRIVER not built"; exit 1; }
"$DRIVER" "$WORK/outputs.jsonl" "${DSV4_STRUCTURED_FUZZ_SCHEMAS:-25}" "${DSV4_STRUCTURED_FUZZ_SEED:-1}"

if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  echo "SKIP: node/npm not installed; the outputs were checked by the engine only, not validated by Ajv"
  exit 77
fi
if [[ ! -d $NPM_DIR/node_modules/ajv-formats ]]; then
  mkdir -p "$NPM_DIR"
  [[ -f $NPM_DIR/package.json ]] || echo '{"private": true}' >"$NPM_DIR/package.json"
  if ! npm install --prefix "$NPM_DIR" --no-audit --no-fund --no-save --fetch-timeout=30000 --fetch-retries=1 \
      ajv@8.17.1 ajv-formats@3.0.1 >"$SCRATCH/npm-ajv-install.log" 2>&1; then
    echo "SKIP: npm could not install ajv (no registry access?); see $SCRATCH/npm-ajv-install.log"
    exit 77
  fi
fi
NODE_PATH=$NPM_DIR/node_modules node "$HERE/structured_output_validate.js" "$WORK/outputs.jsonl"
