// Shared helpers of the dsv4 serve client tests.
import http from 'node:http';
import OpenAI from 'openai';

export const API_KEY = 'test-key';

export function client(base, apiKey = API_KEY) {
  return new OpenAI({ baseURL: `${base}/v1`, apiKey, maxRetries: 0, timeout: 120_000 });
}

// /metrics as {"name{labels}": value}, plus sum(name) over every label set.
export async function metrics(base) {
  const text = await (await fetch(`${base}/metrics`)).text();
  const values = {};
  for (const line of text.split('\n')) {
    if (!line || line.startsWith('#')) continue;
    const at = line.lastIndexOf(' ');
    values[line.slice(0, at)] = Number(line.slice(at + 1));
  }
  const sum = (name) =>
    Object.entries(values)
      .filter(([k]) => k === name || k.startsWith(`${name}{`))
      .reduce((s, [, v]) => s + v, 0);
  return { values, sum, text };
}

// Waits until the metrics satisfy `pred` (the scheduler releases at its next step).
export async function waitForMetrics(base, pred, what, ms = 15_000) {
  const end = Date.now() + ms;
  let m;
  while (Date.now() < end) {
    m = await metrics(base);
    if (pred(m)) return m;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`metrics never showed ${what}:\n${m.text}`);
}

// Token ids from logprob entries of return_tokens_as_token_ids ("token_id:N").
export const ids = (tokens) => tokens.map((t) => Number(t.replace('token_id:', '')));

// A completion's generated token ids (non-streamed or streamed).
export async function completionTokens(api, body, { stream = false, signal } = {}) {
  const req = { model: body.model, logprobs: 0, return_tokens_as_token_ids: true, temperature: 0, ...body, stream };
  if (!stream) {
    const r = await api.completions.create(req);
    return { tokens: ids(r.choices[0].logprobs.tokens), text: r.choices[0].text, usage: r.usage,
             finish: r.choices[0].finish_reason };
  }
  req.stream_options = { include_usage: true };
  const s = await api.completions.create(req, { signal });
  const out = { tokens: [], text: '', usage: null, finish: null, chunks: 0 };
  for await (const c of s) {
    out.chunks++;
    if (c.usage) out.usage = c.usage;
    for (const ch of c.choices) {
      out.text += ch.text ?? '';
      if (ch.logprobs) out.tokens.push(...ids(ch.logprobs.tokens));
      if (ch.finish_reason) out.finish = ch.finish_reason;
    }
  }
  return out;
}

export function rng(seed) {  // mulberry32: reproducible test inputs
  return () => {
    seed |= 0; seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

// Runs named async tests in order; exits non-zero on the first failure.
export async function runTests(tests) {
  for (const [name, fn] of tests) {
    const t0 = Date.now();
    try {
      await fn();
      console.log(`ok   ${name} (${Date.now() - t0} ms)`);
    } catch (e) {
      console.log(`FAIL ${name}: ${e.stack ?? e}`);
      process.exit(1);
    }
  }
}

// A streaming client that reads the first chunk of the answer and then closes its connection
// (node:http's destroy(): an aborted fetch may keep reading to reuse the connection). Resolves
// with that chunk.
export function disconnectAfterFirstChunk(url, headers, body) {
  return new Promise((resolve, reject) => {
    const req = http.request(url, { method: 'POST', headers: { 'content-type': 'application/json', ...headers } }, (res) => {
      res.once('data', (chunk) => {
        req.destroy();
        resolve(chunk.toString());
      });
    });
    req.on('error', () => {});
    req.on('close', () => reject(new Error('closed before any chunk')));
    req.end(JSON.stringify(body));
  });
}
