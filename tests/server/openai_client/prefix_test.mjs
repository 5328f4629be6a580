// The prefix cache through the official OpenAI client: a conversation resent whole with each new
// turn reuses everything it shares with the kept sequence (usage.prompt_tokens_details.
// cached_tokens) and answers exactly what a server without the cache answers — tokens and
// logprobs, greedy and seeded sampling, with drafts; concurrent requests sharing a prefix, one
// cancelled mid-prefill, are unaffected; the metrics count the reuse.
// A server whose cache may hold almost nothing (--prefix-cache-memory 1M) evicts, stops keeping
// rows, and still answers exactly.
// Usage: node prefix_test.mjs <server with the cache> <server with --no-prefix-cache> <server with 1M>
import assert from 'node:assert/strict';
import { client, ids, metrics, rng, runTests } from './common.mjs';

const [base, coldBase, tightBase] = process.argv.slice(2);
const api = client(base), cold = client(coldBase), tight = client(tightBase);
const model = (await api.models.list()).data[0].id;
const random = rng(11);
const tokens = (n) => Array.from({ length: n }, () => 1 + Math.floor(random() * 300));

// A completion of token ids: its tokens, logprobs and cached tokens.
async function complete(c, prompt, extra = {}) {
  const r = await c.completions.create({ model, prompt, max_tokens: 12, ignore_eos: true, temperature: 0, logprobs: 2,
                                         return_tokens_as_token_ids: true, ...extra });
  const lp = r.choices[0].logprobs;
  return { tokens: ids(lp.tokens), logprobs: lp.token_logprobs, top: lp.top_logprobs,
           cached: r.usage.prompt_tokens_details?.cached_tokens ?? -1, prompt: r.usage.prompt_tokens };
}

await runTests([
  ['a growing conversation reuses all it shares and answers as without the cache', async () => {
    const before = await metrics(base);
    for (const [mode, extra] of [['greedy', {}], ['sampled', { temperature: 0.9, seed: 5 }],
                                 ['greedy, 2 drafts', { draft_tokens: 2 }],
                                 ['sampled, 3 drafts', { temperature: 0.8, seed: 6, draft_tokens: 3 }]]) {
      let conversation = tokens(150);
      let kept = 0;  // tokens of the conversation the server has seen and kept
      for (let turn = 0; turn < 4; turn++) {
        const got = await complete(api, conversation, extra);
        const want = await complete(cold, conversation, extra);
        assert.deepEqual(got.tokens, want.tokens, `${mode}, turn ${turn}: tokens`);
        assert.deepEqual(got.logprobs, want.logprobs, `${mode}, turn ${turn}: logprobs`);
        assert.deepEqual(got.top, want.top, `${mode}, turn ${turn}: top logprobs`);
        assert.equal(want.cached, 0, 'the cold server reuses nothing');
        // Turn 0 may share nothing; later turns everything the last answer's sequence holds (its
        // prompt and every token but the last generated, which was never passed).
        if (turn > 0) assert.equal(got.cached, kept - 1, `${mode}, turn ${turn}: cached tokens`);
        conversation = [...conversation, ...got.tokens];
        kept = conversation.length;
        conversation = [...conversation, ...tokens(20 + 10 * turn)];
      }
    }
    const after = await metrics(base);
    const hits = after.sum('vllm:prefix_cache_hits_total') - before.sum('vllm:prefix_cache_hits_total');
    const queries = after.sum('vllm:prefix_cache_queries_total') - before.sum('vllm:prefix_cache_queries_total');
    assert.ok(hits > 0 && hits < queries, `hits ${hits} of ${queries} tokens`);
    assert.ok(after.sum('dsv4:prefix_cache_bytes') > 0 && after.sum('dsv4:prefix_cache_entries') > 0);
  }],
  ['under memory pressure the cache evicts and stays exact', async () => {
    let conversation = tokens(400);
    for (let turn = 0; turn < 3; turn++) {
      const [got, want] = await Promise.all([complete(tight, conversation, { draft_tokens: 2 }),
                                             complete(cold, conversation, { draft_tokens: 2 })]);
      assert.deepEqual(got.tokens, want.tokens, `turn ${turn}`);
      assert.deepEqual(got.logprobs, want.logprobs, `turn ${turn}`);
      conversation = [...conversation, ...got.tokens, ...tokens(30)];
    }
    const m = await metrics(tightBase);
    assert.ok(m.sum('dsv4:prefix_cache_bytes') <= 1 << 20, `holds ${m.sum('dsv4:prefix_cache_bytes')} bytes`);
    assert.equal(m.sum('dsv4:prefix_cache_entries'), 0, 'every kept state evicted');
  }],
  ['concurrent requests sharing a prefix, one cancelled mid-prefill, are exact', async () => {
    const system = tokens(600);
    const prompts = [0, 1, 2, 3].map(() => [...system, ...tokens(30)]);
    const want = [];
    for (const p of prompts) want.push(await complete(cold, p, { temperature: 0.7, seed: 9 }));
    const abort = new AbortController();
    const doomed = api.completions.create({ model, prompt: [...system, ...tokens(40)], max_tokens: 50 },
                                          { signal: abort.signal }).catch(() => 'aborted');
    setTimeout(() => abort.abort(), 30);
    const got = await Promise.all(prompts.map((p) => complete(api, p, { temperature: 0.7, seed: 9 })));
    assert.equal(await doomed, 'aborted');
    for (let i = 0; i < prompts.length; i++) {
      assert.deepEqual(got[i].tokens, want[i].tokens, `request ${i}: tokens`);
      assert.deepEqual(got[i].logprobs, want[i].logprobs, `request ${i}: logprobs`);
    }
    assert.ok(got.some((g) => g.cached > 0), 'some request reused the shared prefix');
  }],
]);
