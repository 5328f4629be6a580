// dsv4 bench: the machine's memory read bandwidth, the MTP draft step, one decode step per
// layer kind at a real context, verification (extend) costs, the speculative speedup they
// imply for the full 43-layer model, and end-to-end speculative generation. Library code in
// src/dsv4_bench/; this file parses options and prints the table or one JSON object.
#include <algorithm>
#include <cstdio>

#include <nlohmann/json.hpp>

#include "backend/cpu/cpu_backend.h"
#include "dsv4_bench/arithmetic_rate.h"
#include "dsv4_bench/memory_bandwidth.h"
#include "dsv4_bench/model_bench.h"
#include "dsv4_bench/speedup_model.h"
#include "bench_dspark.h"
#include "io/config.h"
#include "checkpoint/presets.h"
#include "commands.h"
#include "core/error.h"

namespace dsv4::cli {

namespace {

struct BenchArgs {
  std::string model, e2e_model, mtp_model;
  bool json = false;
  int threads = 0;
  int64_t context = 4096;
  int reps = 7;
  int64_t mtp_vocab = 32768;
  int64_t e2e_prompt = 0, e2e_tokens = 64;  // prompt 0: the sliding window + 32 tokens
  int e2e_rounds = 3;
  DraftHeadFormat e2e_draft_head = DraftHeadFormat::Target;
  double bandwidth_gib = 1.0;
};

// The fraction of the bandwidth sampled just before each repetition (median over repetitions; the
// machine's bandwidth drifts with its neighbours' load), or of the run's median without samples.
double fraction(const bench::StepFigures& f, double bw) {
  const double adjacent = f.fraction_of_bandwidth();
  return adjacent > 0 ? adjacent : bw > 0 ? f.gbs() / bw : 0.0;
}

// Bytes or arithmetic: the step's bytes at the bandwidth sampled beside it, against the time its
// product kernels need for its weights when the bytes come from cache (dsv4_bench/arithmetic_rate.h).
struct Bound {
  double bytes_ms = 0, arithmetic_ms = 0;
  const char* name() const { return arithmetic_ms <= 0 ? "" : arithmetic_ms > bytes_ms ? "arithmetic" : "bytes"; }
};
Bound bound_of(const bench::StepFigures& f, double bw, const bench::ArithmeticRates& rates) {
  const double b = f.bandwidth_gbs > 0 ? f.bandwidth_gbs : bw;
  return {b > 0 ? double(f.bytes()) / (b * 1e9) * 1e3 : 0.0, bench::arithmetic_ms(rates, f.format_bytes)};
}

nlohmann::json step_json(const bench::StepFigures& f, double bw, const bench::ArithmeticRates& rates) {
  nlohmann::json j = {{"ms", f.ms},
                      {"bytes", f.bytes()},
                      {"weight_bytes", f.weight_bytes},
                      {"cache_bytes", f.cache_bytes},
                      {"gbs", f.gbs()},
                      {"bandwidth_gbs", f.bandwidth_gbs > 0 ? f.bandwidth_gbs : bw},
                      {"fraction_of_bandwidth", fraction(f, bw)}};
  const Bound b = bound_of(f, bw, rates);
  if (b.arithmetic_ms > 0) {
    j["bytes_ms"] = b.bytes_ms;
    j["arithmetic_ms"] = b.arithmetic_ms;
    j["bound"] = b.name();
  }
  return j;
}

void print_step(const char* name, const bench::StepFigures& f, double bw, const bench::ArithmeticRates& rates,
                const std::string& extra = "") {
  const Bound b = bound_of(f, bw, rates);
  std::printf("  %-34s %9.2f %10.1f %8.2f %8.2f %8.2f %6.0f%%", name, f.ms, double(f.weight_bytes) / 1e6,
              double(f.cache_bytes) / 1e6, f.gbs(), f.bandwidth_gbs > 0 ? f.bandwidth_gbs : bw, 100.0 * fraction(f, bw));
  if (b.arithmetic_ms > 0) std::printf(" %8.2f %8.2f  %-10s", b.bytes_ms, b.arithmetic_ms, b.name());
  else std::printf(" %8s %8s  %-10s", "", "", "");
  std::printf(" %s\n", extra.c_str());
}

struct AtAcceptance {
  bench::MeasuredSpeedup own, full, full_vocab;
};

// What `--draft auto` would verify on a model of this checkpoint's depth and on the full model
// (43 layers), by the speedup model: the k (0 = plain) with the best modeled speedup at the
// acceptance by position of the deepest fixed-k run (the only one that measured every position).
struct AutoProjection {
  int from = -1;  // the run whose acceptance is used (-1: none)
  int own_k = 0, full_k = 0;
  double own = 1.0, full = 1.0;
};
AutoProjection project_auto(const std::vector<bench::EndToEnd>& e2e, const std::vector<AtAcceptance>& at) {
  AutoProjection p;
  for (size_t i = 0; i < e2e.size(); ++i)
    if (!e2e[i].automatic && e2e[i].k > 0 && (p.from < 0 || e2e[i].k > e2e[size_t(p.from)].k)) p.from = int(i);
  if (p.from < 0) return p;
  // Each fixed-k run's model reads the reach it measured; the deepest run's reach truncated to k
  // is the same model at one acceptance, so every k is judged on the same evidence.
  const std::vector<double>& reach = e2e[size_t(p.from)].acceptance_by_position;
  for (size_t i = 0; i < e2e.size(); ++i) {
    const int k = e2e[i].k;
    if (e2e[i].automatic || k <= 0 || size_t(k) > reach.size()) continue;
    if (at[i].own.speedup > p.own) p.own = at[i].own.speedup, p.own_k = k;
    if (at[i].full.speedup > p.full) p.full = at[i].full.speedup, p.full_k = k;
  }
  return p;
}

int run_bench(const BenchArgs& a) {
  if (load_config(std::filesystem::path(a.model) / "config.json").has_dspark()) {  // the DSpark drafter's bench
    DSparkBenchArgs d;
    d.model = a.model;
    d.mtp_model = a.mtp_model;
    d.json = a.json;
    d.threads = a.threads;
    d.context = a.context;
    d.reps = a.reps;
    d.e2e_prompt = a.e2e_prompt;
    d.e2e_tokens = a.e2e_tokens;
    d.e2e_rounds = a.e2e_rounds;
    d.bandwidth_gib = a.bandwidth_gib;
    return run_dspark_bench_command(d);
  }
  const std::vector<int> ks = {1, 2, 3, 4};
  const std::vector<double> alphas = {0.6, 0.7, 0.8, 0.9};
  auto progress = [&](const std::string& s) {
    if (!a.json) std::fprintf(stderr, "  .. %s\n", s.c_str());
  };
  nlohmann::json j;
  bench::ModelBenchResult r;
  double bw = 0;
  std::string isa;
  int threads = 0;
  bench::ArithmeticRates rates;
  {
    auto engine = Engine::open(a.model, {{BackendKind::Cpu, a.threads}, true, 0, 16});
    auto* cpu = dynamic_cast<CpuBackend*>(engine->backend.get());
    DSV4_CHECK(cpu, "bench: needs the CPU backend");
    threads = cpu->num_threads();
    isa = isa_name(cpu->isa());
    const bench::BandwidthResult b =
        bench::measure_read_bandwidth(cpu->pool(), size_t(a.bandwidth_gib * double(size_t(1) << 30)));
    progress("memory read bandwidth " + std::to_string(b.gbs) + " GB/s");
    bench::ModelBenchOptions o;
    bench::BandwidthProbe probe(cpu->pool(), size_t(256) << 20);
    o.bandwidth = [&] { return probe.sample(); };
    o.context = a.context;
    o.reps = a.reps;
    o.mtp_vocab = a.mtp_vocab;
    o.progress = progress;
    r = bench::run_model_bench(*engine, o);
    progress("arithmetic rates of the kernels (weights in cache)");
    rates = bench::measure_arithmetic_rates(*cpu, engine->files->weights);
    r.bandwidth_samples.insert(r.bandwidth_samples.begin(), b.all_gbs.begin(), b.all_gbs.end());
    bw = bench::median(r.bandwidth_samples);
  }
  // The full model's layer pattern (V4-Flash: 43 layers).
  const ModelConfig full = v4_flash_config();
  const std::vector<int64_t> pattern(full.compress_ratios.begin(), full.compress_ratios.begin() + full.num_hidden_layers);
  const bench::SpeedupModel sm = bench::model_speedup(r, pattern, r.draft.ms, alphas, ks);
  bench::SpeedupModel sm_vocab;
  if (r.mtp_vocab > 0) sm_vocab = bench::model_speedup(r, pattern, r.draft_vocab.ms, alphas, ks);

  std::vector<bench::EndToEnd> e2e;
  const std::string e2e_model = a.e2e_model.empty() ? a.model : a.e2e_model;
  std::vector<int64_t> own_pattern;
  int64_t e2e_prompt = 0;
  {
    auto engine = Engine::open(e2e_model, {{BackendKind::Cpu, a.threads}, true, 0, 16, a.e2e_draft_head});
    const ModelConfig& c = engine->config();
    // Past the first window: there the MTP's window holds one row fewer than the target's
    // (it has no row for position 0), which is not the steady state of a long generation.
    e2e_prompt = a.e2e_prompt > 0 ? a.e2e_prompt : c.sliding_window + 32;
    progress("end to end on " + e2e_model);
    e2e = bench::run_end_to_end(*engine, {{0}, {1}, {2}, {3}, {4}, {0, true}}, e2e_prompt, a.e2e_tokens, 7, a.e2e_rounds);
    own_pattern.assign(c.compress_ratios.begin(), c.compress_ratios.begin() + c.num_hidden_layers);
  }
  // The speedup model at the acceptance measured end to end: for the measured checkpoint's own
  // layers (comparable with the measured speedup) and for the full model.
  const bench::LayerKind* mtp_block = nullptr;
  for (const bench::LayerKind& k : r.kinds)
    if (k.layer < 0) mtp_block = &k;
  DSV4_CHECK(mtp_block, "bench: the MTP block was not measured");
  // The end-to-end runs draft with --e2e-draft-head: the models at their acceptance use that head's step.
  const bench::StepFigures& e2e_draft = a.e2e_draft_head == DraftHeadFormat::Fp8 && !r.draft_fp8.rep_ms.empty()
                                            ? r.draft_fp8
                                        : a.e2e_draft_head == DraftHeadFormat::Int4 && !r.draft_int4.rep_ms.empty()
                                            ? r.draft_int4
                                            : r.draft;
  const bench::SpeedupModel sm_own = bench::model_speedup(r, own_pattern, e2e_draft.ms, {}, ks);
  const bench::SpeedupModel sm_e2e = bench::model_speedup(r, pattern, e2e_draft.ms, alphas, ks);
  std::vector<AtAcceptance> at(e2e.size()), at_deepest(e2e.size());
  size_t deepest = 0;
  for (size_t i = 0; i < e2e.size(); ++i)
    if (!e2e[i].automatic && e2e[i].k > e2e[deepest].k) deepest = i;
  for (size_t i = 0; i < e2e.size(); ++i) {
    const int k = e2e[i].k;
    if (k == 0 || e2e[i].automatic) continue;  // (auto verifies varying lengths: no single-k model)
    at[i].own = bench::speedup_at_acceptance(sm_own, *mtp_block, k, e2e[i].acceptance_by_position);
    at[i].full = bench::speedup_at_acceptance(sm_e2e, *mtp_block, k, e2e[i].acceptance_by_position);
    const std::vector<double>& all = e2e[deepest].acceptance_by_position;
    if (all.size() < size_t(k)) continue;
    const std::vector<double> reach(all.begin(), all.begin() + k);
    at_deepest[i].own = bench::speedup_at_acceptance(sm_own, *mtp_block, k, reach);
    at_deepest[i].full = bench::speedup_at_acceptance(sm_e2e, *mtp_block, k, reach);
    if (r.mtp_vocab > 0)
      at[i].full_vocab = bench::speedup_at_acceptance(sm_vocab, *mtp_block, k, e2e[i].acceptance_by_position);
  }

  j["model"] = a.model;
  j["threads"] = threads;
  j["kernels"] = isa;
  j["context"] = r.context;
  j["prefill_tokens_per_s"] = double(r.context) / r.prefill_seconds;
  for (size_t l = 0; l < r.cache_bytes.size(); ++l)
    j["cache"].push_back({{"layer", l},
                          {"bytes_held", r.cache_bytes[l]},
                          {"bound_bytes", r.cache_bound[l]},
                          {"bytes_per_token", r.cache_bytes_per_token[l]}});
  j["mem_bandwidth_gbs"] = bw;  // median of all samples; each step also carries its adjacent sample
  j["mem_bandwidth_samples_gbs"] = r.bandwidth_samples;
  for (auto& [format, gbs] : rates.gbs) j["arithmetic_gbs"][weight_format_name(format)] = gbs;
  j["draft_step"] = step_json(r.draft, bw, rates);
  if (r.mtp_vocab > 0) {
    j["draft_step_vocab32k"] = step_json(r.draft_vocab, bw, rates);
    j["draft_step_vocab32k"]["vocab"] = r.mtp_vocab;
  }
  if (!r.draft_fp8.rep_ms.empty()) j["draft_step_fp8_head"] = step_json(r.draft_fp8, bw, rates);
  if (!r.draft_int4.rep_ms.empty()) j["draft_step_int4_head"] = step_json(r.draft_int4, bw, rates);
  for (const bench::LayerKind& k : r.kinds) {
    nlohmann::json s = step_json(k.decode, bw, rates);
    s["layer"] = k.layer;
    s["experts"] = k.experts.at(1);
    j["decode_step"][k.name] = s;
    if (!k.decode_repeated.rep_ms.empty())
      j["decode_step_repeated"][k.name] = step_json(k.decode_repeated, bw, rates);
    for (auto& [n, f] : k.extend) {
      j["verify_ratio"][k.name][std::to_string(n)] = f.time_ratio(k.decode);
      j["verify_ms"][k.name][std::to_string(n)] = f.ms;
      j["verify_experts"][k.name][std::to_string(n)] = k.experts.at(n);
    }
    if (k.same_rows > 1)
      j["verify_ratio_same_experts"][k.name][std::to_string(k.same_rows)] = k.extend_same.time_ratio(k.decode);
  }
  j["decode_step"]["head"] = step_json(r.head.at(1), bw, rates);
  j["decode_step"]["checkpoint"] = step_json(r.decode_step, bw, rates);
  for (auto& [n, f] : r.head)
    if (n > 1) j["verify_ratio"]["head"][std::to_string(n)] = f.time_ratio(r.head.at(1));
  auto speedup_json = [&](const bench::SpeedupModel& m) {
    nlohmann::json s;
    s["formula"] =
        "tokens_per_step = (1 - alpha^(k+1)) / (1 - alpha); speedup = tokens_per_step * T_decode / "
        "(T_verify(k+1) + k * T_draft); T_decode, T_verify composed from per-kind layer costs + head";
    for (auto& [ratio, count] : m.layers_of_kind) s["layers"][std::to_string(ratio)] = count;
    s["decode_ms"] = m.decode_ms;
    s["draft_ms"] = m.draft_ms;
    for (auto& [n, t] : m.verify_ms) s["verify_ms"][std::to_string(n)] = t;
    for (auto& p : m.points)
      s["points"].push_back({{"alpha", p.alpha}, {"k", p.k}, {"tokens_per_step", p.tokens_per_step},
                             {"step_ms", p.step_ms}, {"speedup", p.speedup}});
    s["notes"] = m.notes;
    return s;
  };
  j["speedup_model"] = speedup_json(sm);
  if (r.mtp_vocab > 0) j["speedup_model_vocab32k"] = speedup_json(sm_vocab);
  if (!r.draft_int4.rep_ms.empty())
    j["speedup_model_int4_head"] = speedup_json(bench::model_speedup(r, pattern, r.draft_int4.ms, alphas, ks));
  if (const AutoProjection p = project_auto(e2e, at_deepest); p.from >= 0)
    j["end_to_end"]["auto_projection"] = {{"acceptance_of_k", e2e[size_t(p.from)].k},
                                          {"this_checkpoint", {{"k", p.own_k}, {"speedup", p.own}}},
                                          {"full", {{"k", p.full_k}, {"speedup", p.full}}}};
  j["end_to_end"]["model"] = e2e_model;
  j["end_to_end"]["new_tokens"] = a.e2e_tokens;
  j["end_to_end"]["prompt_tokens"] = e2e_prompt;
  j["end_to_end"]["rounds"] = a.e2e_rounds;
  j["end_to_end"]["draft_head"] = draft_head_format_name(a.e2e_draft_head);
  auto measured_json = [](const bench::MeasuredSpeedup& p) {
    return nlohmann::json{{"tokens_per_step", p.tokens_per_step}, {"step_ms", p.step_ms},
                          {"recompute_ms", p.recompute_ms}, {"speedup", p.speedup}};
  };
  for (size_t i = 0; i < e2e.size(); ++i) {
    const bench::EndToEnd& e = e2e[i];
    nlohmann::json run = {{"k", e.k},
                          {"auto", e.automatic},
                          {"tokens_per_s", e.tokens_per_s},
                          {"round_tokens_per_s", e.round_tokens_per_s},
                          {"speedup", e2e[0].tokens_per_s > 0 ? e.tokens_per_s / e2e[0].tokens_per_s : 0.0},
                          {"acceptance", e.acceptance},
                          {"acceptance_by_position", e.acceptance_by_position},
                          {"partial_share", e.partial_share},
                          {"mean_accepted_length", e.mean_accepted_length}};
    if (e.automatic) {
      nlohmann::json pass = nlohmann::json::object(), draft = nlohmann::json::object();
      for (auto [rows, ms] : e.pass_ms_by_rows) pass[std::to_string(rows)] = ms;
      for (auto [n, ms] : e.draft_ms) draft[std::to_string(n)] = ms;
      run["verified_drafts_histogram"] = e.verified_steps;
      run["cost_model"] = {{"pass_ms_by_rows", pass}, {"draft_ms_per_depth", draft}, {"expected_gain", e.expected_gain}};
    }
    if (e.k > 0 && !e.automatic) {
      run["model_this_checkpoint"] = measured_json(at[i].own);
      run["model_full"] = measured_json(at[i].full);
      if (r.mtp_vocab > 0) run["model_full_vocab32k"] = measured_json(at[i].full_vocab);
    }
    j["end_to_end"]["runs"].push_back(run);
  }
  if (a.json) {
    std::printf("%s\n", j.dump(1).c_str());
    return 0;
  }

  std::printf("dsv4 bench: %s\n  threads %d, kernels %s, context %lld (prefill %.1f tokens/s)\n", a.model.c_str(),
              threads, isa.c_str(), (long long)r.context, double(r.context) / r.prefill_seconds);
  std::printf("  cache after the prefill, per layer: held (bound from its geometry; growing part per token)\n   ");
  for (size_t l = 0; l < r.cache_bytes.size(); ++l)
    std::printf(" %zu: %.2f MiB (%.2f; %.0f B/token)", l, double(r.cache_bytes[l]) / 1048576.0,
                double(r.cache_bound[l]) / 1048576.0, r.cache_bytes_per_token[l]);
  std::printf("\n");
  double lo = bw, hi = bw;
  for (double x : r.bandwidth_samples) lo = std::min(lo, x), hi = std::max(hi, x);
  std::printf("  memory read bandwidth (all threads): median %.2f GB/s of %zu samples (%.1f .. %.1f)\n\n", bw,
              r.bandwidth_samples.size(), lo, hi);
  std::printf("  kernel arithmetic, weights in cache (GB of weights/s, all threads):");
  for (auto& [format, gbs] : rates.gbs) std::printf(" %s %.1f", weight_format_name(format), gbs);
  std::printf("\n  every step decodes a new token each repetition (new experts), as generation does;\n"
              "  'repeated': the same token every time (its experts' pages warm)\n\n");
  std::printf("  %-34s %9s %10s %8s %8s %8s %7s %8s %8s  %-10s\n", "step", "ms", "weight MB", "cache MB", "GB/s",
              "bw GB/s", "of bw", "bytes ms", "arith ms", "bound by");
  print_step("mtp draft step (full head)", r.draft, bw, rates);
  if (r.mtp_vocab > 0)
    print_step(("mtp draft step (" + std::to_string(r.mtp_vocab) + " rows)").c_str(), r.draft_vocab, bw, rates);
  if (!r.draft_fp8.rep_ms.empty()) print_step("mtp draft step (fp8 head copy)", r.draft_fp8, bw, rates);
  if (!r.draft_int4.rep_ms.empty()) print_step("mtp draft step (int4 head copy)", r.draft_int4, bw, rates);
  for (const bench::LayerKind& k : r.kinds) {
    const std::string name = k.name + (k.layer >= 0 ? " (L" + std::to_string(k.layer) + ")" : "");
    print_step(("decode layer: " + name).c_str(), k.decode, bw, rates, std::to_string(k.experts.at(1)) + " experts");
    if (!k.decode_repeated.rep_ms.empty()) print_step("  the same, repeated", k.decode_repeated, bw, rates);
  }
  print_step("head (hc_head + norm + LM head)", r.head.at(1), bw, rates);
  print_step(("decode step (" + std::to_string(r.kinds.size() - 1) + "-kind checkpoint)").c_str(), r.decode_step, bw,
             rates);

  std::printf("\n  verification: extend of n tokens / one decode step (distinct routed experts)\n  %-12s", "kind");
  for (auto& [n, f] : r.kinds[0].extend) std::printf("   n=%-8lld", (long long)n);
  const int64_t same_rows = r.kinds[0].same_rows;
  if (same_rows > 1) std::printf("  n=%lld, the decode row's experts", (long long)same_rows);
  std::printf("\n");
  for (const bench::LayerKind& k : r.kinds) {
    std::printf("  %-12s", k.name.c_str());
    for (auto& [n, f] : k.extend) std::printf("  %5.2f (%3lld)", f.time_ratio(k.decode), (long long)k.experts.at(n));
    if (k.same_rows > 1) std::printf("  %5.2f (%3lld)", k.extend_same.time_ratio(k.decode), (long long)k.experts.at(1));
    std::printf("\n");
  }
  std::printf("  %-12s", "head");
  for (auto& [n, f] : r.head)
    if (n > 1) std::printf("  %5.2f      ", f.time_ratio(r.head.at(1)));
  std::printf("\n");

  auto print_model = [&](const bench::SpeedupModel& m, const char* title) {
    std::printf("\n  speedup model, %s: %lld layers (", title, (long long)pattern.size());
    for (auto& [ratio, count] : m.layers_of_kind) std::printf(" %lld x ratio %lld", (long long)count, (long long)ratio);
    std::printf(" ) + head; T_decode %.1f ms, T_draft %.1f ms\n", m.decode_ms, m.draft_ms);
    std::printf("  %-8s", "alpha");
    for (int k : ks) std::printf("     k=%d", k);
    std::printf("\n");
    for (double al : alphas) {
      std::printf("  %-8.1f", al);
      for (auto& p : m.points)
        if (p.alpha == al) std::printf("  %6.2f", p.speedup);
      std::printf("\n");
    }
    for (auto& n : m.notes) std::printf("  note: %s\n", n.c_str());
  };
  print_model(sm, "full draft head");
  if (r.mtp_vocab > 0) print_model(sm_vocab, ("draft head of " + std::to_string(r.mtp_vocab) + " rows").c_str());
  if (!r.draft_int4.rep_ms.empty())
    print_model(bench::model_speedup(r, pattern, r.draft_int4.ms, alphas, ks), "int4 draft head (rescored)");
  std::printf("  (speedup = E·T_decode / (T_verify(k+1) + k·T_draft), E = (1 - a^(k+1)) / (1 - a))\n");

  std::printf("\n  end to end on %s (%lld prompt tokens, %lld new, greedy, median of %d interleaved rounds):\n",
              e2e_model.c_str(), (long long)e2e_prompt, (long long)a.e2e_tokens, a.e2e_rounds);
  std::printf("  %-4s %9s %8s %8s %-31s %8s   %s\n", "k", "tokens/s", "speedup", "tok/step", "acceptance by position",
              "partial", "speedup model at this acceptance: this checkpoint / 43 layers (the runs' draft head, 32k head)");
  for (size_t i = 0; i < e2e.size(); ++i) {
    const bench::EndToEnd& e = e2e[i];
    std::string by;
    for (double x : e.acceptance_by_position) by += (by.empty() ? "" : " ") + std::to_string(x).substr(0, 4);
    std::printf("  %-4s %9.2f %8.2f %8.2f %-31s %8.2f", e.name().c_str(), e.tokens_per_s,
                e2e[0].tokens_per_s > 0 ? e.tokens_per_s / e2e[0].tokens_per_s : 0.0, e.mean_accepted_length,
                by.c_str(), e.partial_share);
    if (e.k > 0 && !e.automatic)
      std::printf("   %.2f / %.2f, %.2f (MTP recompute %.2f ms a step)", at[i].own.speedup, at[i].full.speedup,
                  at[i].full_vocab.speedup, at[i].own.recompute_ms);
    std::printf("\n");
  }
  if (const AutoProjection p = project_auto(e2e, at_deepest); p.from >= 0)
    std::printf("  auto, by the speedup model at the acceptance of k = %d's run: this checkpoint verifies k = %d "
                "(%.2fx), 43 layers k = %d (%.2fx)\n",
                e2e[size_t(p.from)].k, p.own_k, p.own, p.full_k, p.full);
  for (const bench::EndToEnd& e : e2e) {
    if (!e.automatic) continue;
    std::string hist, pass, draft;
    for (size_t k = 0; k < e.verified_steps.size(); ++k) hist += cat(hist.empty() ? "" : ", ", k, ": ", e.verified_steps[k]);
    for (auto [rows, ms] : e.pass_ms_by_rows) pass += cat(pass.empty() ? "" : ", ", rows, ": ", ms);
    for (auto [n, ms] : e.draft_ms) draft += cat(draft.empty() ? "" : ", ", n, ": ", ms);
    std::printf("  auto: steps by drafts verified {%s}; expected gain over plain %.2f\n", hist.c_str(), e.expected_gain);
    std::printf("  auto's cost model (learned in its last run): pass ms by rows {%s}; draft ms per depth {%s}\n",
                pass.c_str(), draft.c_str());
  }
  return 0;
}

}  // namespace

void register_bench(CLI::App& app, CommandResult& result) {
  auto a = std::make_shared<BenchArgs>();
  CLI::App* cmd = app.add_subcommand("bench", "Measure bandwidth, draft/decode/verify costs and speculative speedup");
  cmd->add_option("--model", a->model,
                  "checkpoint directory (with the MTP module, or DSpark stages: then the DSpark bench)")->required();
  cmd->add_option("--mtp-model", a->mtp_model,
                  "DSpark bench: a checkpoint of the same target with an MTP module, run end to end beside it");
  cmd->add_option("--e2e-model,--aligned-model", a->e2e_model,
                  "checkpoint of the end-to-end runs (default: --model itself; use a mirror preset for real "
                  "partial acceptance)");
  cmd->add_flag("--json", a->json, "print one JSON object");
  cmd->add_option("--threads", a->threads, "threads (0 = all cores)");
  cmd->add_option("--context", a->context, "tokens prefilled before timing decode steps")->capture_default_str();
  cmd->add_option("--reps", a->reps, "repetitions per timing (the median is reported)")->capture_default_str();
  cmd->add_option("--mtp-vocab", a->mtp_vocab, "draft head rows of the limited-vocabulary draft step (0: skip)")
      ->capture_default_str();
  cmd->add_option("--e2e-tokens", a->e2e_tokens, "tokens generated per end-to-end run")->capture_default_str();
  cmd->add_option("--e2e-prompt", a->e2e_prompt,
                  "prompt tokens of the end-to-end runs (default: the sliding window + 32, past the first window)");
  cmd->add_option("--e2e-rounds", a->e2e_rounds, "interleaved rounds of the end-to-end runs (median reported)")
      ->capture_default_str();
  cmd->add_option_function<std::string>(
         "--e2e-draft-head", [a](const std::string& name) { a->e2e_draft_head = parse_draft_head_format(name); },
         "draft head of the end-to-end runs: target, fp8 or int4")
      ->check(CLI::IsMember({"target", "fp8", "int4"}))
      ->default_str("target");
  cmd->add_option("--bandwidth-gib", a->bandwidth_gib, "buffer of the bandwidth measurement (GiB)")
      ->capture_default_str();
  cmd->callback([a, &result] { result.exit_code = run_bench(*a); });
}

}  // namespace dsv4::cli
