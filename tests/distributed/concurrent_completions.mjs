// Sends completions to a `dsv4 serve` at once and prints their texts, in order, as one JSON line.
//   node concurrent_completions.mjs PORT DRAFTS PROMPT...     (DRAFTS: draft_tokens per request, or "default")
const [port, drafts, ...prompts] = process.argv.slice(2);
const one = async (prompt, i) => {
  const body = { model: "m", prompt, max_tokens: 24 + 4 * i, temperature: 0 };
  if (drafts !== "default") body.draft_tokens = Number(drafts);
  const r = await fetch(`http://127.0.0.1:${port}/v1/completions`, {
    method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body),
  });
  if (!r.ok) throw new Error(`HTTP ${r.status}: ${await r.text()}`);
  const j = await r.json();
  return { text: j.choices[0].text, tokens: j.usage.completion_tokens };
};
const out = await Promise.all(prompts.map(one));
console.log(JSON.stringify(out));
