// `--draft auto` against fixed K: interleaved rounds of `dsv4 generate --draft D --json` (each run a
// fresh process: auto starts knowing nothing), greedy, --ignore-eos; decode tokens/s medians, the
// acceptance by position, and the steps by drafts verified (what auto chose).
//
//   node benchmarks/draft_sweep.mjs --model DIR [--dsv4 build/dsv4] [--drafts 0,1,2,3,4,auto]
//        [--rounds 3] [--tokens 256] [--prompt-len 160] [--vocab 1000] [--args '...'] [--json]
import { spawnSync } from "node:child_process";

const arg = (name, fallback) => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? process.argv[i + 1] : fallback;
};
const model = arg("model");
if (!model) throw new Error("--model DIR is required");
const dsv4 = arg("dsv4", "build/dsv4"), rounds = Number(arg("rounds", "3"));
const drafts = arg("drafts", "0,1,2,3,4,auto").split(",");
const vocab = Number(arg("vocab", "1000")), promptLen = Number(arg("prompt-len", "160"));
const prompt = Array.from({ length: promptLen }, (_, t) => (t * 7919 + 11) % vocab).join(",");
const extra = (arg("args", "") || "").split(" ").filter(Boolean);

const runs = {};
for (let round = 0; round < rounds; ++round)
  for (const d of drafts) {
    const args = ["generate", "--model", model, "--quiet", "--json", "--ignore-eos", "--prompt-tokens", prompt,
                  "--max-new-tokens", arg("tokens", "256"), "--draft", d, ...extra];
    const r = spawnSync(dsv4, args, { encoding: "utf8", maxBuffer: 1 << 26 });
    if (r.status !== 0) throw new Error(`dsv4 ${args.join(" ")}: ${r.stderr}`);
    const j = JSON.parse(r.stdout);
    (runs[d] ??= []).push(j);
    process.stderr.write(`round ${round + 1}, draft ${d}: ${j.decode_tokens_per_s.toFixed(2)} tok/s` +
                         (j.verified_drafts_histogram ? `, steps by drafts verified ${JSON.stringify(j.verified_drafts_histogram)}` : "") + "\n");
  }
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const rows = drafts.map((d) => ({
  draft: d,
  decode_tokens_per_s: median(runs[d].map((j) => j.decode_tokens_per_s)),
  by_round: runs[d].map((j) => +j.decode_tokens_per_s.toFixed(2)),
  acceptance_by_position: runs[d][0].acceptance_by_position?.map((a) => +a.toFixed(2)),
  verified_drafts_histograms: runs[d].map((j) => j.verified_drafts_histogram),
}));
const fixed = rows.filter((r) => r.draft !== "auto");
const best = fixed.reduce((a, b) => (b.decode_tokens_per_s > a.decode_tokens_per_s ? b : a));
const auto = rows.find((r) => r.draft === "auto");
if (process.argv.includes("--json")) {
  console.log(JSON.stringify({ rows, best: best.draft, auto_over_best: auto && auto.decode_tokens_per_s / best.decode_tokens_per_s }));
} else {
  console.log("| draft | decode tok/s (median) | by round | acceptance by position | steps by drafts verified (per round) |");
  console.log("|---|---|---|---|---|");
  for (const r of rows)
    console.log(`| ${r.draft} | ${r.decode_tokens_per_s.toFixed(2)} | ${r.by_round.join(" / ")} | ${(r.acceptance_by_position ?? []).join(" ")} | ${r.verified_drafts_histograms.map((h) => JSON.stringify(h ?? [])).join(" ")} |`);
  console.log(`\nbest fixed K: ${best.draft} (${best.decode_tokens_per_s.toFixed(2)} tok/s)` +
              (auto ? `; auto ${auto.decode_tokens_per_s.toFixed(2)} = ${(auto.decode_tokens_per_s / best.decode_tokens_per_s).toFixed(3)}× the best` : ""));
}
