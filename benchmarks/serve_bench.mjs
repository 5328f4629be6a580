// Serving benchmark: time to first token and tokens/s of N concurrent streaming completions
// against a running `dsv4 serve`, with and without MTP drafting, and the acceptance the
// server's /metrics report. Plain fetch (Node >= 18), no packages.
//
//   node benchmarks/serve_bench.mjs --url http://127.0.0.1:8080 [--streams 1,4,16] [--drafts 0,2,auto]
//        [--prompt-tokens 64] [--max-tokens 32] [--rounds 1] [--json]
//
// Each stream gets its own random prompt of token ids (same seed every run) and greedy
// decoding with ignore_eos, so every configuration generates the same number of tokens.
// Reported per configuration (medians over streams): time to first token, a stream's decode
// rate after its first token, and the aggregate rate (all completion tokens / wall time).
const args = {};
for (let i = 2; i < process.argv.length; ++i) {
  const a = process.argv[i], next = process.argv[i + 1];
  if (!a.startsWith('--')) continue;
  args[a.slice(2)] = next === undefined || next.startsWith('--') ? 'true' : (++i, next);
}
const url = args.url ?? 'http://127.0.0.1:8080';
const streamsList = (args.streams ?? '1,4,16').split(',').map(Number);
const drafts = (args.drafts ?? '0,2').split(',').map((d) => (d === 'auto' ? 'auto' : Number(d)));
const promptTokens = Number(args['prompt-tokens'] ?? 64);
const maxTokens = Number(args['max-tokens'] ?? 32);
const rounds = Number(args.rounds ?? 1);
const vocab = Number(args.vocab ?? 1000);

function rng(seed) {
  let s = BigInt(seed) | 1n;
  return () => {
    s ^= s << 13n; s &= (1n << 64n) - 1n; s ^= s >> 7n; s ^= s << 17n; s &= (1n << 64n) - 1n;
    return Number(s % 1000003n) / 1000003;
  };
}
const median = (xs) => { const v = [...xs].sort((a, b) => a - b); return v.length ? v[Math.floor(v.length / 2)] : NaN; };

async function metrics() {
  const text = await (await fetch(`${url}/metrics`)).text();
  const sum = (name) => text.split('\n').filter((l) => l.startsWith(name + ' ') || l.startsWith(name + '{'))
    .reduce((s, l) => s + Number(l.slice(l.lastIndexOf(' ') + 1)), 0);
  return { drafts: sum('vllm:spec_decode_num_draft_tokens_total'), accepted: sum('vllm:spec_decode_num_accepted_tokens_total') };
}

// One streaming completion: [time to first token, decode tokens/s after it, tokens].
async function stream(prompt, draft) {
  const t0 = performance.now();
  const res = await fetch(`${url}/v1/completions`, {
    method: 'POST', headers: { 'content-type': 'application/json' },
    // Token ids in every chunk (logprobs of 0 alternatives): a chunk per step even for tokens
    // without text.
    body: JSON.stringify({ prompt, max_tokens: maxTokens, temperature: 0, ignore_eos: true, stream: true,
                           draft_tokens: draft, logprobs: 0, return_tokens_as_token_ids: true,
                           stream_options: { include_usage: true } }),
  });
  if (!res.ok) throw new Error(`HTTP ${res.status}: ${await res.text()}`);
  let first = 0, tokens = 0, buffer = '';
  const decoder = new TextDecoder();
  for await (const chunk of res.body) {
    buffer += decoder.decode(chunk, { stream: true });
    let at;
    while ((at = buffer.indexOf('\n\n')) >= 0) {
      const event = buffer.slice(0, at);
      buffer = buffer.slice(at + 2);
      if (!event.startsWith('data: ') || event === 'data: [DONE]') continue;
      const data = JSON.parse(event.slice(6));
      if (data.usage) tokens = data.usage.completion_tokens;
      else if (!first && data.choices?.[0]?.logprobs?.tokens?.length) first = performance.now();
    }
  }
  const end = performance.now();
  return [(first - t0) / 1000, (tokens - 1) / ((end - first) / 1000), tokens];
}

const random = rng(7);
const prompts = Array.from({ length: Math.max(...streamsList) }, () =>
  [0, ...Array.from({ length: promptTokens - 1 }, () => 1 + Math.floor(random() * (vocab - 1)))]);
const results = [];
for (let round = 0; round < rounds; ++round) {
  for (const n of streamsList) {
    for (const draft of drafts) {  // interleaved: draft settings alternate within a round
      const before = await metrics();
      const t0 = performance.now();
      const runs = await Promise.all(prompts.slice(0, n).map((p) => stream(p, draft)));
      const wall = (performance.now() - t0) / 1000;
      const after = await metrics();
      const drafted = after.drafts - before.drafts, accepted = after.accepted - before.accepted;
      const r = { round, streams: n, draft, ttft_s: median(runs.map((x) => x[0])),
                  stream_tok_s: median(runs.map((x) => x[1])),
                  aggregate_tok_s: runs.reduce((s, x) => s + x[2], 0) / wall,
                  acceptance: drafted ? accepted / drafted : null };
      results.push(r);
      if (!args.json)
        console.log(`streams ${String(n).padStart(2)}  k=${draft}  TTFT ${r.ttft_s.toFixed(2)} s  ` +
                    `per stream ${r.stream_tok_s.toFixed(2)} tok/s  aggregate ${r.aggregate_tok_s.toFixed(2)} tok/s` +
                    (r.acceptance === null ? '' : `  acceptance ${r.acceptance.toFixed(3)}`));
    }
  }
}
if (args.json) console.log(JSON.stringify(results, null, 1));
