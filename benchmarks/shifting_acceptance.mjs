// A run whose acceptance changes half way, against a running `dsv4 serve`: each configuration
// sends two greedy completions one after the other — first after a long prompt, then after a
// two-token prompt. On a mirror checkpoint (`make-checkpoint --preset mirror-v4-flash`) the MTP
// reproduces the target's first layer only past the first sliding window, so drafts after the long
// prompt are mostly accepted (~0.9 at the first position) and those after the short one much less
// (~0.4 over its first 64 tokens, ~0.7 over the next 64): the process's experience says draft,
// the new sequence says do not. Reported: the decode rate of each half and of the whole. Draft
// settings alternate within each round (interleaved), medians over rounds. Plain fetch (Node >=
// 18), no packages.
//
//   node benchmarks/shifting_acceptance.mjs --url http://127.0.0.1:8080 [--drafts 0,1,2,3,4,auto]
//        [--tokens 128] [--prompt-tokens 160] [--rounds 3] [--vocab 300]
//
// Start the server with --no-prefix-cache, so that every configuration prefills its prompt.
const args = {};
for (let i = 2; i < process.argv.length; ++i) {
  const a = process.argv[i], next = process.argv[i + 1];
  if (a.startsWith('--')) args[a.slice(2)] = next === undefined || next.startsWith('--') ? 'true' : (++i, next);
}
const url = args.url ?? 'http://127.0.0.1:8080';
const drafts = (args.drafts ?? '0,1,2,3,4,auto').split(',').map((d) => (d === 'auto' ? 'auto' : Number(d)));
const tokens = Number(args.tokens ?? 128);
const promptTokens = Number(args['prompt-tokens'] ?? 160), rounds = Number(args.rounds ?? 3);
const vocab = Number(args.vocab ?? 300);
const median = (xs) => { const v = [...xs].sort((a, b) => a - b); return v[Math.floor(v.length / 2)]; };

let seed = 5;
const random = () => ((seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648);
const long = Array.from({ length: promptTokens }, () => 2 + Math.floor(random() * (vocab - 2)));
const short = long.slice(0, 2);

// One streamed completion: decode seconds (after the first token) and completion tokens.
async function run(draft, prompt) {
  const res = await fetch(`${url}/v1/completions`, {
    method: 'POST', headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ prompt, max_tokens: tokens, ignore_eos: true, stream: true, draft_tokens: draft,
                           temperature: 0, logprobs: 0,
                           return_tokens_as_token_ids: true, stream_options: { include_usage: true } }),
  });
  if (!res.ok) throw new Error(`HTTP ${res.status}: ${await res.text()}`);
  let first = 0, count = 0, buffer = '';
  const decoder = new TextDecoder();
  for await (const chunk of res.body) {
    buffer += decoder.decode(chunk, { stream: true });
    for (let at; (at = buffer.indexOf('\n\n')) >= 0; buffer = buffer.slice(at + 2)) {
      const event = buffer.slice(0, at);
      if (!event.startsWith('data: ') || event === 'data: [DONE]') continue;
      const data = JSON.parse(event.slice(6));
      if (data.usage) count = data.usage.completion_tokens;
      else if (!first && data.choices?.[0]?.logprobs?.tokens?.length) first = performance.now();
    }
  }
  return { seconds: (performance.now() - first) / 1000, tokens: count - 1 };
}

// A server still loading its checkpoint answers 503: wait for it (up to 10 minutes).
for (let i = 0; ; ++i) {
  const ok = await fetch(`${url}/health`).then((r) => r.ok, () => false);
  if (ok) break;
  if (i === 1200) throw new Error(`${url}/health did not answer 200 within 10 minutes`);
  await new Promise((r) => setTimeout(r, 500));
}

const results = new Map(drafts.map((d) => [String(d), []]));
for (let round = 0; round < rounds; ++round)
  for (const draft of drafts) {
    const a = await run(draft, long), b = await run(draft, short);
    results.get(String(draft)).push({ long: a.tokens / a.seconds, short: b.tokens / b.seconds,
                                      whole: (a.tokens + b.tokens) / (a.seconds + b.seconds) });
    console.error(`round ${round} draft ${draft}: ${JSON.stringify(results.get(String(draft)).at(-1))}`);
  }
console.log('draft  after the long prompt  after the short one  whole (decode tokens/s, medians)');
for (const [draft, rs] of results)
  console.log(`${draft.padEnd(5)}  ${median(rs.map((r) => r.long)).toFixed(2).padStart(21)}  ` +
              `${median(rs.map((r) => r.short)).toFixed(2).padStart(19)}  ${median(rs.map((r) => r.whole)).toFixed(2).padStart(5)}`);
