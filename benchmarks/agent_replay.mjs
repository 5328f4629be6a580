// Agent replay benchmark: the shape of a coding agent's session sent to a running `dsv4 serve`,
// turn by turn, each request resending the whole conversation as agents do: a system prompt and
// tool definitions (~3k tokens), then turns of an assistant tool call (recorded, as the client
// keeps it) and the tool's result (files, acknowledgements, test runs, search hits), 17 turns growing
// past 16k tokens, and an 18th for after a restart. Per turn: the prompt's tokens, the
// tokens the server reused (usage.prompt_tokens_details.cached_tokens) and prefilled, and the
// time to the first token (a request for one token: its whole latency). Plain fetch, no packages.
//
//   node benchmarks/agent_replay.mjs --url http://127.0.0.1:8080 [--turns 1-17] [--label cached] [--json]
//
// Run it against a server with the prefix cache (the default), one with --no-prefix-cache, and one
// restarted on the same --kv-cache-dir (its first turn reads the state from disk). The session is
// the same every run (fixed seed); --turns picks which turns are sent (e.g. 1,7,13), each with
// the whole conversation up to it.
import http from 'node:http';

const args = {};
for (let i = 2; i < process.argv.length; ++i) {
  const a = process.argv[i], next = process.argv[i + 1];
  if (!a.startsWith('--')) continue;
  args[a.slice(2)] = next === undefined || next.startsWith('--') ? 'true' : (++i, next);
}
const url = args.url ?? 'http://127.0.0.1:8080';
const label = args.label ?? '';
const totalTurns = Number(args['session-turns'] ?? 18);
const pick = (args.turns ?? `1-${totalTurns}`).split(',').flatMap((r) => {
  const [a, b] = r.split('-').map(Number);
  return b ? Array.from({ length: b - a + 1 }, (_, i) => a + i) : [a];
});

function rng(seed) {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = Math.imul(s ^ (s >>> 15), 1 | s);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
const random = rng(2026);
const WORDS = ('the function returns a value when called with the file path and the test suite runs every case in order ' +
  'error handler config module parse build index cache token buffer stream request response server client thread ' +
  'update commit branch merge review patch line column offset length range check assert expect result output input')
  .split(' ');
const words = (n) => Array.from({ length: n }, () => WORDS[Math.floor(random() * WORDS.length)]).join(' ');
const code = (lines) => Array.from({ length: lines }, (_, i) =>
  `${String(i + 1).padStart(4)}  ${words(4 + Math.floor(random() * 8)).replace(/ /g, '_')}(${words(2).replace(' ', ', ')});`)
  .join('\n');

// The session: fixed, recorded-shaped.
const tools = ['read_file', 'write_file', 'run_tests', 'search_code'].map((name) => ({
  type: 'function',
  function: {
    name,
    description: words(24),
    parameters: { type: 'object', properties: { path: { type: 'string', description: words(6) },
                                                 query: { type: 'string', description: words(6) } },
                  required: ['path'] },
  },
}));
// What each tool gives back, as an agent sees it: a file (long), an acknowledgement (a line), a
// test run (a few lines), search hits (a dozen).
function result(tool, t) {
  if (tool === 'read_file') return code(36 + (t % 3) * 8);
  if (tool === 'write_file') return `wrote src/m${t}.cc (${20 + t} lines)`;
  if (tool === 'run_tests') return `${words(6)}\n${code(6)}\n${t % 2 ? 'FAILED' : 'passed'}: ${words(5)}`;
  return code(14);
}
const system = { role: 'system', content: `You are a coding agent. ${words(300)}` };
const turns = [];  // what each turn appends: [assistant tool call, tool result] (the first: the user's task)
turns.push([{ role: 'user', content: `Fix the failing tests in the repository. ${words(30)}` }]);
for (let t = 1; t < totalTurns; ++t) {
  const tool = tools[(t + 1) % tools.length].function.name;  // read, write, test, search, ...: the last turns write, then test
  const id = `call_${String(t).padStart(4, '0')}`;
  const appended = [
    { role: 'assistant', content: words(5 + (t % 3) * 3),
      tool_calls: [{ id, type: 'function', function: { name: tool, arguments: JSON.stringify({ path: `src/m${t}.cc`, query: words(4) }) } }] },
    { role: 'tool', tool_call_id: id, content: result(tool, t) },
  ];
  if (t % 5 === 0) appended.push({ role: 'user', content: words(10) });
  turns.push(appended);
}

const model = args.model ?? (await (await fetch(`${url}/v1/models`)).json()).data[0].id;

// node:http rather than fetch: a cold prefill of a long prompt outlasts fetch's body timeout.
function post(path, payload) {
  return new Promise((resolve, reject) => {
    const req = http.request(`${url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' } }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (d) => { text += d; });
      res.on('end', () => {
        try { resolve({ status: res.statusCode, body: JSON.parse(text) }); } catch (e) { reject(new Error(`${res.statusCode}: ${text}`)); }
      });
    });
    req.on('error', reject);
    req.end(JSON.stringify(payload));
  });
}

async function send(messages) {
  const t0 = performance.now();
  const { status, body } = await post('/v1/chat/completions',
                                      { model, messages, tools, max_tokens: 1, temperature: 0, ignore_eos: true });
  if (status !== 200) throw new Error(`${status}: ${JSON.stringify(body)}`);
  const seconds = (performance.now() - t0) / 1000;
  return { seconds, prompt: body.usage.prompt_tokens, cached: body.usage.prompt_tokens_details?.cached_tokens ?? 0 };
}

const rows = [];
const messages = [system];
for (let t = 1; t <= totalTurns; ++t) {
  messages.push(...turns[t - 1]);
  if (!pick.includes(t)) continue;
  const r = await send(messages);
  rows.push({ label, turn: t, prompt_tokens: r.prompt, reused: r.cached, prefilled: r.prompt - r.cached, ttft_s: r.seconds });
  if (!args.json)
    console.log(`${label.padEnd(10)} turn ${String(t).padStart(2)}  prompt ${String(r.prompt).padStart(6)}  reused ` +
                `${String(r.cached).padStart(6)}  prefilled ${String(r.prompt - r.cached).padStart(6)}  ` +
                `first token ${r.seconds.toFixed(2).padStart(8)} s`);
}
if (args.json) console.log(JSON.stringify(rows));
