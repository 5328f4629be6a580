// Load: many streaming clients at once with random lengths and arrival times, some aborting
// mid-stream, some sending bad requests. Every request is answered (a stream, a 400, or a
// 503 when the queue is full); every completed stream has exactly the tokens of the same
// request alone (none lost or duplicated); afterwards nothing runs, waits, or holds a cache
// block. DSV4_SERVER_LOAD_CLIENTS sets the number of clients (default 16; 64 for the full run).
// Usage: node load_test.mjs <server>
import assert from 'node:assert/strict';
import { client, completionTokens, metrics, rng, runTests, waitForMetrics } from './common.mjs';

const [base] = process.argv.slice(2);
const clients = Number(process.env.DSV4_SERVER_LOAD_CLIENTS ?? 16);
const api = client(base);
const model = (await api.models.list()).data[0].id;
const random = rng(Number(process.env.DSV4_SERVER_LOAD_SEED ?? 11));  // (other seeds: other mixes)
const prompts = [5, 14, 26, 37].map((n) => Array.from({ length: n }, () => 1 + Math.floor(random() * 300)));
const LONGEST = 24;
const BAD = [
  { model, prompt: [] },
  { model, prompt: [5, 100000] },
  { model, prompt: 'hello', temperature: -1 },
  { model, prompt: 'hello', max_tokens: 'many' },
];

await runTests([
  [`${clients} streaming clients with cancels and bad requests`, async () => {
    // Greedy references: a request for m tokens gets the first m of the longest.
    const reference = [];
    for (const p of prompts) reference.push((await completionTokens(api, { model, prompt: p, max_tokens: LONGEST,
                                                                           ignore_eos: true })).tokens);
    const outcomes = { done: 0, aborted: 0, bad: 0, busy: 0 };
    await Promise.all(Array.from({ length: clients }, async (_, i) => {
      const r = random(), which = Math.floor(random() * prompts.length);
      const maxTokens = 1 + Math.floor(random() * LONGEST), delay = Math.floor(random() * 200);
      await new Promise((res) => setTimeout(res, delay));
      try {
        if (r < 0.15) {
          await api.completions.create(BAD[i % BAD.length]);
          assert.fail(`bad request ${i} accepted`);
        } else if (r < 0.3) {
          const s = await api.completions.create({ model, prompt: prompts[which], max_tokens: 400, ignore_eos: true,
                                                   temperature: 0, stream: true, draft_tokens: i % 3 });
          let n = 0;
          for await (const _chunk of s) if (++n === 2) break;  // abort mid-stream
          outcomes.aborted++;
        } else {
          const got = await completionTokens(api, { model, prompt: prompts[which], max_tokens: maxTokens,
                                                    ignore_eos: true, draft_tokens: i % 3 }, { stream: true });
          assert.deepEqual(got.tokens, reference[which].slice(0, maxTokens), `client ${i}: tokens lost or duplicated`);
          assert.equal(got.usage.completion_tokens, maxTokens);
          assert.equal(got.finish, 'length');
          outcomes.done++;
        }
      } catch (e) {
        if (e.status === 400) outcomes.bad++;
        else if (e.status === 503) outcomes.busy++;
        else throw e;
      }
    }));
    console.log('     outcomes:', JSON.stringify(outcomes));
    assert.equal(outcomes.done + outcomes.aborted + outcomes.bad + outcomes.busy, clients, 'every request answered');
    assert.ok(outcomes.done > 0);
    const m = await waitForMetrics(base, (x) => x.sum('vllm:num_requests_running') === 0 &&
                                                 x.sum('vllm:num_requests_waiting') === 0 &&
                                                 x.sum('dsv4:cache_bytes_running') === 0, 'an idle server');
    assert.equal(m.sum('dsv4:cache_bytes_used'), m.sum('dsv4:prefix_cache_bytes'),
                 'blocks went back to the pools or are the prefix cache\'s');
    const health = await fetch(`${base}/health`);
    assert.equal(health.status, 200);
  }],
]);
