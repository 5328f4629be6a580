#!/usr/bin/env bash
# Starts `dsv4 serve` on a tiny checkpoint with the toy tokenizer and runs the openai-client
# tests against it. Usage: run.sh <dsv4 binary> <tests/data> <scratch dir>.
# Exit 77 (skipped) when the openai package cannot be installed (no registry).
set -euo pipefail
dsv4=$1 data=$2 tmp=$3
here=$(cd "$(dirname "$0")" && pwd)
work=$tmp/openai-client
mkdir -p "$work"
cp "$here"/package.json "$here"/*.mjs "$work"/
cd "$work"
if { [ ! -d node_modules/openai ] || [ ! -d node_modules/@anthropic-ai/sdk ]; } && ! npm install --no-audit --no-fund --loglevel=error >npm.log 2>&1; then
  cat npm.log
  echo "skipped: cannot install the openai and @anthropic-ai/sdk npm packages"
  exit 77
fi

# The checkpoint: mirror weights (drafts accepted often, not always), the toy tokenizer.
if [ ! -f ckpt/config.json ]; then
  mkdir -p tok
  cp "$data"/tokenizer/toy_tokenizer.json tok/tokenizer.json
  cp "$data"/tokenizer/toy_tokenizer_config.json tok/tokenizer_config.json
  "$dsv4" make-checkpoint --preset mirror --perturb 0.05 --seed 3 --quiet --out ckpt --tokenizer tok/tokenizer.json
fi

pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; }
trap cleanup EXIT

# A DSpark checkpoint (DeepSeek-V4-Flash-0731's drafter; drafts accepted often, not always), the same tokenizer.
if [ ! -f ckpt-dspark/config.json ]; then
  "$dsv4" make-checkpoint --preset mirror-dspark --perturb 0.15 --seed 7 --quiet --out ckpt-dspark --tokenizer tok/tokenizer.json \
    --set dspark_noise_token_id=320  # (inside the toy vocabulary)
fi

# Starts a server in the background (its pid appended to $pids); MODEL (default ckpt) picks the checkpoint.
start_server() {
  local log=$1; shift
  : >"$log"  # exists before the server's shell opens it: readers never race its creation
  "$dsv4" serve --model "${MODEL:-ckpt}" --port 0 --threads 2 --force-output-file "$here"/forced_outputs.json "$@" \
    >"$log" 2>&1 &
  pids+=($!)
}
# The port of the server logging to $1, once it answers /health.
server_port() {
  local port=""
  for _ in $(seq 1 300); do
    port=$(sed -n 's/.*listening on http:\/\/[^:]*:\([0-9]*\).*/\1/p' "$1" | head -1)
    if [ -n "$port" ] && node -e "fetch(process.argv[1]).then(r => process.exit(r.ok ? 0 : 1), () => process.exit(1))" \
         "http://127.0.0.1:$port/health"; then
      echo "$port"
      return 0
    fi
    sleep 0.1
  done
  cat "$1" >&2
  return 1
}

# While the checkpoint loads, /health answers 503 (an OpenAI-shaped error) and generation is
# refused the same way; once loaded, 200.
start_server loading.log --max-context 2048 --load-delay-ms 3000
for _ in $(seq 1 100); do
  loading=$(sed -n 's/.*listening on http:\/\/[^:]*:\([0-9]*\).*/\1/p' loading.log | head -1)
  [ -n "$loading" ] && break
  sleep 0.05
done
node --input-type=module -e '
const [base] = process.argv.slice(1);
const get = async (path, init) => { const r = await fetch(base + path, init); return [r.status, await r.json()]; };
const [health, body] = await get("/health");
const [gen] = await get("/v1/completions", { method: "POST", body: JSON.stringify({ prompt: [1, 2], max_tokens: 1 }),
                                             headers: { "content-type": "application/json" } });
if (health !== 503 || !body.error || !body.error.message || gen !== 503) {
  console.error("while loading: /health", health, JSON.stringify(body), "completions", gen); process.exit(1);
}
for (let i = 0; i < 200; ++i) {
  if ((await fetch(base + "/health")).status === 200) { console.log("ok   /health: 503 while loading, then 200"); process.exit(0); }
  await new Promise((r) => setTimeout(r, 50));
}
console.error("never became ready"); process.exit(1);
' "http://127.0.0.1:$loading" || { echo "--- loading server log"; cat loading.log; exit 1; }
kill "${pids[0]}"; pids=()

start_server main.log --draft 2 --max-sequences 4 --max-waiting 48 --max-context 4096 --api-key test-key
start_server busy.log --max-sequences 1 --max-waiting 1 --max-context 2048 --heartbeat-after-ms 200
port=$(server_port main.log)
busy=$(server_port busy.log)
status=0
node api_test.mjs "http://127.0.0.1:$port" "http://127.0.0.1:$busy" || status=$?
if [ $status -eq 0 ]; then node structured_test.mjs "http://127.0.0.1:$port" || status=$?; fi
if [ $status -eq 0 ]; then node batching_test.mjs "http://127.0.0.1:$port" || status=$?; fi
if [ $status -eq 0 ]; then node load_test.mjs "http://127.0.0.1:$port" || status=$?; fi
if [ $status -eq 0 ]; then node messages_test.mjs "http://127.0.0.1:$port" || status=$?; fi
if [ $status -eq 0 ]; then node responses_test.mjs "http://127.0.0.1:$port" || status=$?; fi
if [ $status -eq 0 ]; then
  start_server cold.log --draft 2 --max-sequences 4 --max-context 4096 --no-prefix-cache
  start_server tight.log --draft 2 --max-sequences 4 --max-context 4096 --prefix-cache-memory 1M
  coldport=$(server_port cold.log)
  tightport=$(server_port tight.log)
  node prefix_test.mjs "http://127.0.0.1:$port" "http://127.0.0.1:$coldport" "http://127.0.0.1:$tightport" ||
    { status=$?; echo "--- tight server log"; tail -20 tight.log; }
  kill "${pids[-1]}" "${pids[-2]}"
fi
if [ $status -eq 0 ]; then
  MODEL=ckpt-dspark start_server dspark.log --draft auto --max-sequences 4 --max-context 2048
  dspark=$(server_port dspark.log)
  node dspark_test.mjs "http://127.0.0.1:$dspark" || { status=$?; echo "--- DSpark server log"; tail -30 dspark.log; }
  kill "${pids[-1]}"
fi
# The server stops cleanly on SIGTERM.
kill -TERM "${pids[0]}"
wait "${pids[0]}" || { echo "dsv4 serve exited with $? on SIGTERM"; status=1; }
# Each finished request's outcome is logged in one line, with its drafts (the main server drafts 2).
outcomes=$(grep -c 'dsv4 serve: request [0-9]*: [a-z_]* after [0-9]* tokens in' main.log || true)
if [ "$outcomes" -lt 10 ] || ! grep -q 'drafts accepted (' main.log; then
  echo "request outcome lines in the main server's log: $outcomes"; status=1
fi
if [ $status -ne 0 ]; then echo "--- server log"; tail -50 main.log; fi
exit $status
