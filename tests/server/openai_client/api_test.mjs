// dsv4 serve through the official openai client: models, completions and chat (streamed
// and not, same text either way), reasoning, tool calls, stop strings, logprobs, usage,
// errors as APIError with the right status, the API key, the 503 of a full queue, and a
// stream aborted by the client (its sequence cancelled, its cache blocks returned).
// Usage: node api_test.mjs <server> <server with one slot and a queue of one>
import assert from 'node:assert/strict';
import http from 'node:http';
import OpenAI from 'openai';
import { API_KEY, client, completionTokens, metrics, runTests, waitForMetrics } from './common.mjs';

const [base, busyBase] = process.argv.slice(2);
const api = client(base);
const model = (await api.models.list()).data[0].id;
const user = (content) => [{ role: 'user', content }];
const TOOLS = [
  { type: 'function', function: { name: 'get_weather', parameters: { type: 'object', properties: { city: { type: 'string' } } } } },
  { type: 'function', function: { name: 'get_time', parameters: { type: 'object', properties: { zone: { type: 'integer' } } } } },
];

// A streamed chat answer gathered: reasoning, content, tool calls by index, finish, usage.
async function streamChat(body) {
  const s = await api.chat.completions.create({ model, ...body, stream: true, stream_options: { include_usage: true } });
  const out = { reasoning: '', content: '', calls: [], finish: null, usage: null, chunks: [] };
  for await (const c of s) {
    out.chunks.push(c);
    if (c.usage) out.usage = c.usage;
    for (const ch of c.choices) {
      out.reasoning += ch.delta.reasoning_content ?? '';
      out.content += ch.delta.content ?? '';
      for (const call of ch.delta.tool_calls ?? []) {
        assert.equal(ch.delta.tool_calls.length, 1, 'one tool call per delta');
        assert.equal(out.calls[call.index], undefined, 'a tool call arrives whole, once');
        out.calls[call.index] = call;
      }
      if (ch.finish_reason) out.finish = ch.finish_reason;
    }
  }
  return out;
}

async function expectApiError(promise, status, check = () => {}) {
  try {
    await promise;
  } catch (e) {
    assert.ok(e instanceof OpenAI.APIError, `expected an APIError, got ${e}`);
    assert.equal(e.status, status, e.message);
    assert.equal(typeof e.error?.message, 'string');
    check(e);
    return e;
  }
  assert.fail(`expected HTTP ${status}`);
}

await runTests([
  ['models and health', async () => {
    assert.equal((await fetch(`${base}/health`)).status, 200);
    const models = await api.models.list();
    assert.equal(models.data.length, 1);
    assert.equal(models.data[0].object, 'model');
  }],
  ['completion: streamed equals non-streamed, usage and logprobs', async () => {
    const body = { model, prompt: 'hello world', max_tokens: 12, ignore_eos: true };
    const whole = await completionTokens(api, body);
    assert.equal(whole.tokens.length, 12);
    assert.equal(whole.finish, 'length');
    assert.equal(whole.usage.completion_tokens, 12);
    assert.equal(whole.usage.total_tokens, whole.usage.prompt_tokens + 12);
    const streamed = await completionTokens(api, body, { stream: true });
    assert.deepEqual(streamed.tokens, whole.tokens);
    assert.equal(streamed.text, whole.text);
    assert.equal(streamed.finish, 'length');
    // The same prompt again: the prefix cache held it (all but its last token, whose pass gives the first logits).
    assert.equal(streamed.usage.prompt_tokens_details.cached_tokens, whole.usage.prompt_tokens - 1);
    assert.deepEqual({ ...streamed.usage, prompt_tokens_details: null }, { ...whole.usage, prompt_tokens_details: null });
    // Top alternatives: under greedy decoding the most likely one is the token itself.
    const r = await api.completions.create({ model, prompt: 'hello', max_tokens: 4, temperature: 0, logprobs: 3 });
    const lp = r.choices[0].logprobs;
    assert.equal(lp.tokens.length, 4);
    for (let i = 0; i < 4; i++) {
      assert.ok(lp.token_logprobs[i] <= 0);
      const top = Object.entries(lp.top_logprobs[i]);
      assert.ok(top.length >= 1 && top.length <= 3);
      for (const [, v] of top) assert.ok(v <= lp.token_logprobs[i] + 1e-6, 'greedy: no alternative is more likely');
    }
    // Token-id prompts.
    const tok = await (await fetch(`${base}/tokenize`, { method: 'POST', headers: { Authorization: 'Bearer test-key' },
                                                         body: JSON.stringify({ prompt: 'hello world' }) })).json();
    const byIds = await completionTokens(api, { ...body, prompt: tok.tokens });
    assert.deepEqual(byIds.tokens, whole.tokens);
  }],
  ['chat: reasoning (thinking mode) split from content', async () => {
    const body = { messages: user('FORCE_REASONING hi'), temperature: 0, chat_template_kwargs: { thinking: true } };
    const r = await api.chat.completions.create({ model, ...body });
    const m = r.choices[0].message;
    assert.equal(m.reasoning_content, 'I should greet them.');
    assert.equal(m.content, 'Hello there!');
    assert.equal(r.choices[0].finish_reason, 'stop');
    assert.ok(r.usage.prompt_tokens > 0 && r.usage.completion_tokens > 0);
    const s = await streamChat(body);
    assert.equal(s.reasoning, 'I should greet them.');
    assert.equal(s.content, 'Hello there!');
    assert.equal(s.finish, 'stop');
    assert.deepEqual({ ...s.usage, prompt_tokens_details: null }, { ...r.usage, prompt_tokens_details: null });
    assert.equal(s.usage.prompt_tokens_details.cached_tokens, r.usage.prompt_tokens - 1, 'the same prompt, kept');
    assert.equal(s.chunks.at(-1).choices.length, 0, 'the usage chunk has no choices');
    const effort = await api.chat.completions.create({ model, messages: user('FORCE_REASONING hi'), temperature: 0,
                                                       reasoning_effort: 'high' });
    assert.equal(effort.choices[0].message.reasoning_content, 'I should greet them.');
  }],
  ['chat: tool calls parsed from the DSML block', async () => {
    const body = { messages: user('FORCE_TOOLS weather?'), tools: TOOLS, tool_choice: 'auto', temperature: 0 };
    const r = await api.chat.completions.create({ model, ...body });
    const m = r.choices[0].message;
    assert.equal(r.choices[0].finish_reason, 'tool_calls');
    assert.equal(m.content, 'Let me check.');
    assert.deepEqual(m.tool_calls.map((c) => c.function.name), ['get_weather', 'get_time']);
    assert.deepEqual(JSON.parse(m.tool_calls[0].function.arguments), { city: 'Paris' });
    assert.deepEqual(JSON.parse(m.tool_calls[1].function.arguments), { zone: 2 });
    for (const c of m.tool_calls) assert.ok(c.id && c.type === 'function');
    const s = await streamChat(body);
    assert.equal(s.finish, 'tool_calls');
    assert.equal(s.content, 'Let me check.');
    assert.deepEqual(s.calls.map((c) => [c.function.name, JSON.parse(c.function.arguments)]),
                     [['get_weather', { city: 'Paris' }], ['get_time', { zone: 2 }]]);
    // The conversation goes on with the tool results.
    const next = await api.chat.completions.create({
      model, temperature: 0, max_tokens: 4, tools: TOOLS,
      messages: [...user('weather?'), m, { role: 'tool', tool_call_id: m.tool_calls[0].id, content: 'sunny' },
                 { role: 'tool', tool_call_id: m.tool_calls[1].id, content: '14:00' }],
    });
    assert.ok(next.usage.completion_tokens >= 1);
  }],
  ['chat: a malformed tool block comes back as text', async () => {
    const r = await api.chat.completions.create({ model, messages: user('FORCE_BADTOOL'), tools: TOOLS, temperature: 0 });
    const m = r.choices[0].message;
    assert.equal(m.tool_calls, undefined);
    assert.ok(m.content.includes('invoke nome="x"'), m.content);
    assert.equal(r.choices[0].finish_reason, 'stop');
  }],
  ['chat: under tool_choice auto, a call whose arguments break its schema comes back as text', async () => {
    // get_time's zone is an integer; the model wrote the string "noon".
    const body = { messages: user('FORCE_WRONGARGS'), tools: TOOLS, tool_choice: 'auto', temperature: 0 };
    const r = await api.chat.completions.create({ model, ...body });
    assert.equal(r.choices[0].message.tool_calls, undefined);
    assert.ok(r.choices[0].message.content.includes('>noon<'), r.choices[0].message.content);
    assert.equal(r.choices[0].finish_reason, 'stop');
    const s = await streamChat(body);
    assert.equal(s.calls.length, 0);
    assert.equal(s.finish, 'stop');
  }],
  ['stop strings and UTF-8, streamed and not', async () => {
    const body = { messages: user('FORCE_STOP'), temperature: 0, stop: ['gam', 'zzz'] };
    const r = await api.chat.completions.create({ model, ...body });
    assert.equal(r.choices[0].message.content, 'alpha beta ');
    assert.equal(r.choices[0].finish_reason, 'stop');
    const s = await streamChat(body);
    assert.equal(s.content, 'alpha beta ');
    for (const c of s.chunks) for (const ch of c.choices) assert.ok(!(ch.delta.content ?? '').includes('g'));
    const u = await streamChat({ messages: user('FORCE_UTF8'), temperature: 0, stop: ['✓ ü'] });
    assert.equal(u.content, 'héllo wörld ');
    for (const c of u.chunks) for (const ch of c.choices) assert.ok(!(ch.delta.content ?? '').includes('\uFFFD'));
  }],
  ['chat logprobs of the target', async () => {
    const r = await api.chat.completions.create({ model, messages: user('hi'), temperature: 0, max_tokens: 5,
                                                  logprobs: true, top_logprobs: 2 });
    const content = r.choices[0].logprobs.content;
    assert.equal(content.length, r.usage.completion_tokens);
    for (const e of content) {
      assert.equal(e.top_logprobs.length, 2);
      assert.equal(e.top_logprobs[0].token, e.token);
      assert.ok(Array.isArray(e.bytes));
    }
  }],
  ['errors are OpenAI-shaped with the right status', async () => {
    await expectApiError(api.chat.completions.create({ model, messages: [] }), 400,
                         (e) => assert.equal(e.param, 'messages'));
    await expectApiError(api.chat.completions.create({ model, messages: user('hi'), max_tokens: 100000 }), 400,
                         (e) => assert.equal(e.code, 'context_length_exceeded'));
    await expectApiError(api.completions.create({ model, prompt: 'word '.repeat(9000) }), 400,
                         (e) => assert.equal(e.code, 'context_length_exceeded'));
    await expectApiError(api.completions.create({ model, prompt: [1, 2, 99999] }), 400);
    await expectApiError(api.chat.completions.create({ model, messages: user('hi'), temperature: 'hot' }), 400,
                         (e) => assert.equal(e.param, 'temperature'));
    await expectApiError(api.chat.completions.create({ model, messages: user('hi'), n: 3 }), 400);
    await expectApiError(api.chat.completions.create({ model: 'no-such-model', messages: user('hi') }), 404);
    await expectApiError(client(base, 'wrong-key').models.list(), 401);
    const raw = await fetch(`${base}/v1/chat/completions`, {
      method: 'POST', headers: { Authorization: 'Bearer test-key', 'Content-Type': 'application/json' },
      body: '{"messages": [',
    });
    assert.equal(raw.status, 400);
    const err = (await raw.json()).error;
    assert.ok(err.message && 'type' in err && 'param' in err && 'code' in err);
    const missing = await fetch(`${base}/v1/nothing`, { headers: { Authorization: 'Bearer test-key' } });
    assert.equal(missing.status, 404);
    // Still serving.
    const ok = await api.completions.create({ model, prompt: 'hello', max_tokens: 2 });
    assert.equal(ok.usage.completion_tokens, 2);
  }],
  ['a full queue answers 503 with Retry-After', async () => {
    const busy = client(busyBase, 'unused');
    const body = { model, prompt: 'hello', max_tokens: 48, ignore_eos: true, temperature: 0 };
    const results = await Promise.allSettled([1, 2, 3, 4, 5].map(() => busy.completions.create(body)));
    const rejected = results.filter((r) => r.status === 'rejected');
    assert.ok(rejected.length >= 1, 'one slot and a queue of one cannot take five requests');
    for (const r of rejected) {
      assert.equal(r.reason.status, 503);
      assert.equal(r.reason.headers.get('retry-after'), '1');
    }
    for (const r of results.filter((x) => x.status === 'fulfilled')) assert.equal(r.value.usage.completion_tokens, 48);
  }],
  ['a stream aborted by the client is cancelled and its blocks returned (or kept by the prefix cache)', async () => {
    const before = await metrics(base);
    const s = await api.chat.completions.create({ model, messages: user('hi'), max_tokens: 400, ignore_eos: true,
                                                  temperature: 0, stream: true });
    let chunks = 0;
    for await (const c of s) { if (++chunks === 3) break; }  // leaving the loop aborts the request
    const m = await waitForMetrics(base, (x) => x.sum('vllm:num_requests_running') === 0 &&
                                                 x.sum('dsv4:cache_bytes_running') === 0,
                                   'the aborted sequence released');
    assert.ok(m.values['vllm:request_success_total{model_name="' + model + '",finished_reason="abort"}'] >
              (before.values['vllm:request_success_total{model_name="' + model + '",finished_reason="abort"}'] ?? 0));
    assert.ok(m.sum('vllm:generation_tokens_total') < before.sum('vllm:generation_tokens_total') + 400);
  }],
  // (These two on the server that answers in chunks from 200 ms on: `--heartbeat-after-ms 200`.)
  ['a long non-streamed request is answered in chunks: whitespace while it runs, then the JSON', async () => {
    const body = { model, prompt: [1, 2, 3], max_tokens: 2000, ignore_eos: true, temperature: 0 };
    const res = await fetch(`${busyBase}/v1/completions`, {
      method: 'POST', body: JSON.stringify(body),
      headers: { 'content-type': 'application/json', authorization: `Bearer ${API_KEY}` },
    });
    assert.equal(res.status, 200);
    assert.equal(res.headers.get('transfer-encoding'), 'chunked', 'the long request took the chunked path');
    const text = await res.text();
    assert.match(text, /^ +\{/, 'heartbeat whitespace, then the object');
    assert.equal(JSON.parse(text).usage.completion_tokens, 2000);  // (JSON.parse is what the SDK uses)
  }],
  ['a non-streamed request whose client goes away is cancelled and its blocks returned (or kept)', async () => {
    // A client that closes its connection (node:http's destroy(): fetch, once aborted, may keep
    // reading the body to reuse the connection, and then the server cannot tell). The server
    // notices at its first writes (the heartbeats from 200 ms on), long before 2000 tokens are
    // done (the context holds 2048).
    const before = await metrics(busyBase);
    const body = JSON.stringify({ model, prompt: [4, 5, 6], max_tokens: 2000, ignore_eos: true, temperature: 0 });
    await new Promise((resolve) => {
      const req = http.request(`${busyBase}/v1/completions`, {
        method: 'POST', headers: { 'content-type': 'application/json', authorization: `Bearer ${API_KEY}` },
      }, (res) => res.resume());
      req.on('error', () => resolve());
      req.on('close', () => resolve());
      req.end(body);
      setTimeout(() => req.destroy(), 100);
    });
    const m = await waitForMetrics(busyBase, (x) => x.sum('vllm:num_requests_running') === 0 &&
                                                 x.sum('dsv4:cache_bytes_running') === 0,
                                   'the abandoned sequence released');
    const aborts = (x) => x.values['vllm:request_success_total{model_name="' + model + '",finished_reason="abort"}'] ?? 0;
    assert.ok(aborts(m) > aborts(before), 'counted as aborted');
    assert.ok(m.sum('vllm:generation_tokens_total') < before.sum('vllm:generation_tokens_total') + 2000,
              'it did not run to its end');
  }],
]);
