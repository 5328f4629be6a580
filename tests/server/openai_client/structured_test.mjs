// Structured output through the official openai client: response_format json_object and
// json_schema (the content parses and satisfies the schema, streamed and not), tool_choice
// "required" and a named function (the call's arguments parse and satisfy the tool's schema),
// finish_reason "length" when max_tokens cuts the structure, and 400s naming what cannot be
// constrained (or, for a schema too ambiguous to follow, its own request fails, not its neighbour). The checkpoint's weights are random: the schemas bound every string and number
// so that any output the grammar allows ends within the budget.
// Usage: node structured_test.mjs <server>
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { client, runTests } from './common.mjs';

const [base] = process.argv.slice(2);
const api = client(base);
const model = (await api.models.list()).data[0].id;
const user = (content) => [{ role: 'user', content }];

const PERSON = {
  type: 'object',
  properties: {
    name: { type: 'string', maxLength: 10 },
    age: { type: 'integer', minimum: 0, maximum: 150 },
    pets: { type: 'array', items: { enum: ['cat', 'dog'] }, maxItems: 3 },
    member: { type: 'boolean' },
  },
  required: ['name', 'age'],
  additionalProperties: false,
};
const TOOLS = [
  { type: 'function', function: { name: 'get_weather', parameters: { type: 'object', properties: {
    city: { type: 'string', maxLength: 12 }, days: { type: 'integer', minimum: 1, maximum: 7 },
    unit: { enum: ['C', 'F'] } }, required: ['city', 'days'] } } },
  { type: 'function', function: { name: 'get_time', parameters: { type: 'object', properties: {
    zone: { enum: ['UTC', 'CET'] } }, required: ['zone'] } } },
];

// The JSON Schema subset these tests use, checked independently of the server.
function check(value, schema, where = '$') {
  if (schema.enum) return assert.ok(schema.enum.includes(value), `${where}: ${JSON.stringify(value)} not in the enum`);
  switch (schema.type) {
    case 'object': {
      assert.ok(value && typeof value === 'object' && !Array.isArray(value), `${where}: not an object`);
      for (const k of schema.required ?? []) assert.ok(k in value, `${where}: required '${k}' missing`);
      for (const [k, v] of Object.entries(value)) {
        const s = schema.properties?.[k];
        assert.ok(s || schema.additionalProperties !== false, `${where}: undeclared '${k}'`);
        if (s) check(v, s, `${where}.${k}`);
      }
      return;
    }
    case 'array':
      assert.ok(Array.isArray(value), `${where}: not an array`);
      if (schema.maxItems !== undefined) assert.ok(value.length <= schema.maxItems, `${where}: too many items`);
      return value.forEach((v, i) => check(v, schema.items ?? {}, `${where}[${i}]`));
    case 'integer':
      assert.ok(Number.isInteger(value), `${where}: ${value} is not an integer`);
      if (schema.minimum !== undefined) assert.ok(value >= schema.minimum, `${where}: below the minimum`);
      if (schema.maximum !== undefined) assert.ok(value <= schema.maximum, `${where}: above the maximum`);
      return;
    case 'string':
      assert.equal(typeof value, 'string', `${where}: not a string`);
      if (schema.maxLength !== undefined) assert.ok([...value].length <= schema.maxLength, `${where}: too long`);
      return;
    case 'boolean':
      return assert.equal(typeof value, 'boolean', `${where}: not a boolean`);
    default:
      return;
  }
}

async function streamed(body) {
  const s = await api.chat.completions.create({ model, ...body, stream: true });
  const out = { content: '', calls: [], finish: null };
  for await (const c of s) {
    for (const ch of c.choices) {
      out.content += ch.delta.content ?? '';
      for (const call of ch.delta.tool_calls ?? []) out.calls[call.index] = call;
      if (ch.finish_reason) out.finish = ch.finish_reason;
    }
  }
  return out;
}

async function expect400(promise, param, mention) {
  try {
    await promise;
  } catch (e) {
    assert.ok(e instanceof OpenAI.APIError, `expected an APIError, got ${e}`);
    assert.equal(e.status, 400, e.message);
    assert.equal(e.param, param, e.message);
    if (mention) assert.ok(e.error.message.includes(mention), e.error.message);
    return;
  }
  assert.fail('expected HTTP 400');
}

const schemaFormat = (schema) => ({ type: 'json_schema', json_schema: { name: 'person', schema, strict: true } });

await runTests([
  ['response_format json_object: the content is a JSON object', async () => {
    // Any object: its strings are unbounded, and random weights may not close one within the
    // budget ("length"); whatever finishes with "stop" must parse, and some replies do.
    let completed = 0;
    for (const [content, seed] of [['hi', 0], ['Describe a cat in JSON.', 1], ['hi', 2], ['hello', 3]]) {
      const r = await api.chat.completions.create({ model, messages: user(content), temperature: seed ? 1 : 0, seed,
                                                    max_tokens: 300, response_format: { type: 'json_object' } });
      const { finish_reason: finish, message } = r.choices[0];
      assert.ok(finish === 'stop' || finish === 'length', finish);
      if (finish === 'length') continue;
      const value = JSON.parse(message.content);
      assert.ok(value && typeof value === 'object' && !Array.isArray(value), message.content);
      ++completed;
    }
    assert.ok(completed >= 1, 'no reply completed its object');
  }],
  ['response_format json_schema: the content satisfies the schema, streamed and not', async () => {
    for (const seed of [1, 2, 3]) {
      const body = { messages: user('Who are you?'), temperature: seed === 1 ? 0 : 1, seed, max_tokens: 400,
                     response_format: schemaFormat(PERSON) };
      const r = await api.chat.completions.create({ model, ...body });
      assert.equal(r.choices[0].finish_reason, 'stop', r.choices[0].message.content);
      check(JSON.parse(r.choices[0].message.content), PERSON);
      const s = await streamed(body);
      assert.equal(s.content, r.choices[0].message.content);
      assert.equal(s.finish, 'stop');
    }
  }],
  ['a structure cut by max_tokens finishes with length, never stop', async () => {
    const body = { messages: user('Who are you?'), temperature: 0, max_tokens: 4, response_format: schemaFormat(PERSON) };
    const r = await api.chat.completions.create({ model, ...body });
    assert.equal(r.choices[0].finish_reason, 'length');
    assert.throws(() => JSON.parse(r.choices[0].message.content));
    assert.equal((await streamed(body)).finish, 'length');
  }],
  ['tool_choice required: the call and its arguments satisfy the tool schema', async () => {
    const body = { messages: user('Weather in Paris?'), tools: TOOLS, tool_choice: 'required', parallel_tool_calls: false,
                   temperature: 0, max_tokens: 400 };
    const r = await api.chat.completions.create({ model, ...body });
    const m = r.choices[0].message;
    assert.equal(r.choices[0].finish_reason, 'tool_calls', JSON.stringify(m));
    assert.equal(m.tool_calls.length, 1);
    const tool = TOOLS.find((t) => t.function.name === m.tool_calls[0].function.name);
    assert.ok(tool, m.tool_calls[0].function.name);
    check(JSON.parse(m.tool_calls[0].function.arguments), tool.function.parameters);
    const s = await streamed(body);
    assert.equal(s.finish, 'tool_calls');
    assert.deepEqual(s.calls.map((c) => [c.function.name, c.function.arguments]),
                     m.tool_calls.map((c) => [c.function.name, c.function.arguments]));
  }],
  ['tool_choice naming a function calls that function', async () => {
    for (const seed of [4, 5]) {
      const r = await api.chat.completions.create({
        model, messages: user('What time is it?'), tools: TOOLS, temperature: 1, seed, max_tokens: 400,
        tool_choice: { type: 'function', function: { name: 'get_time' } } });
      const m = r.choices[0].message;
      assert.equal(r.choices[0].finish_reason, 'tool_calls', JSON.stringify(m));
      assert.deepEqual(m.tool_calls.map((c) => c.function.name), ['get_time']);
      check(JSON.parse(m.tool_calls[0].function.arguments), TOOLS[1].function.parameters);
    }
  }],
  ['a schema too ambiguous to follow fails its own request with a 400; the request beside it goes on', async () => {
    // Every "[" doubles the parses (either alternative of the anyOf): past the matcher's limit
    // the grammar gives up on this sequence alone. No finite text satisfies the schema (every
    // array holds an array), but up to 22 characters of whitespace may sit between brackets:
    // max_tokens leaves room for the 10 brackets the limit takes, however much whitespace comes.
    // A completion of a 5-token prompt (a chat would show the schema in its prompt: a prefill of
    // hundreds of tokens) fails well within the server's 2 s, while a status can still be 400.
    const nested = { anyOf: [{ type: 'array', items: { $ref: '#' }, minItems: 1 },
                             { type: 'array', items: { $ref: '#' }, minItems: 1 }] };
    await Promise.all([
      expect400(api.completions.create({ model, prompt: 'Nest.', temperature: 0, max_tokens: 1000,
                                         response_format: schemaFormat(nested) }), 'response_format', 'more than 1024 parses'),
      (async () => {
        const r = await api.chat.completions.create({ model, messages: user('Who are you?'), temperature: 0,
                                                      max_tokens: 300, response_format: schemaFormat(PERSON) });
        assert.equal(r.choices[0].finish_reason, 'stop');
        check(JSON.parse(r.choices[0].message.content), PERSON);
      })(),
    ]);
  }],
  ['what cannot be constrained is a 400 naming the field and the keyword', async () => {
    await expect400(api.chat.completions.create({ model, messages: user('hi'),
      response_format: schemaFormat({ type: 'object', patternProperties: { '^x': {} } }) }), 'response_format', 'patternProperties');
    await expect400(api.chat.completions.create({ model, messages: user('hi'), tool_choice: 'required', tools: [
      { type: 'function', function: { name: 'f', parameters: { type: 'object', properties: {
        a: { type: 'string', not: { const: 'x' } } } } } }] }), 'tools', "'not'");
    await expect400(api.chat.completions.create({ model, messages: user('hi'),
      response_format: { type: 'json_schema', json_schema: { schema: PERSON } } }), 'response_format', 'name');
    await expect400(api.chat.completions.create({ model, messages: user('hi'), stop: ['}'],
      response_format: { type: 'json_object' } }), 'stop');
  }],
]);
