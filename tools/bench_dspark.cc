#include "bench_dspark.h"

#include <algorithm>
#include <cstdio>

#include <nlohmann/json.hpp>

#include "backend/cpu/cpu_backend.h"
#include "dsv4_bench/dspark_bench.h"
#include "dsv4_bench/memory_bandwidth.h"
#include "core/error.h"

namespace dsv4::cli {

namespace {

nlohmann::json figures_json(const bench::StepFigures& f) {
  return {{"ms", f.ms}, {"weight_bytes", f.weight_bytes}, {"cache_bytes", f.cache_bytes}, {"gbs", f.gbs()},
          {"bandwidth_gbs", f.bandwidth_gbs}, {"fraction_of_bandwidth", f.fraction_of_bandwidth()}};
}

nlohmann::json e2e_json(const std::vector<bench::EndToEnd>& runs, double plain_tokens_per_s) {
  nlohmann::json j = nlohmann::json::array();
  for (const bench::EndToEnd& e : runs)
    j.push_back({{"draft", e.name()},
                 {"tokens_per_s", e.tokens_per_s},
                 {"round_tokens_per_s", e.round_tokens_per_s},
                 {"speedup", plain_tokens_per_s > 0 ? e.tokens_per_s / plain_tokens_per_s : 0.0},
                 {"acceptance_by_position", e.acceptance_by_position},
                 {"mean_accepted_length", e.mean_accepted_length},
                 {"verified_per_step", e.verified_per_step},
                 {"partial_share", e.partial_share}});
  return j;
}

void print_e2e(const char* title, const std::vector<bench::EndToEnd>& runs, double plain_tokens_per_s) {
  std::printf("\n  %s\n  %-6s %9s %8s %8s %9s  %s\n", title, "draft", "tokens/s", "speedup", "tok/step", "verified",
              "acceptance by position");
  for (const bench::EndToEnd& e : runs) {
    std::string by;
    for (double x : e.acceptance_by_position) by += (by.empty() ? "" : " ") + std::to_string(x).substr(0, 4);
    std::printf("  %-6s %9.2f %8.2f %8.2f %9.2f  %s\n", e.name().c_str(), e.tokens_per_s,
                plain_tokens_per_s > 0 ? e.tokens_per_s / plain_tokens_per_s : 0.0, e.mean_accepted_length,
                e.verified_per_step, by.c_str());
  }
}

// A step's cost composed for a target of `layers` layers from the measured passes of this checkpoint's
// `own` layers: the head as measured, every layer at the mean cost of this checkpoint's layers.
struct Projection {
  const bench::DSparkBenchResult& r;
  int64_t own = 0, layers = 0;
  double pass_ms(int64_t rows) const {
    const double head = r.head.at(rows).ms, body = r.verify.at(rows).ms - head;
    return head + body * double(layers) / double(own);
  }
  // Speedup over plain decoding of K drafts whose cumulative acceptance by position is `accepted`.
  double speedup(int64_t k, const std::vector<double>& accepted) const {
    double tokens = 1;
    for (int64_t j = 0; j < k && j < int64_t(accepted.size()); ++j) tokens += accepted[size_t(j)];
    const int64_t written = std::min<int64_t>(int64_t(tokens + 0.5), k + 1);
    const double step = r.draft.at(k).ms + pass_ms(k + 1) + r.ring_writes.at(std::max<int64_t>(written, 1)).ms;
    return tokens * pass_ms(1) / step;
  }
};

// Cumulative acceptance r, r², ... (a geometric profile).
std::vector<double> geometric(double rate, int64_t n) {
  std::vector<double> c;
  double p = 1;
  for (int64_t j = 0; j < n; ++j) c.push_back(p *= rate);
  return c;
}

}  // namespace

int run_dspark_bench_command(const DSparkBenchArgs& a) {
  auto progress = [&](const std::string& s) {
    if (!a.json) std::fprintf(stderr, "  .. %s\n", s.c_str());
  };
  nlohmann::json j;
  bench::DSparkBenchResult r;
  std::string isa;
  int threads = 0;
  double bw = 0;
  std::vector<bench::EndToEnd> dspark_runs, mtp_runs;
  int64_t prompt = 0, layers = 0;
  {
    auto engine = Engine::open(a.model, {{BackendKind::Cpu, a.threads}, true, 0, 16});
    DSV4_CHECK(engine->dspark, a.model, ": no DSpark drafter to measure");
    auto* cpu = dynamic_cast<CpuBackend*>(engine->backend.get());
    DSV4_CHECK(cpu, "bench: needs the CPU backend");
    threads = cpu->num_threads();
    isa = isa_name(cpu->isa());
    layers = engine->config().num_hidden_layers;
    const bench::BandwidthResult b =
        bench::measure_read_bandwidth(cpu->pool(), size_t(a.bandwidth_gib * double(size_t(1) << 30)));
    progress("memory read bandwidth " + std::to_string(b.gbs) + " GB/s");
    bench::BandwidthProbe probe(cpu->pool(), size_t(256) << 20);
    bench::DSparkBenchOptions o;
    o.context = a.context;
    o.reps = a.reps;
    o.progress = progress;
    o.bandwidth = [&] { return probe.sample(); };
    r = bench::run_dspark_bench(*engine, o);
    r.bandwidth_samples.insert(r.bandwidth_samples.begin(), b.all_gbs.begin(), b.all_gbs.end());
    bw = bench::median(r.bandwidth_samples);
    prompt = a.e2e_prompt > 0 ? a.e2e_prompt : engine->config().sliding_window + 32;
    std::vector<DraftLength> lengths = {{0, false}};
    for (int k = 1; k <= int(r.block); ++k) lengths.push_back({k, false});
    lengths.push_back({0, true});
    progress("end to end with the DSpark drafter");
    dspark_runs = bench::run_end_to_end(*engine, lengths, prompt, a.e2e_tokens, 7, a.e2e_rounds);
  }
  if (!a.mtp_model.empty()) {
    auto engine = Engine::open(a.mtp_model, {{BackendKind::Cpu, a.threads}, true, 0, 16});
    DSV4_CHECK(engine->mtp, a.mtp_model, ": no MTP module to compare with");
    std::vector<DraftLength> lengths = {{0, false}};
    for (int k = 1; k <= int(r.block); ++k) lengths.push_back({k, false});
    lengths.push_back({0, true});
    progress("end to end with the MTP module on " + a.mtp_model);
    mtp_runs = bench::run_end_to_end(*engine, lengths, prompt, a.e2e_tokens, 7, a.e2e_rounds);
  }

  const double plain = dspark_runs.front().tokens_per_s;
  // What a step with K drafts must accept to beat plain decoding: (T_draft(K) + T_verify(K+1) +
  // T_rings) / T_verify(1) tokens, i.e. that many minus one accepted drafts on average.
  std::map<int64_t, double> break_even;
  for (auto& [k, f] : r.draft)
    break_even[k] = (f.ms + r.verify.at(k + 1).ms + r.ring_writes.at(1).ms) / r.verify.at(1).ms - 1.0;
  // The full model (43 layers) composed from this checkpoint's passes: at the acceptance measured end
  // to end, and at published-like profiles (DSpark on real V4-Flash-0731: ~1.85 drafts accepted of 5,
  // a geometric 0.69 per position; and 0.5, a weaker text).
  const Projection full{r, layers, 43};
  const std::vector<std::pair<std::string, std::vector<double>>> profiles = {
      {"measured", dspark_runs.back().acceptance_by_position},
      {"geometric 0.69 (~1.85 of 5)", geometric(0.69, r.block)},
      {"geometric 0.5", geometric(0.5, r.block)}};
  for (const auto& [name, acc] : profiles)
    for (int64_t k = 1; k <= r.block; ++k) {
      std::vector<double> by_k = acc;
      if (name == "measured" && size_t(k) < dspark_runs.size() && dspark_runs[size_t(k)].k == k)
        by_k = dspark_runs[size_t(k)].acceptance_by_position;
      j["projection_43_layers"][name][std::to_string(k)] = full.speedup(k, by_k);
    }
  j["projection_43_layers"]["plain_step_ms"] = full.pass_ms(1);
  j["model"] = a.model;
  j["threads"] = threads;
  j["kernels"] = isa;
  j["context"] = r.context;
  j["target_layers"] = layers;
  j["prefill_tokens_per_s"] = double(r.context) / r.prefill_seconds;
  j["mem_bandwidth_gbs"] = bw;
  j["block"] = r.block;
  j["stages"] = r.stages;
  j["draft_step_bytes"] = {{"stages_dense", r.stage_dense_bytes},     {"stage_experts", r.stage_expert_bytes},
                           {"stage_experts_count", r.stage_experts},   {"lm_head", r.head_bytes},
                           {"markov_per_draft", r.markov_row_bytes},   {"confidence", r.confidence_bytes},
                           {"ring_write_per_call", r.main_proj_bytes}};
  for (auto& [k, f] : r.draft) j["draft_step"][std::to_string(k)] = figures_json(f);
  for (auto& [n, f] : r.verify) j["verify"][std::to_string(n)] = figures_json(f);
  for (auto& [n, f] : r.head) j["head"][std::to_string(n)] = figures_json(f);
  for (auto& [n, f] : r.ring_writes) j["ring_writes"][std::to_string(n)] = figures_json(f);
  for (auto& [k, t] : break_even) j["break_even_accepted_per_step"][std::to_string(k)] = t;
  j["end_to_end"] = {{"prompt_tokens", prompt}, {"new_tokens", a.e2e_tokens}, {"rounds", a.e2e_rounds},
                     {"dspark", e2e_json(dspark_runs, plain)}};
  if (!mtp_runs.empty()) {
    j["end_to_end"]["mtp_model"] = a.mtp_model;
    j["end_to_end"]["mtp"] = e2e_json(mtp_runs, plain);
  }
  if (a.json) {
    std::printf("%s\n", j.dump(1).c_str());
    return 0;
  }

  std::printf("dsv4 bench (DSpark): %s\n  threads %d, kernels %s, %lld target layers, %lld stages, block %lld, context "
              "%lld (prefill %.1f tokens/s), memory read bandwidth %.2f GB/s\n",
              a.model.c_str(), threads, isa.c_str(), (long long)layers, (long long)r.stages, (long long)r.block,
              (long long)r.context, double(r.context) / r.prefill_seconds, bw);
  std::printf("  a draft step reads: stages %.1f MB + %lld routed experts %.1f MB, LM head %.1f MB, Markov %.1f MB a "
              "draft, confidence %.3f MB; ring writes %.1f MB a verification\n",
              double(r.stage_dense_bytes) / 1e6, (long long)r.stage_experts, double(r.stage_expert_bytes) / 1e6,
              double(r.head_bytes) / 1e6, double(r.markov_row_bytes) / 1e6, double(r.confidence_bytes) / 1e6,
              double(r.main_proj_bytes) / 1e6);
  std::printf("\n  %-28s %9s %10s %8s %7s\n", "step (median ms)", "ms", "weight MB", "GB/s", "of bw");
  auto line = [&](const std::string& name, const bench::StepFigures& f) {
    std::printf("  %-28s %9.2f %10.1f %8.2f %6.0f%%\n", name.c_str(), f.ms, double(f.weight_bytes) / 1e6, f.gbs(),
                100.0 * f.fraction_of_bandwidth());
  };
  for (auto& [k, f] : r.draft) line("draft step, K = " + std::to_string(k), f);
  for (auto& [n, f] : r.verify) line("target pass, " + std::to_string(n) + " rows", f);
  for (auto& [n, f] : r.head) line("  of it the head, " + std::to_string(n) + " rows", f);
  for (auto& [n, f] : r.ring_writes) line("ring writes, " + std::to_string(n) + " rows", f);
  std::printf("\n  to beat plain decoding a step of K drafts must accept on average:");
  for (auto& [k, t] : break_even) std::printf("  K=%lld: %.2f", (long long)k, t);
  std::printf(" drafts\n");
  std::printf("\n  the full model (43 layers, each at this checkpoint's mean layer cost; plain step %.0f ms):\n"
              "  speedup over plain decoding, DSpark K drafts at these acceptances\n  %-30s", full.pass_ms(1), "");
  for (int64_t k = 1; k <= r.block; ++k) std::printf("   K=%lld", (long long)k);
  std::printf("\n");
  for (const auto& [name, acc] : profiles) {
    std::printf("  %-30s", name.c_str());
    for (int64_t k = 1; k <= r.block; ++k) std::printf("  %5.2f", j["projection_43_layers"][name][std::to_string(k)].get<double>());
    std::printf("\n");
  }
  print_e2e(("end to end, DSpark (" + std::to_string(prompt) + " prompt tokens, " + std::to_string(a.e2e_tokens) +
             " new, greedy, median of " + std::to_string(a.e2e_rounds) + " interleaved rounds):")
                .c_str(),
            dspark_runs, plain);
  if (!mtp_runs.empty())
    print_e2e(("end to end, MTP on the same target (" + a.mtp_model + "), speedup over the DSpark run's plain:").c_str(),
              mtp_runs, plain);
  return 0;
}

}  // namespace dsv4::cli
