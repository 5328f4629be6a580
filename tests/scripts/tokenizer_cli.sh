#!/usr/bin/env bash
# `dsv4 tokenize` / `dsv4 detokenize` on the hand-made toy tokenizer (no network):
# output formats, the batch (--jsonl) forms, special-token skipping, and errors that
# name the offending id or file with a non-zero exit code.
#
# usage: bash tokenizer_cli.sh <dsv4 binary> <tests/data dir> <scratch dir>
set -uo pipefail

DSV4=$1
TOY=$2/tokenizer/toy_tokenizer.json
SCRATCH=$3/tokenizer_cli
mkdir -p "$SCRATCH"
failures=0
expect_eq() {  # name expected actual
  if [[ "$2" != "$3" ]]; then
    echo "FAIL $1: expected [$2], got [$3]"
    failures=$((failures + 1))
  fi
}
expect_out() {  # name expected command...: the command exits 0 and its stdout is expected
  # (checking the status too: a crash that prints nothing to stdout would match an empty expectation)
  local name=$1 expected=$2 output status
  shift 2
  output=$("$@")
  status=$?
  if [[ $status -ne 0 ]]; then
    echo "FAIL $name: exit code $status"; failures=$((failures + 1)); return
  fi
  expect_eq "$name" "$expected" "$output"
}
expect_error() {  # name needle command...
  local name=$1 needle=$2
  shift 2
  local output
  if output=$("$@" 2>&1); then
    echo "FAIL $name: exit code 0"; failures=$((failures + 1)); return
  fi
  [[ $output == *"$needle"* ]] || { echo "FAIL $name: message [$output] lacks [$needle]"; failures=$((failures + 1)); }
}

[[ -x $DSV4 ]] || { echo "FAIL: dsv4 binary not found at '$DSV4'"; exit 1; }

text='<think>Hi 12345 中文</think>'
expect_out "tokenize csv" "318,72,105,32,300,52,53,32,228,184,173,230,150,135,319" \
  "$DSV4" tokenize --tokenizer "$TOY" < <(printf '%s' "$text")
expect_out "tokenize json" '{"ids":[318,72,105,32,300,52,53,32,228,184,173,230,150,135,319]}' \
  "$DSV4" tokenize --tokenizer "$TOY" --json < <(printf '%s' "$text")
expect_out "tokenize empty" "" "$DSV4" tokenize --tokenizer "$TOY" < <(printf '')
expect_out "detokenize" "$text" \
  "$DSV4" detokenize --tokenizer "$TOY" --ids 318,72,105,32,300,52,53,32,228,184,173,230,150,135,319
expect_out "detokenize spaces in list" "ab" "$DSV4" detokenize --tokenizer "$TOY" --ids ' 97, 98 '
# 314 is <｜begin▁of▁sentence｜> (special), 318 <think> (not special)
expect_out "detokenize skip special" "<think>x" "$DSV4" detokenize --tokenizer "$TOY" --ids 314,318,120 --skip-special
expect_out "detokenize keeps special" "<｜begin▁of▁sentence｜><think>x" \
  "$DSV4" detokenize --tokenizer "$TOY" --ids 314,318,120

printf '%s\n' '"ab"' '"<think>"' '""' >"$SCRATCH/in.jsonl"
expect_out "tokenize jsonl" $'[290]\n[318]\n[]' "$DSV4" tokenize --tokenizer "$TOY" --jsonl <"$SCRATCH/in.jsonl"
printf '%s\n' '[290]' '[318,120]' '[]' >"$SCRATCH/ids.jsonl"
expect_out "detokenize jsonl" $'"ab"\n"<think>x"\n""' \
  "$DSV4" detokenize --tokenizer "$TOY" --jsonl <"$SCRATCH/ids.jsonl"

expect_error "unknown id" "unknown token id 99999" "$DSV4" detokenize --tokenizer "$TOY" --ids 1,99999
expect_error "bad id" "'x1' is not a token id" "$DSV4" detokenize --tokenizer "$TOY" --ids 1,x1
expect_error "missing file" "cannot read tokenizer file '$SCRATCH/nope.json'" \
  "$DSV4" tokenize --tokenizer "$SCRATCH/nope.json" </dev/null
echo '{"model": ' >"$SCRATCH/broken.json"
expect_error "malformed file" "malformed JSON in tokenizer file '$SCRATCH/broken.json'" \
  "$DSV4" tokenize --tokenizer "$SCRATCH/broken.json" </dev/null
expect_error "invalid UTF-8" "invalid UTF-8 at byte offset 1" \
  bash -c "printf 'a\\xff' | '$DSV4' tokenize --tokenizer '$TOY'"
expect_error "jsonl not a string" "stdin line 1" bash -c "echo 42 | '$DSV4' tokenize --tokenizer '$TOY' --jsonl"

if [[ $failures -ne 0 ]]; then
  echo "FAIL: $failures tokenizer CLI checks failed"
  exit 1
fi
echo "PASS: tokenizer CLI"
