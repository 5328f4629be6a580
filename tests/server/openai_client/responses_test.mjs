// OpenAI's Responses API through the official openai client: text, whole and streamed (the SDK's
// responses.stream accumulates our events), a reasoning round trip, a three-turn function-call
// loop that reuses every earlier token, the max_output_tokens cut (incomplete), text.format
// json_schema, errors, cancellation on disconnect, and the metrics by endpoint.
// Usage: node responses_test.mjs <server>
import assert from 'node:assert/strict';
import { API_KEY, client, metrics, runTests, waitForMetrics, disconnectAfterFirstChunk } from './common.mjs';

const [base] = process.argv.slice(2);
const api = client(base);
const model = (await api.models.list()).data[0].id;
const weather = { type: 'function', name: 'get_weather', description: 'The weather in a city',
                  parameters: { type: 'object', properties: { city: { type: 'string', maxLength: 12 } }, required: ['city'] } };

async function errorOf(body) {
  try {
    await api.responses.create(body);
  } catch (e) {
    assert.ok(e.error?.message, `OpenAI's envelope: ${JSON.stringify(e.error)}`);
    return `${e.status} ${e.param ?? e.error.param}`;
  }
  return 'accepted';
}

// The raw events of a streamed request, and the SDK's final response.
async function streamed(body) {
  const stream = api.responses.stream(body);
  const events = [];
  stream.on('event', (e) => events.push(e));
  const final = await stream.finalResponse();
  return { events, final };
}

await runTests([
  ['text, whole and streamed, through the SDK', async () => {
    const body = { model, input: 'FORCE_STOP now', max_output_tokens: 30 };
    const whole = await api.responses.create(body);
    assert.equal(whole.object, 'response');
    assert.equal(whole.status, 'completed');
    assert.equal(whole.output_text, 'alpha beta gamma delta');
    assert.equal(whole.output.length, 1);
    assert.equal(whole.output[0].type, 'message');
    assert.ok(whole.usage.input_tokens > 0 && whole.usage.output_tokens > 0);
    assert.equal(whole.usage.output_tokens_details.reasoning_tokens, 0);
    const { events, final } = await streamed(body);
    assert.equal(final.output_text, whole.output_text);
    assert.equal(final.status, 'completed');
    assert.deepEqual(events.map((e) => e.sequence_number), events.map((_, i) => i), 'sequence numbers count from 0');
    assert.deepEqual(events.slice(0, 2).map((e) => e.type), ['response.created', 'response.in_progress']);
    assert.equal(events.at(-1).type, 'response.completed');
    for (const t of ['response.output_item.added', 'response.content_part.added', 'response.output_text.delta',
                     'response.output_text.done', 'response.content_part.done', 'response.output_item.done'])
      assert.ok(events.some((e) => e.type === t), t);
  }],
  ['a reasoning item comes back and is taken back', async () => {
    const body = { model, input: 'FORCE_REASONING, from the Responses API', reasoning: { effort: 'low' }, max_output_tokens: 60 };
    const { events, final: one } = await streamed(body);
    assert.deepEqual(one.output.map((o) => o.type), ['reasoning', 'message']);
    assert.equal(one.output[0].content[0].text, 'I should greet them.');
    assert.equal(one.output_text, 'Hello there!');
    assert.ok(events.some((e) => e.type === 'response.reasoning_text.delta'));
    const r = one.usage.output_tokens_details.reasoning_tokens;
    assert.ok(r > 0 && r < one.usage.output_tokens, `reasoning tokens ${r} of ${one.usage.output_tokens}`);
    const whole = await api.responses.create(body);
    assert.deepEqual(whole.output.map((o) => o.content[0].text), one.output.map((o) => o.content[0].text));
    const two = await api.responses.create({ ...body, max_output_tokens: 4,
      input: [{ role: 'user', content: 'FORCE_REASONING, from the Responses API' }, ...one.output, { role: 'user', content: 'and?' }] });
    assert.ok(['completed', 'incomplete'].includes(two.status));
    assert.equal(two.usage.input_tokens_details.cached_tokens, one.usage.input_tokens - 2);
  }],
  ['a function-call loop of three turns reuses every earlier token', async () => {
    const input = [{ role: 'user', content: 'Weather in two cities, asked through the Responses API?' }];
    const turn = (extra) => api.responses.create({ model, input, tools: [weather], max_output_tokens: 300, temperature: 0,
                                                  parallel_tool_calls: false, ...extra });
    const one = await turn({ tool_choice: { type: 'function', name: 'get_weather' } });
    const call = one.output.find((o) => o.type === 'function_call');
    assert.ok(call.call_id.startsWith('call_'));
    assert.equal(typeof JSON.parse(call.arguments).city, 'string');
    input.push(call, { type: 'function_call_output', call_id: call.call_id, output: 'sunny' });
    const two = await turn({ tool_choice: 'required' });
    // The call, sent back as an item, reads as the tokens the model sampled.
    assert.equal(two.usage.input_tokens_details.cached_tokens, one.usage.input_tokens + one.usage.output_tokens - 1);
    const call2 = two.output.find((o) => o.type === 'function_call');
    input.push(call2, { type: 'function_call_output', call_id: call2.call_id, output: 'FORCE_STOP rain' });
    const three = await turn({});
    assert.equal(three.output_text, 'alpha beta gamma delta');
    assert.equal(three.usage.input_tokens_details.cached_tokens, two.usage.input_tokens + two.usage.output_tokens - 1);
  }],
  ['the max_output_tokens cut is incomplete, whole and streamed', async () => {
    const body = { model, input: 'FORCE_STOP please', max_output_tokens: 2 };
    const whole = await api.responses.create(body);
    assert.equal(whole.status, 'incomplete');
    assert.equal(whole.incomplete_details.reason, 'max_output_tokens');
    assert.equal(whole.output[0].status, 'incomplete', 'the message cut by the budget');
    const { events, final } = await streamed(body);
    assert.equal(events.at(-1).type, 'response.incomplete');
    assert.equal(final.status, 'incomplete');
  }],
  ['text.format json_schema puts the reply under the schema', async () => {
    const schema = { type: 'object', properties: { answer: { type: 'integer', minimum: 0, maximum: 100 } }, required: ['answer'], additionalProperties: false };
    const r = await api.responses.create({ model, input: 'a number', max_output_tokens: 300,
                                           text: { format: { type: 'json_schema', name: 'n', schema, strict: true } } });
    assert.equal(r.status, 'completed', r.output_text);
    assert.equal(typeof JSON.parse(r.output_text).answer, 'number');
  }],
  ['bad requests are 400s naming the field, and the server goes on', async () => {
    assert.equal(await errorOf({ model, input: 'hi', previous_response_id: 'resp_x' }), '400 previous_response_id');
    assert.equal(await errorOf({ model, input: [{ type: 'function_call_output', call_id: 'call_none', output: 'x' }] }),
                 '400 input[0].call_id');
    assert.equal(await errorOf({ model, input: 'hi', tools: [weather], tool_choice: { type: 'function', name: 'nope' } }),
                 '400 tool_choice');
    assert.equal(await errorOf({ model, input: 42 }), '400 input');
    assert.equal(await errorOf({ model, input: 'hi', tools: [{ name: 'get_weather' }] }), '400 tools');
    assert.equal(await errorOf({ model: 'gpt-nothing', input: 'hi' }), '404 model');
    // Greedy: sampled (the default temperature), a reply may end at its own end token first.
    const ok = await api.responses.create({ model, input: 'hi', max_output_tokens: 3, temperature: 0 });
    assert.equal(ok.usage.output_tokens, 3);
  }],
  ['a client that disconnects cancels its request; the metrics count the endpoint', async () => {
    const before = await metrics(base);
    const first = await disconnectAfterFirstChunk(`${base}/v1/responses`, { authorization: `Bearer ${API_KEY}` },
      { model, input: 'write a long story', max_output_tokens: 2000, stream: true, temperature: 0 });
    assert.ok(first.startsWith('event: response.created'), first);
    const aborted = (m) => m.values[`vllm:request_success_total{model_name="${model}",finished_reason="abort"}`] ?? 0;
    await waitForMetrics(base, (m) => aborted(m) > aborted(before), 'the abort');
    const after = await metrics(base);
    assert.ok(after.values[`dsv4:requests_total{model_name="${model}",endpoint="responses"}`] >= 12);
  }],
]);
