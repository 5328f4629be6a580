// Pipeline stages on one machine: decode tokens/s with 1, 2, 4 concurrent sequences for 1, 2 and 3
// stages (`mpirun -np N dsv4 generate ... --stages N`), rounds interleaved, medians; and for each
// staged run what each stage computed, waited and sent per token (the streams crossing each
// boundary). On one machine the ranks share its cores: a stage's compute is slower than alone and
// the figure measures the pipeline's overheads, not the gain of more machines.
//
//   node benchmarks/stage_bench.mjs --model DIR [--dsv4 build/dsv4] [--rounds 3] [--tokens 48]
//        [--sequences 1,2,4] [--stages 1,2,3] [--draft 0] [--weights mapped] [--json]
import { spawnSync } from "node:child_process";

const arg = (name, fallback) => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? process.argv[i + 1] : fallback;
};
const model = arg("model");
if (!model) throw new Error("--model DIR is required");
const dsv4 = arg("dsv4", "build/dsv4"), rounds = Number(arg("rounds", "3")), tokens = arg("tokens", "48");
const sequences = arg("sequences", "1,2,4").split(",").map(Number), stages = arg("stages", "1,2,3").split(",").map(Number);
const env = { ...process.env, OMPI_MCA_btl_vader_single_copy_mechanism: "none" };
const prompt = (i) => Array.from({ length: 12 }, (_, t) => (t * 7919 + i * 104729 + 11) % 120000).join(",");

function run(seqs, np) {
  const args = ["generate", "--model", model, "--quiet", "--json", "--ignore-eos", "--max-new-tokens", tokens,
                "--draft", arg("draft", "0"), "--weights", arg("weights", "mapped")];
  for (let i = 0; i < seqs; ++i) args.push("--prompt-tokens", prompt(i));
  const [cmd, argv] = np > 1 ? ["mpirun", ["--allow-run-as-root", "--oversubscribe", "--bind-to", "none", "-np", `${np}`,
                                           dsv4, ...args, "--stages", `${np}`]]
                             : [dsv4, args];
  const r = spawnSync(cmd, argv, { env, encoding: "utf8", maxBuffer: 1 << 26 });
  if (r.status !== 0) throw new Error(`${cmd} ${argv.join(" ")}: ${r.stderr}`);
  return JSON.parse(r.stdout);
}

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const results = {};
for (let round = 0; round < rounds; ++round)
  for (const seqs of sequences)
    for (const np of stages) {
      const j = run(seqs, np);
      const key = `${seqs}/${np}`;
      (results[key] ??= []).push(j);
      process.stderr.write(`round ${round + 1}: ${seqs} sequence(s), ${np} stage(s): ${j.decode_tokens_per_s.toFixed(2)} tok/s\n`);
    }

const table = [];
for (const seqs of sequences)
  for (const np of stages) {
    const runs = results[`${seqs}/${np}`];
    const row = { sequences: seqs, stages: np, decode_tokens_per_s: median(runs.map((j) => j.decode_tokens_per_s)) };
    if (np > 1) {
      // Per stage, per row (token) it computed: compute, wait and send time, bytes sent on.
      row.per_stage = runs[0].stages.map((_, s) => {
        const per = (f) => median(runs.map((j) => j.stages[s][f] / j.stages[s].rows));
        return { stage: s, layers: runs[0].stages[s].layers, compute_ms: 1e3 * per("compute_s"), wait_ms: 1e3 * per("wait_s"),
                 send_ms: 1e3 * per("send_s"), bytes_per_token: per("bytes_sent"),
                 rows_per_micro_batch: median(runs.map((j) => j.stages[s].rows / j.stages[s].micro_batches)) };
      });
    }
    table.push(row);
  }
if (process.argv.includes("--json")) {
  console.log(JSON.stringify(table, null, 1));
} else {
  const base = Object.fromEntries(table.filter((r) => r.stages === 1).map((r) => [r.sequences, r.decode_tokens_per_s]));
  console.log("| sequences | stages | decode tok/s | vs 1 stage | per stage: compute / wait / send ms per token, KB sent per token |");
  console.log("|---|---|---|---|---|");
  for (const r of table) {
    const stagesText = (r.per_stage ?? []).map((s) =>
      `${s.stage} [${s.layers}): ${s.compute_ms.toFixed(1)} / ${s.wait_ms.toFixed(1)} / ${s.send_ms.toFixed(3)}, ${(s.bytes_per_token / 1024).toFixed(1)}`).join("; ");
    console.log(`| ${r.sequences} | ${r.stages} | ${r.decode_tokens_per_s.toFixed(2)} | ${(r.decode_tokens_per_s / base[r.sequences]).toFixed(2)}× | ${stagesText} |`);
  }
}
