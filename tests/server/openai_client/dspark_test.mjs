// `dsv4 serve` with a DSpark drafter (DeepSeek-V4-Flash-0731's), started with --draft auto:
// concurrent greedy requests with draft_tokens 0..5 and "auto" (the server's default) each return
// exactly the tokens the same request returns with no drafts; the metrics show drafts made and
// accepted; draft lengths the drafter cannot run are refused with OpenAI's 400.
// Usage: node dspark_test.mjs <server>
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { client, completionTokens, metrics, rng, runTests } from './common.mjs';

const [base] = process.argv.slice(2);
const api = client(base);
const model = (await api.models.list()).data[0].id;
const random = rng(11);
const prompt = (n) => Array.from({ length: n }, () => 1 + Math.floor(random() * 300));
const requests = [4, 19, 33, 8, 26, 12, 40].map((len, i) => ({
  model, prompt: prompt(len), max_tokens: 24 + 4 * i, ignore_eos: true, temperature: 0,
}));
const drafts = [0, 1, 2, 3, 5, 'auto', undefined];  // undefined: the server's --draft auto

async function refused(body, what) {
  try {
    await api.completions.create(body);
  } catch (e) {
    assert.ok(e instanceof OpenAI.APIError, `${what}: expected an APIError, got ${e}`);
    assert.equal(e.status, 400, e.message);
    assert.equal(e.error?.param, 'draft_tokens', JSON.stringify(e.error));
    return;
  }
  assert.fail(`${what}: expected HTTP 400`);
}

await runTests([
  ['DSpark drafts, fixed and auto, return the plain tokens', async () => {
    const alone = [];
    for (const body of requests) alone.push((await completionTokens(api, { ...body, draft_tokens: 0 })).tokens);
    const before = await metrics(base);
    const together = await Promise.all(requests.map((body, i) =>
      completionTokens(api, drafts[i] === undefined ? body : { ...body, draft_tokens: drafts[i] }, { stream: i % 2 === 0 })));
    for (let i = 0; i < requests.length; i++)
      assert.deepEqual(together[i].tokens, alone[i], `request ${i} (draft_tokens ${drafts[i]})`);
    const after = await metrics(base);
    const drafted = after.sum('vllm:spec_decode_num_draft_tokens_total') - before.sum('vllm:spec_decode_num_draft_tokens_total');
    const accepted = after.sum('vllm:spec_decode_num_accepted_tokens_total') -
                     before.sum('vllm:spec_decode_num_accepted_tokens_total');
    assert.ok(drafted > 0 && accepted > 0 && accepted < drafted, `drafted ${drafted}, accepted ${accepted}`);
    // The cost model auto chose by: passes of at least two sizes and a draft, each timed.
    const gauge = (name) => Object.entries(after.values).filter(([k, v]) => k.startsWith(`${name}{`) && v > 0);
    assert.ok(gauge('dsv4:spec_decode_pass_seconds').length >= 2, after.text);
    assert.ok(gauge('dsv4:spec_decode_draft_seconds').length >= 1, after.text);
  }],
  ['draft lengths the drafter cannot run are refused', async () => {
    await refused({ model, prompt: [1, 2, 3], max_tokens: 2, draft_tokens: 6 }, 'beyond the block');
    await refused({ model, prompt: [1, 2, 3], max_tokens: 2, draft_tokens: 'fast' }, 'a word');
  }],
]);
