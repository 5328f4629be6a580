// Pipeline stages over MPI (`mpirun -np N dsv4 ... --stages N`) against one process, on tiny
// checkpoints, 2 and 3 ranks on one machine. The CPU backend is batch-invariant, so a staged run
// must give the very tokens and logits of the single process: greedy and seeded sampling, with
// fixed and automatic drafts, several sequences (micro-batches), `score`'s logits file byte for
// byte, `chat`, and `serve` with concurrent requests and prefix reuse. Each staged run's report
// proves the pipeline ran (every stage computed rows and sent its streams on). The failures: a
// rank killed mid-run ends the job with rank 0's error, no hang; a rank given another checkpoint,
// a wrong rank count, a missing mpirun and a bad layer split are refused with messages that say so.
//
// usage: node pipeline_stages.mjs CASE <dsv4 binary> <tests/data dir> <scratch dir>
//   CASE: generate | score-chat | serve | failures | pro
import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";

const [kase, DSV4, DATA, TMP] = process.argv.slice(2);
const scratch = path.join(TMP, `pipeline_stages_${kase}`);
fs.rmSync(scratch, { recursive: true, force: true });
fs.mkdirSync(scratch, { recursive: true });

// Root in CI containers; the ranks share the cores (2 here), unbound; Open MPI's shared-memory
// transport without the cross-memory attach that containers forbid. A sanitized build's leak
// checker would report Open MPI's own allocations at exit.
const env = {
  ...process.env,
  OMPI_MCA_btl_vader_single_copy_mechanism: "none",
  ASAN_OPTIONS: [process.env.ASAN_OPTIONS, "detect_leaks=0"].filter(Boolean).join(":"),
};
const MPIRUN = ["--allow-run-as-root", "--oversubscribe", "--bind-to", "none"];

// dsv4 ARGS in one process (np 1) or N ranks with --stages N; returns status, stdout, stderr.
function dsv4(args, { np = 1, input, timeout = 300_000 } = {}) {
  const [cmd, argv] = np > 1 ? ["mpirun", [...MPIRUN, "-np", `${np}`, DSV4, ...args, "--stages", `${np}`]]
                             : [DSV4, args];
  const r = spawnSync(cmd, argv, { env, input, timeout, encoding: "latin1", maxBuffer: 1 << 28 });
  if (r.error) throw new Error(`${cmd} ${argv.join(" ")}: ${r.error.message}`);
  return { status: r.status, stdout: r.stdout, stderr: r.stderr, line: `${np > 1 ? `mpirun -np ${np} ` : ""}dsv4 ${args.join(" ")}` };
}
function ok(args, options) {
  const r = dsv4(args, options);
  assert.equal(r.status, 0, `${r.line} failed (${r.status}):\n${r.stderr}`);
  return r;
}
function json(args, options) {
  const r = ok(args, options);
  try {
    return JSON.parse(r.stdout);
  } catch (e) {
    throw new Error(`${r.line}: not JSON: ${r.stdout.slice(0, 400)}\n${r.stderr}`);
  }
}

// A tiny checkpoint with the toy tokenizer (text prompts work).
function checkpoint(name, args) {
  const dir = path.join(scratch, name), tok = path.join(scratch, "tokenizer");
  fs.mkdirSync(tok, { recursive: true });
  fs.copyFileSync(path.join(DATA, "tokenizer/toy_tokenizer.json"), path.join(tok, "tokenizer.json"));
  fs.copyFileSync(path.join(DATA, "tokenizer/toy_tokenizer_config.json"), path.join(tok, "tokenizer_config.json"));
  ok(["make-checkpoint", "--out", dir, "--quiet", "--tokenizer", path.join(tok, "tokenizer.json"), ...args]);
  return dir;
}
// The mirror preset with a perturbed MTP: drafts accepted in part, so that rollback runs.
const mirror = (seed = 3) => checkpoint(`mirror${seed}`, ["--preset", "mirror", "--perturb", "0.05", "--seed", `${seed}`]);

// The staged report: N stages covering the layers in order, each of which ran.
function expectStagesRan(report, np, what) {
  assert.ok(Array.isArray(report.stages), `${what}: no "stages" in the --json report`);
  assert.equal(report.stages.length, np, what);
  let next = 0;
  for (const s of report.stages) {
    assert.equal(s.layers[0], next, `${what}: stage ${s.stage}'s layers ${s.layers}`);
    assert.ok(s.layers[1] > s.layers[0], `${what}: stage ${s.stage} holds no layer`);
    next = s.layers[1];
    assert.ok(s.micro_batches > 0 && s.rows > 0, `${what}: stage ${s.stage} computed nothing: ${JSON.stringify(s)}`);
    assert.ok(s.bytes_sent > 0 && s.messages_sent > 0, `${what}: stage ${s.stage} sent nothing`);
  }
  return report.stages;
}
const expectPartialAcceptance = (r, what) =>
  assert.ok(r.accepted > 0 && r.accepted < r.drafted, `${what}: drafts accepted ${r.accepted} of ${r.drafted}`);

// Each generate setting in one process and in 2 and 3 stages: the same tokens.
function generateMatches(ck, settings, { stages = [2, 3], extra = [] } = {}) {
  const runs = {};
  for (const [name, args] of Object.entries(settings)) {
    const all = ["generate", "--model", ck, "--json", "--quiet", "--ignore-eos", ...extra, ...args];
    const single = json(all);
    assert.equal(single.stages, undefined);
    for (const np of stages) {
      const staged = json(all, { np });
      assert.deepEqual(staged.tokens, single.tokens, `${name}: ${np} stages' tokens differ from one process's`);
      expectStagesRan(staged, np, `${name}, ${np} stages`);
      runs[`${name}/${np}`] = staged;
    }
    runs[name] = single;
  }
  return runs;
}

const cases = {
  generate() {
    const ck = mirror();
    const prompt = ["--prompt", "The pipeline runs the layers in stages", "--max-new-tokens", "96"];
    const sampled = ["--temperature", "0.8", "--top-p", "0.95", "--seed", "5"];
    const r = generateMatches(ck, {
      plain: [...prompt, "--draft", "0"],
      drafts2: [...prompt, "--draft", "2"],
      drafts3: [...prompt, "--draft", "3"],
      auto: [...prompt, "--draft", "auto"],
      sampledPlain: [...prompt, "--draft", "0", ...sampled],
      sampledDrafts2: [...prompt, "--draft", "2", ...sampled],
      // (auto with sampling chooses K from timings: its tokens are the target's distribution, not one sequence)
    });
    for (const k of ["drafts2", "drafts3", "auto"]) assert.deepEqual(r[k].tokens, r.plain.tokens, `${k}: greedy equals plain`);
    for (const k of ["drafts2/2", "drafts2/3", "drafts3/3", "sampledDrafts2/3"]) expectPartialAcceptance(r[k], k);
    assert.notDeepEqual(r.sampledPlain.tokens, r.plain.tokens, "sampling changed nothing: the seeded case tests nothing");

    // Several sequences: a pass of many rows (here the prompts' prefill, 3 × 80 rows) is cut into
    // micro-batches, one per stage, so that each stage works on one while the next works on
    // another; a decode pass of a few rows is not (each micro-batch would read the weights again).
    const long = (seed) => Array.from({ length: 80 }, (_, i) => (i * 31 + seed * 17) % 300).join(",");
    const batch = generateMatches(ck, {
      batch: ["--prompt-tokens", long(1), "--prompt-tokens", long(2), "--prompt-tokens", long(3),
              "--max-new-tokens", "48", "--draft", "2"],
    });
    for (const np of [2, 3]) {
      const [first] = batch[`batch/${np}`].stages;
      assert.equal(first.split_passes, 1, `${np} stages: the prompts' pass alone is cut`);
    }
    // Layers placed by hand: the split stated is the split run.
    const split = json(["generate", "--model", ck, "--json", "--quiet", ...prompt, "--draft", "2", "--stage-layers", "1,3"],
                       { np: 2 });
    assert.deepEqual(split.stages.map((s) => s.layers), [[0, 1], [1, 4]]);
    assert.deepEqual(split.tokens, r.plain.tokens);
  },

  "score-chat"() {
    const ck = mirror();
    const tokens = Array.from({ length: 40 }, (_, i) => (i * 37 + 11) % 300).join(",");
    const files = [1, 2, 3].map((np) => {
      const out = path.join(scratch, `score${np}.safetensors`);
      ok(["score", "--model", ck, "--tokens", tokens, "--prompt-len", "23", "--out", out], { np });
      return fs.readFileSync(out);
    });
    assert.ok(files[0].length > 40 * 300 * 4 * 2, "score wrote the target's and the MTP's logits");
    assert.ok(files[0].subarray(0, 4096).toString("latin1").includes("mtp.logits"));
    assert.ok(files[1].equals(files[0]), "2 stages: score's logits differ from one process's");
    assert.ok(files[2].equals(files[0]), "3 stages: score's logits differ from one process's");

    const chat = ["chat", "--model", ck, "--quiet", "--prompt-file", "-", "--max-new-tokens", "40", "--draft", "2"];
    const input = "Say something about stages.";
    // (the reply and the drafts' tally; not the line with the speed)
    const reply = (r) => r.stdout.split("\n").filter((l) => !l.includes("tokens/s")).join("\n");
    const single = reply(ok(chat, { input }));
    assert.ok(single.includes("[answer]") && single.includes("accepted"), single);
    for (const np of [2, 3]) assert.equal(reply(ok(chat, { input, np })), single, `chat, ${np} stages`);
  },

  async serve() {
    const ck = mirror();
    const prompts = ["Stage one talks to", "Every rank holds a range", "The head is on rank", "Micro-batches keep"];
    // A second round that extends each prompt with its reply: the prefix cache reuses the first
    // round's states instead of prefilling them.
    const results = {};
    for (const np of [1, 2]) {
      const server = await startServer(ck, np);
      try {
        const first = await Promise.all(prompts.map((p, i) => complete(server.port, p, 24 + 4 * i)));
        const second = await Promise.all(prompts.map((p, i) => complete(server.port, p + first[i].text + " and", 16)));
        const metrics = await (await fetch(`http://127.0.0.1:${server.port}/metrics`)).text();
        const hits = Number(/^vllm:prefix_cache_hits_total(?:\{[^}]*\})? (\S+)/m.exec(metrics)?.[1]);
        assert.ok(hits > 0, `${np} stage(s): the second round reused no prefix:\n${metrics}`);
        results[np] = { first, second };
      } finally {
        await server.stop();
      }
    }
    assert.ok(results[1].first.every((r) => r.tokens > 0));
    assert.deepEqual(results[2], results[1], "serve: 2 stages' completions differ from one process's");
  },

  async failures() {
    const ck = mirror(), other = mirror(4);
    const gen = (model) => ["generate", "--model", model, "--quiet", "--prompt", "hi", "--max-new-tokens", "8"];
    const refused = (r, ...needles) => {
      assert.notEqual(r.status, 0, `${r.line} succeeded`);
      for (const n of needles) assert.ok(r.stderr.includes(n), `${r.line}: [${r.stderr}] lacks [${n}]`);
    };
    refused(dsv4([...gen(ck), "--stages", "2"]), "--stages 2 runs one stage per MPI rank", "mpirun -np 2");
    const mismatch = spawnSync("mpirun", [...MPIRUN, "-np", "2", DSV4, ...gen(ck), "--stages", "3"], { env, encoding: "utf8" });
    refused({ ...mismatch, line: "mpirun -np 2 ... --stages 3" }, "--stages 3 but mpirun started 2 ranks");
    refused(dsv4([...gen(ck), "--stage-layers", "1,2"], { np: 2 }), "--stage-layers");
    refused(dsv4([...gen(ck), "--stage-layers", "4,0"], { np: 2 }), "--stage-layers");
    // (MPMD: rank 1 started on another checkpoint of the same shapes)
    const mpmd = spawnSync("mpirun", [...MPIRUN, "-np", "1", DSV4, ...gen(ck), "--stages", "2", ":",
                                      "-np", "1", DSV4, ...gen(other), "--stages", "2"], { env, encoding: "utf8", timeout: 120_000 });
    refused({ ...mpmd, line: "mpirun (two checkpoints)" }, ck, other);

    // A stage killed mid-run: the job ends at once with rank 0's error and mpirun's. (A run of the
    // whole context, ~10 s in 2 stages here: it cannot end on its own before the kill.)
    const args = [...MPIRUN, "-np", "2", DSV4, "generate", "--model", ck, "--prompt", "a long one", "--ignore-eos",
                  "--max-new-tokens", "4000", "--draft", "2", "--stages", "2"];
    const job = spawn("mpirun", args, { env });
    let stderr = "", stdout = "";
    job.stderr.on("data", (d) => (stderr += d));
    job.stdout.on("data", (d) => (stdout += d));
    const ended = new Promise((resolve) => job.on("exit", (code, signal) => resolve({ code, signal })));
    const rank1 = await waitFor(() => rankPid(1, ck), 60_000, "rank 1's process");
    await waitFor(() => stdout.length > 0, 60_000, "the first tokens");  // (decoding, not opening)
    const seen = stdout.length;
    process.kill(rank1, "SIGKILL");
    const killedAt = Date.now();
    const timer = setTimeout(() => job.kill("SIGKILL"), 60_000);
    const { code, signal } = await ended;
    clearTimeout(timer);
    const seconds = (Date.now() - killedAt) / 1000;
    const told = `mpirun's exit ${code} (signal ${signal}) ${seconds} s after the kill, ${seen} bytes of tokens ` +
                 `before it and ${stdout.length} in all; its standard error:\n${stderr}`;
    assert.ok(seconds < 30, `the job ran on after rank 1 was killed: ${told}`);
    assert.notEqual(code, 0, told);
    assert.ok(!stdout.includes("generated;") && !stderr.includes("generated;"), `the run cannot have finished: ${told}`);
    assert.ok(/dsv4: error: the pipeline stopped|dsv4: error: .*stage/.test(stderr), `rank 0 said nothing: ${told}`);
    assert.ok(/signal 9|Killed/.test(stderr), `mpirun does not name the killed rank: ${told}`);
  },

  pro() {
    // V4-Pro's layer pattern in small: ratio-128 hash-routed first layers, no window-only layer.
    const ck = checkpoint("tiny-pro", ["--preset", "tiny-pro", "--seed", "1"]);
    const cfg = JSON.parse(fs.readFileSync(path.join(ck, "config.json")));
    assert.deepEqual(cfg.compress_ratios.slice(0, 2), [128, 128]);
    assert.ok(!cfg.compress_ratios.slice(0, -1).includes(0) && cfg.num_hash_layers >= 2);
    const r = generateMatches(ck, {
      plain: ["--prompt-tokens", "3,14,15,92,65,35,89,79", "--max-new-tokens", "40", "--draft", "0"],
      drafts2: ["--prompt-tokens", "3,14,15,92,65,35,89,79", "--max-new-tokens", "40", "--draft", "2"],
    });
    assert.deepEqual(r.drafts2.tokens, r.plain.tokens);
    const files = [1, 2].map((np) => {
      const out = path.join(scratch, `pro${np}.safetensors`);
      ok(["score", "--model", ck, "--tokens", "3,14,15,92,65,35,89,79,32,38,46,26,43", "--prompt-len", "9", "--out", out], { np });
      return fs.readFileSync(out);
    });
    assert.ok(files[1].equals(files[0]), "tiny-pro, 2 stages: score's logits differ");
  },
};

// --- helpers of the asynchronous cases -------------------------------------------------------

async function waitFor(probe, ms, what) {
  const until = Date.now() + ms;
  for (;;) {
    const v = probe();
    if (v) return v;
    if (Date.now() > until) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

// The pid of the dsv4 process of MPI rank `rank` running on checkpoint `ck`.
function rankPid(rank, ck) {
  for (const pid of fs.readdirSync("/proc").filter((p) => /^\d+$/.test(p))) {
    try {
      const cmdline = fs.readFileSync(`/proc/${pid}/cmdline`, "latin1").split("\0");
      if (cmdline[0] !== DSV4 || !cmdline.includes(ck)) continue;
      const environ = fs.readFileSync(`/proc/${pid}/environ`, "latin1").split("\0");
      if (environ.includes(`OMPI_COMM_WORLD_RANK=${rank}`)) return Number(pid);
    } catch { /* gone meanwhile */ }
  }
  return 0;
}

async function startServer(ck, np) {
  const args = ["serve", "--model", ck, "--port", "0", "--quiet", "--max-sequences", "4", "--draft", "2",
                "--served-model-name", "m"];
  const proc = np > 1 ? spawn("mpirun", [...MPIRUN, "-np", `${np}`, DSV4, ...args, "--stages", `${np}`], { env })
                      : spawn(DSV4, args, { env });
  let stderr = "";
  proc.stderr.on("data", (d) => (stderr += d));
  proc.stdout.resume();
  const exited = new Promise((resolve) => proc.on("exit", resolve));
  let gone = false;
  exited.then(() => (gone = true));
  const port = await waitFor(() => {
    if (gone) throw new Error(`serve (${np} stages) ended:\n${stderr}`);
    return Number(/listening on http:\/\/[^:]+:(\d+)/.exec(stderr)?.[1]);
  }, 120_000, "serve's port");
  // Until the model is loaded the server answers 503 on /health.
  for (const until = Date.now() + 120_000; ; await new Promise((r) => setTimeout(r, 100))) {
    if (gone) throw new Error(`serve (${np} stages) ended:\n${stderr}`);
    const health = await fetch(`http://127.0.0.1:${port}/health`).catch(() => null);
    if (health?.ok) break;
    if (Date.now() > until) throw new Error(`serve (${np} stages) never became ready:\n${stderr}`);
  }
  return {
    port,
    async stop() {
      proc.kill(np > 1 ? "SIGINT" : "SIGTERM");
      const timer = setTimeout(() => proc.kill("SIGKILL"), 30_000);
      await exited;
      clearTimeout(timer);
    },
  };
}

async function complete(port, prompt, max_tokens) {
  const r = await fetch(`http://127.0.0.1:${port}/v1/completions`, {
    method: "POST", headers: { "content-type": "application/json" },
    body: JSON.stringify({ model: "m", prompt, max_tokens, temperature: 0 }),
  });
  if (!r.ok) throw new Error(`HTTP ${r.status}: ${await r.text()}`);
  const j = await r.json();
  return { text: j.choices[0].text, tokens: j.usage.completion_tokens };
}

if (!cases[kase]) throw new Error(`unknown case ${kase}: ${Object.keys(cases).join(", ")}`);
if (spawnSync("mpirun", ["--version"], { env }).error) {
  console.log("mpirun not found (scripts/install-deps.sh installs Open MPI): skipped");
  process.exit(77);
}
await cases[kase]();
console.log(`pipeline stages, ${kase}: passed`);
