// Continuous batching is exact: concurrent requests with different prompts, lengths, draft
// counts and arrival times each return exactly the tokens the same request returns alone —
// greedy ones token for token (alone: plain decoding, no drafts), seeded sampled ones too
// (same draft count: rejection sampling draws from the sequence's own random stream). The
// metrics prove the path ran: several sequences decoded together, drafts made and accepted.
// Usage: node batching_test.mjs <server>
import assert from 'node:assert/strict';
import { client, completionTokens, metrics, rng, runTests } from './common.mjs';

const [base] = process.argv.slice(2);
const api = client(base);
const model = (await api.models.list()).data[0].id;
const random = rng(7);
const prompt = (n) => Array.from({ length: n }, () => 1 + Math.floor(random() * 300));

const greedy = [3, 17, 40, 9, 28, 5].map((len, i) => ({
  model, prompt: prompt(len), max_tokens: 10 + 6 * i, ignore_eos: true, temperature: 0,
}));
const sampled = [6, 21, 12, 33].map((len, i) => ({
  model, prompt: prompt(len), max_tokens: 16, ignore_eos: true, temperature: 0.9, top_p: 0.95, seed: 100 + i,
  draft_tokens: 2,
}));
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

await runTests([
  ['concurrent greedy requests equal the same requests alone', async () => {
    const alone = [];
    for (const body of greedy) alone.push((await completionTokens(api, { ...body, draft_tokens: 0 })).tokens);
    const before = await metrics(base);
    const together = await Promise.all(greedy.map(async (body, i) => {
      await sleep(Math.floor(random() * 40));
      return completionTokens(api, { ...body, draft_tokens: i % 4 }, { stream: i % 2 === 1 });
    }));
    for (let i = 0; i < greedy.length; i++) {
      assert.equal(together[i].tokens.length, greedy[i].max_tokens, `request ${i}`);
      assert.deepEqual(together[i].tokens, alone[i], `request ${i}: batched tokens differ from alone`);
    }
    const after = await metrics(base);
    assert.ok(after.sum('dsv4:num_requests_running_peak') >= 2, 'several sequences must run together');
    const drafted = after.sum('vllm:spec_decode_num_draft_tokens_total') - before.sum('vllm:spec_decode_num_draft_tokens_total');
    const accepted = after.sum('vllm:spec_decode_num_accepted_tokens_total') -
                     before.sum('vllm:spec_decode_num_accepted_tokens_total');
    assert.ok(drafted > 0 && accepted > 0 && accepted < drafted, `drafted ${drafted}, accepted ${accepted}`);
    assert.ok(after.sum('vllm:spec_decode_num_accepted_tokens_per_pos') === after.sum('vllm:spec_decode_num_accepted_tokens_total'));
  }],
  ['concurrent seeded sampled requests reproduce', async () => {
    const alone = [];
    for (const body of sampled) alone.push((await completionTokens(api, body)).tokens);
    const again = await completionTokens(api, sampled[0]);
    assert.deepEqual(again.tokens, alone[0], 'the same seed twice');
    const together = await Promise.all(sampled.map(async (body, i) => {
      await sleep(Math.floor(random() * 40));
      return completionTokens(api, body, { stream: i % 2 === 0 });
    }));
    for (let i = 0; i < sampled.length; i++) assert.deepEqual(together[i].tokens, alone[i], `sampled request ${i}`);
    const other = await completionTokens(api, { ...sampled[0], seed: 999 });
    assert.notDeepEqual(other.tokens, alone[0], 'another seed, another sample');
  }],
]);
