#!/bin/bash
# A real coding agent against `dsv4 serve`: the Codex CLI (npm @openai/codex) runs one
# non-interactive turn (`codex exec`) over the Responses API, inside a network namespace that has
# only the loopback interface, so the turn completes without any other host. The checkpoint's
# weights are random: the test aid that forces a reply makes the model answer "alpha beta gamma
# delta", which Codex must print as the agent's message. Skipped (77) where the package cannot be
# installed or no network namespace can be made.
# Usage: run.sh <dsv4 binary> <tests/data> <scratch dir>
set -euo pipefail
dsv4=$(realpath "$1") data=$(realpath "$2") tmp=$(realpath -m "$3")
here=$(cd "$(dirname "$0")" && pwd)
work=$tmp/codex-agent
mkdir -p "$work"
cd "$work"
if [ ! -x node_modules/.bin/codex ] && ! npm install --no-audit --no-fund --loglevel=error @openai/codex@0 >npm.log 2>&1; then
  cat npm.log
  echo "skipped: cannot install the @openai/codex npm package"
  exit 77
fi
if ! unshare -n true 2>/dev/null; then
  echo "skipped: cannot make a network namespace (unshare -n needs root or user namespaces)"
  exit 77
fi
if [ ! -f ckpt/config.json ]; then
  cp "$data"/tokenizer/toy_tokenizer.json tokenizer.json
  # Codex's instructions and tools are ~23k tokens: a context the mirror preset's 4096 cannot hold.
  "$dsv4" make-checkpoint --preset mirror --perturb 0.05 --seed 3 --quiet --out ckpt --tokenizer tokenizer.json \
    --set max_position_embeddings=65536
  cp "$data"/tokenizer/toy_tokenizer_config.json ckpt/tokenizer_config.json
fi
mkdir -p home project
cat >home/config.toml <<TOML
model = "ckpt"
model_provider = "dsv4"
check_for_update_on_startup = false
[model_providers.dsv4]
name = "dsv4 serve"
base_url = "http://127.0.0.1:18080/v1"
wire_api = "responses"
env_key = "DSV4_API_KEY"
TOML
export dsv4 here work
unshare -n bash -c '
  set -euo pipefail
  ip link set lo up
  "$dsv4" serve --model "$work/ckpt" --port 18080 --threads 2 --max-context 32768 --api-key local-key \
    --force-output-file "$here/../openai_client/forced_outputs.json" >"$work/server.log" 2>&1 &
  server=$!
  trap "kill $server 2>/dev/null || true" EXIT
  for _ in $(seq 1 300); do
    grep -q "ready:" "$work/server.log" && break
    sleep 0.1
  done
  cd "$work/project"
  CODEX_HOME="$work/home" DSV4_API_KEY=local-key timeout 600 "$work/node_modules/.bin/codex" exec \
    --skip-git-repo-check "FORCE_STOP say hello" </dev/null >"$work/codex.out" 2>"$work/codex.err" || true
'
if grep -qx "alpha beta gamma delta" codex.out && grep -q "request 1:" server.log; then
  echo "ok   codex exec completed a turn against dsv4 serve (offline):"
  cat codex.out
  grep "request\|left out" server.log
  exit 0
fi
echo "FAIL codex exec did not complete its turn"
echo "--- codex stdout"; cat codex.out
echo "--- codex stderr"; tail -30 codex.err
echo "--- server log"; tail -30 server.log
exit 1
