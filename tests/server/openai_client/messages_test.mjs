// Anthropic's Messages API through the official @anthropic-ai/sdk: text, whole and streamed (the
// SDK's own stream helper accumulates our events), a thinking round trip, a three-turn tool loop
// that reuses every earlier token, stop sequences, the max_tokens cut, count_tokens, errors in
// Anthropic's envelope, x-api-key, cancellation on disconnect, and the metrics by endpoint.
// Usage: node messages_test.mjs <server>
import assert from 'node:assert/strict';
import Anthropic from '@anthropic-ai/sdk';
import { API_KEY, metrics, runTests, waitForMetrics, disconnectAfterFirstChunk } from './common.mjs';

const [base] = process.argv.slice(2);
const claude = new Anthropic({ baseURL: base, apiKey: API_KEY, maxRetries: 0, timeout: 120_000 });
const model = 'claude-anything';  // (any name is taken: Claude Code sends several)
const weather = { name: 'get_weather', description: 'The weather in a city',
                  input_schema: { type: 'object', properties: { city: { type: 'string', maxLength: 12 } }, required: ['city'] } };

// The error a request raises: "status type".
async function errorOf(body) {
  try {
    await claude.messages.create(body);
  } catch (e) {
    assert.equal(e.error?.type, 'error', `Anthropic's envelope: ${JSON.stringify(e.error)}`);
    assert.ok(e.error.error.message.length > 0);
    return `${e.status} ${e.error.error.type}`;
  }
  return 'accepted';
}

await runTests([
  ['text, whole and streamed, through the SDK', async () => {
    const body = { model, max_tokens: 30, messages: [{ role: 'user', content: 'FORCE_STOP now' }] };
    const whole = await claude.messages.create(body);
    assert.equal(whole.type, 'message');
    assert.equal(whole.role, 'assistant');
    assert.ok(whole.id.startsWith('msg_'));
    assert.deepEqual(whole.content, [{ type: 'text', text: 'alpha beta gamma delta' }]);
    assert.equal(whole.stop_reason, 'end_turn');
    assert.equal(whole.stop_sequence, null);
    assert.ok(whole.usage.input_tokens > 0 && whole.usage.output_tokens > 0);
    const stream = claude.messages.stream(body);
    const types = [];
    stream.on('streamEvent', (e) => types.push(e.type));
    const streamed = await stream.finalMessage();
    assert.deepEqual(streamed.content, whole.content);
    assert.equal(streamed.stop_reason, 'end_turn');
    assert.equal(streamed.usage.output_tokens, whole.usage.output_tokens);
    assert.equal(types[0], 'message_start');
    assert.deepEqual(types.slice(-2), ['message_delta', 'message_stop']);
    assert.ok(types.includes('content_block_start') && types.includes('content_block_stop'));
  }],
  ['a thinking block comes back with its signature and is taken back', async () => {
    const body = { model, max_tokens: 60, thinking: { type: 'enabled', budget_tokens: 1024 },
                   messages: [{ role: 'user', content: 'FORCE_REASONING hello' }] };
    const one = await claude.messages.stream(body).finalMessage();
    assert.equal(one.content.length, 2);
    assert.equal(one.content[0].type, 'thinking');
    assert.equal(one.content[0].thinking, 'I should greet them.');
    assert.ok(one.content[0].signature.length > 0);
    assert.deepEqual(one.content[1], { type: 'text', text: 'Hello there!' });
    const whole = await claude.messages.create(body);
    assert.deepEqual(whole.content, one.content, 'streamed == whole, signature included');
    const two = await claude.messages.create({ ...body, max_tokens: 4, messages: [...body.messages,
      { role: 'assistant', content: one.content }, { role: 'user', content: 'and?' }] });
    // Without tools V4 drops the earlier reasoning: reused up to where the first turn's answer began.
    assert.equal(two.usage.cache_read_input_tokens, one.usage.input_tokens + one.usage.cache_read_input_tokens - 2);
  }],
  ['a tool loop of three turns reuses every earlier token', async () => {
    const messages = [{ role: 'user', content: 'What is the weather in two cities?' }];
    const turn = (extra) => claude.messages.create({ model, max_tokens: 300, tools: [weather], messages, temperature: 0, ...extra });
    const one = await turn({ tool_choice: { type: 'tool', name: 'get_weather', disable_parallel_tool_use: true } });
    assert.equal(one.stop_reason, 'tool_use');
    const use = one.content.find((b) => b.type === 'tool_use');
    assert.ok(use.id.startsWith('toolu_'));
    assert.equal(use.name, 'get_weather');
    assert.equal(typeof use.input.city, 'string');
    messages.push({ role: 'assistant', content: one.content },
                  { role: 'user', content: [{ type: 'tool_result', tool_use_id: use.id, content: 'sunny' }] });
    const two = await turn({ tool_choice: { type: 'any', disable_parallel_tool_use: true } });
    assert.equal(two.stop_reason, 'tool_use');
    // The first turn's tool_use, sent back as a block, reads as the tokens the model sampled.
    assert.equal(two.usage.cache_read_input_tokens,
                 one.usage.input_tokens + one.usage.cache_read_input_tokens + one.usage.output_tokens - 1);
    const use2 = two.content.find((b) => b.type === 'tool_use');
    messages.push({ role: 'assistant', content: two.content },
                  { role: 'user', content: [{ type: 'tool_result', tool_use_id: use2.id, content: [{ type: 'text', text: 'FORCE_STOP rain' }] }] });
    const three = await turn({});
    assert.deepEqual(three.content, [{ type: 'text', text: 'alpha beta gamma delta' }]);
    assert.equal(three.stop_reason, 'end_turn');
    assert.equal(three.usage.cache_read_input_tokens,
                 two.usage.input_tokens + two.usage.cache_read_input_tokens + two.usage.output_tokens - 1);
  }],
  ['stop sequences and the max_tokens cut', async () => {
    const messages = [{ role: 'user', content: 'FORCE_STOP please' }];
    const stopped = await claude.messages.create({ model, max_tokens: 30, messages, stop_sequences: ['gamma'] });
    assert.deepEqual(stopped.content, [{ type: 'text', text: 'alpha beta ' }]);
    assert.equal(stopped.stop_reason, 'stop_sequence');
    assert.equal(stopped.stop_sequence, 'gamma');
    const streamed = await claude.messages.stream({ model, max_tokens: 30, messages, stop_sequences: ['gamma'] }).finalMessage();
    assert.equal(streamed.stop_sequence, 'gamma');
    const cut = await claude.messages.create({ model, max_tokens: 2, messages });
    assert.equal(cut.stop_reason, 'max_tokens');
    assert.equal(cut.usage.output_tokens, 2);
  }],
  ['count_tokens counts what create reads', async () => {
    const body = { model, system: [{ type: 'text', text: 'Be brief.' }], tools: [weather],
                   messages: [{ role: 'user', content: 'Count these tokens, every one of them.' }] };
    const counted = await claude.messages.countTokens(body);
    const made = await claude.messages.create({ ...body, max_tokens: 1 });
    assert.equal(counted.input_tokens, made.usage.input_tokens + made.usage.cache_read_input_tokens);
    assert.ok(counted.input_tokens > 20);
  }],
  ['bad requests get Anthropic errors and the server goes on', async () => {
    const user = [{ role: 'user', content: 'hi' }];
    assert.equal(await errorOf({ model, messages: user }), '400 invalid_request_error', 'missing max_tokens');
    assert.equal(await errorOf({ model, max_tokens: 5, messages: [{ role: 'user', content: [
      { type: 'tool_result', tool_use_id: 'toolu_nothing', content: 'x' }] }] }), '400 invalid_request_error', 'orphan tool_result');
    assert.equal(await errorOf({ model, max_tokens: 5, messages: user, tools: [weather],
                                 tool_choice: { type: 'tool', name: 'nope' } }), '400 invalid_request_error', 'unknown tool');
    assert.equal(await errorOf({ model, max_tokens: 5, messages: 'hi' }), '400 invalid_request_error', 'messages not an array');
    assert.equal(await errorOf({ model, max_tokens: 'many', messages: user }), '400 invalid_request_error', 'max_tokens a string');
    assert.equal(await errorOf({ model, max_tokens: 5, messages: [{ role: 'user', content: [{ type: 'image', source: {} }] }] }),
                 '400 invalid_request_error', 'an image');
    const stranger = new Anthropic({ baseURL: base, apiKey: 'wrong', maxRetries: 0 });
    await assert.rejects(stranger.messages.create({ model, max_tokens: 5, messages: user }),
                         (e) => e.status === 401 && e.error.error.type === 'authentication_error');
    const ok = await claude.messages.create({ model, max_tokens: 3, messages: user });
    assert.equal(ok.usage.output_tokens, 3);
  }],
  ['a client that disconnects cancels its request; the metrics count the endpoint', async () => {
    const before = await metrics(base);
    const first = await disconnectAfterFirstChunk(`${base}/v1/messages`, { 'x-api-key': API_KEY, 'anthropic-version': '2023-06-01' },
      { model, max_tokens: 2000, stream: true, temperature: 0,
        messages: [{ role: 'user', content: 'write a long story' }] });
    assert.ok(first.startsWith('event: message_start'), first);
    const aborted = (m) => m.values['vllm:request_success_total{model_name="ckpt",finished_reason="abort"}'] ?? 0;
    await waitForMetrics(base, (m) => aborted(m) > aborted(before), 'the abort');
    const after = await metrics(base);
    assert.ok(after.values['dsv4:requests_total{model_name="ckpt",endpoint="messages"}'] >= 14);
    assert.ok(after.values['dsv4:requests_total{model_name="ckpt",endpoint="count_tokens"}'] >= 1);
  }],
]);
