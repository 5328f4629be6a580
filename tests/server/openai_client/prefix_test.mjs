// The prefix cache through the official OpenAI client: a conversation resent whole with each new
// turn reuses everything it shares with the kept sequence (usage.prompt_tokens_details.
// cached_tokens) and answers exactly what a server without the cache answers — tokens and
// logprobs, greedy and seeded sampling, with drafts; concurrent requests sharing a prefix, one
// cancelled mid-prefill, are unaffected; the metrics count the reuse.
// A server whose cache may hold almost nothing (--prefix-cache-memory 1M) evicts, stops keeping
// rows, and still answers exactly.
// An agent's tool-call turn resent as the client keeps it (no reasoning, arguments re-serialized)
// reads back as the tokens the model sampled, so the next turn reuses all of it; a reasoning turn
// the format drops is reused up to its start.
// Usage: node prefix_test.mjs <server with the cache> <server with --no-prefix-cache> <server with 1M>
import assert from 'node:assert/strict';
import { API_KEY, client, ids, metrics, rng, runTests } from './common.mjs';

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

// /tokenize of a chat request: the prompt's tokens and how many turns were rendered as sampled.
async function tokenize(b, body) {
  const r = await fetch(`${b}/tokenize`, { method: 'POST', body: JSON.stringify(body),
                                           headers: { 'content-type': 'application/json', authorization: `Bearer ${API_KEY}` } });
  assert.equal(r.status, 200);
  return r.json();
}

// Two turns of an agent: a forced tool call (its reasoning tokenized as the tokenizer would not),
// then the conversation resent with the call as a client keeps it. Returns what each turn saw.
async function agentTurns(c, b) {
  const tools = [{ type: 'function', function: { name: 'read_file', parameters: { type: 'object',
    properties: { path: { type: 'string' }, lines: { type: 'integer' } } } } }];
  const common = { model, tools, temperature: 0, logprobs: true, return_tokens_as_token_ids: true,
                   chat_template_kwargs: { thinking: true } };
  const first = [{ role: 'system', content: 'You are an agent.' }, { role: 'user', content: 'FORCE_AGENT: read src/a.cc' }];
  const one = await c.chat.completions.create({ ...common, messages: first, max_tokens: 200 });
  const message = one.choices[0].message;
  assert.equal(one.choices[0].finish_reason, 'tool_calls');
  assert.equal(message.reasoning_content, 'I will read it.');
  const call = message.tool_calls[0];
  const args = JSON.parse(call.function.arguments);
  assert.deepEqual(args, { path: 'src/a.cc', lines: 40 });
  const second = [...first,
    { role: 'assistant', content: null, tool_calls: [{ id: call.id, type: 'function',
      function: { name: 'read_file', arguments: JSON.stringify({ lines: args.lines, path: args.path }) } }] },
    { role: 'tool', tool_call_id: call.id, content: 'int main() { return 0; }' }];
  const [tokensOne, tokensTwo] = [await tokenize(b, { ...common, messages: first }), await tokenize(b, { ...common, messages: second })];
  const two = await c.chat.completions.create({ ...common, messages: second, max_tokens: 6 });
  return { one, two, sampled: ids(one.choices[0].logprobs.content.map((t) => t.token)), tokensOne, tokensTwo };
}

await runTests([
  ['an agent turn resent as JSON keeps the sampled tokens and is reused whole', async () => {
    const got = await agentTurns(api, base);
    const { one, two, sampled, tokensOne, tokensTwo } = got;
    assert.equal(tokensTwo.sampled_turns, 1, 'the tool-call turn was rendered as the model wrote it');
    assert.deepEqual(tokensTwo.tokens.slice(0, tokensOne.count + sampled.length), [...tokensOne.tokens, ...sampled],
                     'turn two begins with turn one\'s prompt and every sampled token');
    assert.equal(two.usage.prompt_tokens, tokensTwo.count);
    // Everything the first turn's sequence holds is reused (all but its last sampled token).
    assert.equal(two.usage.prompt_tokens_details.cached_tokens, one.usage.prompt_tokens + one.usage.completion_tokens - 1);
    // The prompt does not depend on the cache: a server without it reads the same tokens and answers the same.
    const want = await agentTurns(cold, coldBase);
    assert.deepEqual(want.tokensTwo.tokens, tokensTwo.tokens);
    assert.equal(want.two.usage.prompt_tokens_details.cached_tokens, 0);
    assert.deepEqual(want.two.choices[0].logprobs.content, two.choices[0].logprobs.content);
  }],
  ['a reasoning turn the format drops is reused up to where it starts', async () => {
    const common = { model, temperature: 0, chat_template_kwargs: { thinking: true } };
    const first = [{ role: 'user', content: 'FORCE_REASONING, from the chat API' }];
    const one = await api.chat.completions.create({ ...common, messages: first, max_tokens: 50 });
    assert.equal(one.choices[0].message.reasoning_content, 'I should greet them.');
    const second = [...first, { role: 'assistant', content: one.choices[0].message.content }, { role: 'user', content: 'and?' }];
    const two = await api.chat.completions.create({ ...common, messages: second, max_tokens: 4 });
    assert.equal((await tokenize(base, { ...common, messages: second })).sampled_turns, 1);
    // Turn one's prompt ended "<｜Assistant｜><think>"; turn two renders that turn "<｜Assistant｜></think>"
    // + answer: the prompt up to <｜Assistant｜> is shared, and reused but for its last token (whose MTP
    // row read the <think> that follows it); the answer is read again, the reasoning not at all.
    assert.equal(two.usage.prompt_tokens_details.cached_tokens, one.usage.prompt_tokens - 2);
  }],
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
